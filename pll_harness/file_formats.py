"""What format a data file holds, told by its name: the one table that the researcher tools
(sentence files, score outputs) and the task loader (pair files) read."""

from __future__ import annotations

from pathlib import PurePath

COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")

FORMAT_BY_SUFFIX = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "jsonl",
    ".jsonl": "jsonl",
    ".parquet": "parquet",
}
"""``.json`` files are read as JSON Lines, one record per line, as ``datasets`` reads them."""


def format_from_name(
    name: str | PurePath, compressions: tuple[str, ...] = COMPRESSION_SUFFIXES
) -> str | None:
    """``csv``, ``tsv``, ``jsonl`` or ``parquet`` from the last suffix of ``name`` once the
    ``compressions`` suffixes are set aside (case does not matter); None when the name does
    not tell."""
    suffixes = [s.lower() for s in PurePath(name).suffixes]
    while suffixes and suffixes[-1] in compressions:
        suffixes.pop()
    return FORMAT_BY_SUFFIX.get(suffixes[-1]) if suffixes else None
