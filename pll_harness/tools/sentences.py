"""Sentences in: text, CSV/TSV and JSONL files (optionally gzipped) or standard input, and
the packaged EventsAdapt pairs."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from pll_harness.file_formats import format_from_name
from pll_harness.scorer import check_sizes
from pll_harness.tools.resumable import lift_csv_field_limit

T = TypeVar("T")

TEXT_COLUMNS = ("sentence", "text", "sent", "sentences")
INPUT_FORMATS = ("txt", "csv", "tsv", "jsonl")


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


def detect_format(path: str | None, explicit: str | None = None) -> str:
    """``txt``, ``csv``, ``tsv`` or ``jsonl`` from ``explicit`` or the file name (``.gz``
    set aside); any other name is a text file."""
    if explicit:
        if explicit not in INPUT_FORMATS:
            raise ValueError(f"Unknown input format {explicit!r}: use txt, csv, tsv or jsonl.")
        return explicit
    if path is None or path == "-":
        return "txt"
    fmt = format_from_name(path, compressions=(".gz",))
    return fmt if fmt in INPUT_FORMATS else "txt"


def _open_text(path: str) -> io.TextIOBase:
    """UTF-8 text, a byte-order mark (what spreadsheet programs write) dropped, so that it
    becomes neither part of the first sentence nor of the first column's name."""
    if path == "-":
        reconfigure = getattr(sys.stdin, "reconfigure", None)  # absent on stand-ins
        if reconfigure is not None:
            reconfigure(encoding="utf-8-sig")
        return sys.stdin  # type: ignore[return-value]
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")  # type: ignore[return-value]
    return open(path, encoding="utf-8-sig", newline="")


@contextmanager
def _reading(path: str) -> Iterator[io.TextIOBase]:
    """``path`` opened as text; a file that is not UTF-8 stops with what to do."""
    try:
        with _open_text(path) as handle:
            yield handle
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path} is not UTF-8 text ({error.reason} at byte {error.start}). Save it as "
            "UTF-8 and try again."
        ) from None


def read_sentences(
    path: str,
    column: str | None = None,
    id_column: str | None = None,
    fmt: str | None = None,
) -> list[Sentence]:
    """Sentences from a text file (one per line; blank lines skipped), a CSV/TSV file or a
    JSONL file (``column`` names the text field; by default ``sentence`` or ``text``, or the
    only column).  ``-`` reads standard input.  Ids are ``id_column``'s values, else the
    sentence's 0-based position among the sentences read."""
    fmt = detect_format(path, fmt)
    if fmt == "txt":
        if column is not None or id_column is not None:
            raise ValueError(
                f"{path} is read as plain text, one sentence per line (its name does not end "
                "in .csv, .tsv or .jsonl), so --column and --id-column do not apply. Pass "
                "--input-format csv, tsv or jsonl to read it as a table."
            )
        with _reading(path) as handle:
            texts = [line.strip() for line in handle]
        return [Sentence(str(i), t) for i, t in enumerate(t for t in texts if t)]
    rows = read_rows(path, fmt)
    if not rows:
        return []
    fields = list(rows[0].keys())
    text_column = _pick_column(fields, column, path)
    if id_column is not None and id_column not in fields:
        raise ValueError(f"{path}: no id column {id_column!r}; columns are {fields}.")
    sentences = []
    for index, row in enumerate(rows):
        text = row.get(text_column)
        if text is None or not str(text).strip():
            raise ValueError(f"{path}: row {index + 1} has an empty {text_column!r}.")
        ident = str(row[id_column]) if id_column is not None else str(index)
        sentences.append(Sentence(ident, str(text).strip()))
    return sentences


def read_rows(path: str, fmt: str | None = None) -> list[dict]:
    """The records of a CSV/TSV or JSONL file (optionally .gz; ``-`` reads standard input)."""
    fmt = detect_format(path, fmt)
    if fmt not in ("csv", "tsv", "jsonl"):
        raise ValueError(f"{path}: a table is needed (.csv, .tsv or .jsonl), not {fmt}.")
    with _reading(path) as handle:
        if fmt == "jsonl":
            return [
                _json_record(path, number, line)
                for number, line in enumerate(handle, 1)
                if line.strip()
            ]
        lift_csv_field_limit()
        return list(csv.DictReader(handle, delimiter="," if fmt == "csv" else "\t"))


def _json_record(path: str, number: int, line: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: line {number} is not JSON ({error.msg}, column {error.colno}); a JSONL "
            "file holds one JSON object per line."
        ) from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: line {number} is not a JSON object with named fields.")
    return record


def _pick_column(fields: list[str], column: str | None, path: str) -> str:
    if column is not None:
        if column not in fields:
            raise ValueError(f"{path}: no column {column!r}; columns are {fields}.")
        return column
    for name in TEXT_COLUMNS:
        if name in fields:
            return name
    if len(fields) == 1:
        return fields[0]
    raise ValueError(
        f"{path}: which column holds the sentences? Pass --column (columns: {fields})."
    )


def first_items(items: Sequence[T], limit: int | None) -> list[T]:
    """The first ``limit`` of ``items`` (all with None): what ``--limit`` keeps of an input,
    as lm-eval's ``--limit`` keeps the first items of a task.  ``limit`` is a positive
    integer: 0 or -3 would silently keep nothing or drop the last items."""
    check_sizes(limit=limit)
    return list(items[:limit])


def eventsadapt_sentences(limit: int | None = None) -> list[Sentence]:
    """Every sentence of the packaged EventsAdapt pairs (plausible and implausible), with
    ids like ``12-active-good``; ``limit`` keeps the first pairs only."""
    from pll_harness.tasks.catalog import EVENTSADAPT_PAIRS

    check_sizes(limit=limit)

    sentences = []
    with gzip.open(EVENTSADAPT_PAIRS, "rt", encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if limit is not None and index >= limit:
                break
            row = json.loads(line)
            stem = f"{row['ItemNum']}-{row['Voice']}-{row['NumSyn']}"
            sentences.append(Sentence(f"{stem}-good", row["sentence_good"]))
            sentences.append(Sentence(f"{stem}-bad", row["sentence_bad"]))
    return sentences
