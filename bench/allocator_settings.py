"""Compare glibc malloc settings for the CPU engine: seconds and peak memory of one score().

    python bench/allocator_settings.py --arch nano --all --max-batch-tokens 65536
    python bench/allocator_settings.py --arch bert-base --n 100

Each setting runs in a process of its own (so that peak RSS does not mix): the model is
loaded, 8 sentences warm it up, and one ``PLLScorer.score`` of the sample is timed.  The
settings replace what the runner does through :mod:`pll_harness.allocator`:

- ``now``: the package as it is (thresholds at 32 MB / 64 MB, a trim per length);
- ``pinned-128k``: mmap threshold fixed at 128 KiB, no trims (the previous setting);
- ``glibc-default``: no mallopt, no trims (glibc's own adjustable thresholds);
- ``mmap-32m-trim-per-length``: mmap threshold 32 MB, trim threshold left at 128 KiB;
- ``mmap-8m-16m-trim-per-length``: smaller thresholds, a trim per length.

Prints a markdown table and writes it to ``bench/results/allocator-settings-<machine>-
<date>-<arch>.md``.  Models and data as in ``bench/pll_bench.py``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import time
from pathlib import Path

import pll_bench

from pll_harness.allocator import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD

MB = 1 << 20

SETTINGS = {
    "now": None,
    "pinned-128k": ((128 * 1024, None), False),
    "glibc-default": ((None, None), False),
    "mmap-32m-trim-per-length": ((32 * MB, None), True),
    "mmap-8m-16m-trim-per-length": ((8 * MB, 16 * MB), True),
}


def apply(setting: str) -> None:
    """Make the runner use ``setting`` instead of the package's own."""
    if SETTINGS[setting] is None:
        return
    import pll_harness.runner as runner

    (mmap, trim), trims = SETTINGS[setting]
    libc = ctypes.CDLL("libc.so.6")

    def configure() -> bool:
        if mmap is not None:
            libc.mallopt(M_MMAP_THRESHOLD, mmap)
        if trim is not None:
            libc.mallopt(M_TRIM_THRESHOLD, trim)
        return True

    runner.reuse_freed_blocks = configure
    if not trims:
        runner.release_free_memory = lambda: None


def worker(setting: str, spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    apply(setting)
    from pll_harness import PLLScorer

    scorer = PLLScorer.from_pretrained(
        spec["model"], pll_metric="word_l2r", max_batch_tokens=spec["max_batch_tokens"]
    )
    scorer.score(spec["texts"][:8])
    start = time.perf_counter()
    scorer.score(spec["texts"])
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "peak_rss_mb": pll_bench._peak_rss_mb()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(pll_bench.ARCHITECTURES), default="nano")
    parser.add_argument("--n", type=int, default=300, help="sentences in the sample")
    parser.add_argument("--all", action="store_true", help="all 134,000 BLiMP sentences")
    parser.add_argument("--max-batch-tokens", type=int, help="default: the engine's")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--data", type=Path, default=pll_bench.PACKAGED_DATA / "blimp")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    args.model, args.shared = None, pll_bench.REPO_ROOT.parent / "shared"
    model, description = pll_bench.resolve_model(args)
    texts = pll_bench.benchmark_sentences(args.data, None if args.all else args.n)
    spec = args.out_dir / ".allocator-settings-spec.json"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({**vars(args), "model": str(model), "texts": texts}, default=str))
    lines = [
        f"# glibc malloc settings, {description}",
        "",
        f"`python bench/allocator_settings.py {' '.join(sys.argv[1:])}`: {len(texts)} BLiMP "
        f"sentences, `word_l2r`, max_batch_tokens={args.max_batch_tokens or 'default'}, "
        "one process and one timed `score()` per setting.",
        "",
        "| setting | seconds | peak RSS MB |",
        "| --- | ---: | ---: |",
    ]
    print("\n".join(lines), flush=True)
    try:
        for setting in args.settings:
            result = subprocess.run(
                [sys.executable, __file__, "--worker", setting, str(spec)],
                capture_output=True,
                text=True,
            )
            if result.returncode:
                raise SystemExit(f"setting {setting} failed:\n{result.stderr}")
            row = json.loads(result.stdout.strip().splitlines()[-1])
            lines.append(f"| {setting} | {row['seconds']:.2f} | {row['peak_rss_mb']:.0f} |")
            print(lines[-1], flush=True)
    finally:
        spec.unlink()
    pll_bench.write_lines(args.out_dir, "allocator-settings", lines, f"-{args.arch}")


if __name__ == "__main__":
    main()
