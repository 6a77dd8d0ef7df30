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


DELIMITERS = {"csv": ",", "tsv": "\t"}
"""The cell delimiter of each delimited format."""

CSV_QUOTING_RULE = (
    "A cell that starts with a double quote is a quoted cell, as CSV writers (Python's csv "
    "module, pandas, spreadsheets) write one: it ends with a quote followed by the "
    "delimiter or the line's end, and the quotes inside it are doubled (the text "
    '"Hi," she said. is the cell """Hi,"" she said."). Quote the cell so, or use JSON Lines.'
)
"""How CSV and TSV cells are read, everywhere (tools and pair tasks), for error messages:
quoting as the csv module writes it, checked in its strict mode, since a lenient reader
(pandas, the csv module's default) joins the text after a closing quote to the cell or
lets an unclosed quote run on over later rows without a word."""
