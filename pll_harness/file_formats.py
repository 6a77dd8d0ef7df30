"""What format a data file holds, told by its name, and how a CSV/TSV file's rows are read:
the one table and the one reader that the researcher tools (sentence files, score outputs)
and the task loader (pair files) share."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import PurePath
from typing import Any

COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")

FORMAT_BY_SUFFIX = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "jsonl",
    ".jsonl": "jsonl",
    ".parquet": "parquet",
}
"""``.json`` files are read as JSON Lines, one record per line, as ``datasets`` reads them."""

SENTENCE_FILE_FORMATS = ("txt", "csv", "tsv", "jsonl")
"""What the tools read sentences from (here, not beside the reader, so that the command
line can offer them without importing torch)."""

SCORE_FILE_FORMATS = ("csv", "jsonl")
"""What the tools write scores to."""


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


CSV_FAULTS = {
    "unexpected end of data": "a quoted cell is never closed",
    "expected after": "text follows the closing quote of a quoted cell",
}
"""The csv module's errors for malformed quoting (strict mode), in words."""


class MalformedCSV(ValueError):
    """A row that strict CSV refuses: ``line``, where it starts, and ``fault``, why."""

    def __init__(self, line: int, error: csv.Error) -> None:
        message = str(error)
        self.line = line
        self.fault = next((f for key, f in CSV_FAULTS.items() if key in message), message)
        super().__init__(f"line {line}: {self.fault}")


def lift_csv_field_limit() -> None:
    """Let the csv module read fields of any length: its default limit (128 KiB) would stop
    a long text in an input, and in an output make resuming take the row for damage."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # the C long of every platform


def strict_csv_rows(lines: Iterable[str], delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """Each row of a CSV/TSV text (blank lines included, as ``[]``) with the line it starts
    on, read by the csv module in strict mode under :data:`CSV_QUOTING_RULE`; the first row
    that the rule refuses raises :class:`MalformedCSV`.  ``lines`` is a file opened with
    ``newline=""``, so that a quoted cell keeps its line breaks."""
    lift_csv_field_limit()
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    while True:
        line = reader.line_num + 1  # where the next row starts
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise MalformedCSV(line, error) from None
        yield line, cells


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    """Rows as JSON Lines, non-ASCII text kept as written (readable, and what a resume
    compares a row's text with)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
