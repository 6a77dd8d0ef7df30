#!/usr/bin/env python3
"""Bring files back from the device tool's $OUT in pieces that pass its limits, and join them.

The device tool returns at most 8 files from $OUT, each at most 16 MiB and 64 MiB together,
and a GPU machine is bare at the next call: whatever a training leaves on its disk is lost
unless it is under $OUT within those limits. A pll-demo export may weigh up to 30 MB
(``model.safetensors``), over the per-file limit, so on the device ``pack`` puts the given
files and folders into one tar archive (uncompressed: float16 weights barely compress) cut
into pieces of ``--piece-mib`` (default 15) and writes a manifest with the size and SHA-256
of every piece and of the whole archive; here ``unpack`` checks every piece against the
manifest, joins them and extracts the archive, so the files come back byte for byte::

    # on the device, after training
    python3 scripts/device_bundle.py pack --name pll-demo --out "$OUT" EXPORT_DIR META.json
    # here, in the folder that the run's files came back to
    python scripts/device_bundle.py unpack pll-demo.json .demo-train/from-device

Standard library only, so it runs on the device's bare Python too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
import tempfile
from pathlib import Path

MIB = 2**20
# The device tool's limits on what comes back from $OUT (its README, "Limits").
OUT_MAX_FILES = 8
OUT_MAX_FILE_BYTES = 16 * MIB
OUT_MAX_TOTAL_BYTES = 64 * MIB


def sha256_of(block: bytes) -> str:
    return hashlib.sha256(block).hexdigest()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def pack(sources: list[Path], out: Path, name: str, piece_mib: float = 15) -> dict:
    """Archive ``sources`` (each under its own name) into ``out/<name>.tar.NNN`` pieces and
    ``out/<name>.json``; return the manifest. Refuses what the device tool would not return."""
    piece_bytes = int(piece_mib * MIB)
    if not 0 < piece_bytes <= OUT_MAX_FILE_BYTES:
        raise SystemExit(f"--piece-mib {piece_mib}: use more than 0 and at most 16")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise SystemExit(f"two sources share a name: {names}")
    missing = [str(s) for s in sources if not s.exists()]
    if missing:
        raise SystemExit(f"nothing to pack at {missing}")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # never a whole archive in $OUT
        whole = Path(tmp) / f"{name}.tar"
        with tarfile.open(whole, "w", format=tarfile.PAX_FORMAT) as tar:
            for source in sources:
                tar.add(source, arcname=source.name)
            members = sorted(m.name for m in tar.getmembers() if m.isfile())
        manifest = {"archive_bytes": whole.stat().st_size, "archive_sha256": sha256(whole)}
        pieces = []
        with open(whole, "rb") as f:
            for i, block in enumerate(iter(lambda: f.read(piece_bytes), b"")):
                piece = out / f"{name}.tar.{i:03d}"
                piece.write_bytes(block)
                pieces.append({"name": piece.name, "bytes": len(block), "sha256": sha256_of(block)})
    manifest.update(pieces=pieces, members=members)
    (out / f"{name}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    warn_over_limits(out)
    return manifest


def warn_over_limits(out: Path) -> None:
    """Say (on stderr, where the run's output shows it) if $OUT holds more than comes back."""
    files = [p for p in out.rglob("*") if p.is_file()]
    big = [p.name for p in files if p.stat().st_size > OUT_MAX_FILE_BYTES]
    total = sum(p.stat().st_size for p in files)
    if len(files) > OUT_MAX_FILES or big or total > OUT_MAX_TOTAL_BYTES:
        print(
            f"warning: {out} holds {len(files)} files, {total / MIB:.1f} MiB (over 16 MiB: "
            f"{big or 'none'}); the device tool returns at most {OUT_MAX_FILES} files of 16 MiB, "
            "64 MiB in all",
            file=sys.stderr,
        )


def unpack(manifest_path: Path, dest: Path) -> list[str]:
    """Check the pieces beside ``manifest_path``, join them and extract into ``dest`` (which
    must not exist yet); return the extracted files' names."""
    manifest = json.loads(manifest_path.read_text())
    folder = manifest_path.parent
    if dest.exists():
        raise SystemExit(f"{dest} exists: unpack into a new folder")
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "archive.tar"
        with open(whole, "wb") as f:
            for piece in manifest["pieces"]:
                path = folder / piece["name"]
                if not path.is_file():
                    raise SystemExit(f"piece {path} is missing: did every file come back?")
                block = path.read_bytes()
                if len(block) != piece["bytes"] or sha256_of(block) != piece["sha256"]:
                    raise SystemExit(f"piece {path} differs from the manifest (size or SHA-256)")
                f.write(block)
        if whole.stat().st_size != manifest["archive_bytes"] or (
            sha256(whole) != manifest["archive_sha256"]
        ):
            raise SystemExit("the joined pieces differ from the archive the manifest describes")
        dest.mkdir(parents=True)
        with tarfile.open(whole) as tar:
            tar.extractall(dest, filter="data")
    return manifest["members"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="on the device: archive files into pieces under --out")
    p.add_argument("sources", nargs="+", type=Path, help="files or folders to bring back")
    p.add_argument("--out", type=Path, required=True, help="the device tool's $OUT")
    p.add_argument("--name", default="bundle", help="file name stem of pieces and manifest")
    p.add_argument("--piece-mib", type=float, default=15)
    u = sub.add_parser("unpack", help="here: check, join and extract the pieces")
    u.add_argument("manifest", type=Path, help="<name>.json, with its pieces beside it")
    u.add_argument("dest", type=Path, help="a new folder to extract into")
    args = ap.parse_args(argv)
    if args.command == "pack":
        m = pack(args.sources, args.out, args.name, args.piece_mib)
        print(f"packed {len(m['members'])} files into {len(m['pieces'])} pieces under {args.out}")
    else:
        members = unpack(args.manifest, args.dest)
        print(f"unpacked {len(members)} files into {args.dest}: {', '.join(members)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
