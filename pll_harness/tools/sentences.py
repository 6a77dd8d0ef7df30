"""Sentences in: text, CSV/TSV and JSONL files (optionally gzipped) or standard input, and
the packaged EventsAdapt pairs."""

from __future__ import annotations

import gzip
import io
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, TypeVar

from pll_harness.encoding import lone_surrogate
from pll_harness.file_formats import (
    COMPRESSION_SUFFIXES,
    CSV_QUOTING_RULE,
    DELIMITERS,
    SENTENCE_FILE_FORMATS,
    MalformedCSV,
    format_from_name,
    strict_csv_rows,
)
from pll_harness.scorer import check_sizes

T = TypeVar("T")

TEXT_COLUMNS = ("sentence", "text", "sent", "sentences")
SUPPORTED_INPUTS = (
    "text (one sentence per line: .txt or any other name), .csv, .tsv or JSON Lines "
    "(.jsonl, .json), each optionally gzipped (.gz), or - for standard input"
)
BINARY_SUFFIXES = frozenset(
    {
        *(suffix for suffix in COMPRESSION_SUFFIXES if suffix != ".gz"),
        *(".parquet", ".arrow", ".feather", ".orc", ".avro", ".pkl", ".pickle", ".npy"),
        *(".npz", ".h5", ".hdf5", ".xlsx", ".xls", ".ods", ".zip", ".tar", ".7z"),
    }
)
"""Names of files that are not text: read line by line they would fail as "not UTF-8
text", which sends the user to re-encode a file that needs converting."""


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


def detect_format(path: str | None, explicit: str | None = None) -> str:
    """``txt``, ``csv``, ``tsv`` or ``jsonl`` from ``explicit`` or the file name (``.gz``
    set aside); any other name is a text file, unless it says a binary format or another
    compression (``.parquet``, ``.bz2``), which is refused."""
    if explicit and explicit not in SENTENCE_FILE_FORMATS:
        raise ValueError(
            f"Unknown input format {explicit!r}: use {', '.join(SENTENCE_FILE_FORMATS)}."
        )
    if path is not None and path != "-":
        _check_supported(path)
    if explicit:
        return explicit
    if path is None or path == "-":
        return "txt"
    fmt = format_from_name(path, compressions=(".gz",))
    return fmt if fmt in SENTENCE_FILE_FORMATS else "txt"


def _check_supported(path: str) -> None:
    """Refuse a name that says a binary format or a compression other than gzip, whatever
    ``--input-format`` says: that names the layout of the text, not how to unpack it."""
    suffixes = [suffix.lower() for suffix in PurePath(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    if suffixes and suffixes[-1] in BINARY_SUFFIXES:
        raise ValueError(
            f"{path}: {suffixes[-1]} files are not supported. The inputs read are "
            f"{SUPPORTED_INPUTS}: convert it to one of these."
        )


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
    as_table: str = "Pass --input-format csv, tsv or jsonl to read it as a table.",
) -> list[Sentence]:
    """Sentences from a text file (one per line; blank lines skipped), a CSV/TSV file or a
    JSONL file (``column`` names the text field; by default ``sentence`` or ``text``, or the
    only column).  ``-`` reads standard input.  Ids are ``id_column``'s values (strings or
    JSON integers), else the sentence's 0-based position among the sentences read.
    ``as_table`` tells, in the calling command's options, how to have a text file read as a
    table, when a column was named for one.

    Texts must be strings that UTF-8 can hold: JSON can also write numbers, lists and lone
    surrogates (``"\\ud800"``), which would be scored as their Python spelling or stop the
    tokenizer with a traceback."""
    fmt = detect_format(path, fmt)
    if fmt == "txt":
        named = [f"--{o}" for o, v in (("column", column), ("id-column", id_column)) if v]
        if named:
            raise ValueError(
                f"{path} is read as plain text, one sentence per line (its name does not end "
                f"in .csv, .tsv or .jsonl), so {' and '.join(named)} "
                f"{'does' if len(named) == 1 else 'do'} not apply. {as_table}"
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
    return [
        Sentence(
            row_id(path, index + 1, row, id_column) if id_column is not None else str(index),
            row_text(path, index + 1, row, text_column).strip(),
        )
        for index, row in enumerate(rows)
    ]


def row_text(path: str, number: int, row: dict[str, Any], column: str) -> str:
    """Row ``number``'s text in ``column``: a string with something besides whitespace,
    that UTF-8 can hold."""
    text = row.get(column)
    if text is not None and not isinstance(text, str):
        raise ValueError(
            f"{path}: row {number}: {column!r} is {_json_shown(text)}, not a string; write "
            "the text as a JSON string."
        )
    if text is None or not text.strip():
        raise ValueError(f"{path}: row {number} has an empty {column!r}.")
    _check_utf8(path, number, column, text)
    return text


def row_id(path: str, number: int, row: dict[str, Any], column: str) -> str:
    """Row ``number``'s id in ``column``: a string, or a JSON integer.  A float, boolean or
    null would become an id such as ``1.0``, ``True`` or ``None`` that the file never
    says."""
    if column not in row:
        raise ValueError(f"{path}: row {number} has no {column!r}; every row needs its id.")
    ident = row[column]
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        raise ValueError(
            f"{path}: row {number}: the id {_json_shown(ident)} in {column!r} is not a string "
            "or an integer; write ids as JSON strings or whole numbers."
        )
    if isinstance(ident, str):
        _check_utf8(path, number, column, ident)
    return str(ident)


def _json_shown(value: Any) -> str:
    """``value`` as JSON writes it (``null``, ``true``), at most 40 characters."""
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _check_utf8(path: str, number: int, column: str, text: str) -> None:
    """Refuse a lone surrogate (:func:`~pll_harness.encoding.lone_surrogate`) as the file's
    row, before any output file is made: the scorer would name the text only."""
    at = lone_surrogate(text)
    if at is not None:
        raise ValueError(
            f"{path}: row {number}: {column!r} is not UTF-8 text: it holds a lone surrogate "
            f"({text[at]!r} at character {at}); fix or drop it."
        )


def read_rows(path: str, fmt: str | None = None) -> list[dict]:
    """The records of a CSV/TSV or JSONL file (optionally .gz; ``-`` reads standard input).

    CSV and TSV cells are quoted as CSV quotes them (``file_formats.CSV_QUOTING_RULE``); a
    row's missing trailing fields are absent from its record."""
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
        return _csv_records(path, handle, DELIMITERS[fmt])


def _csv_records(path: str, handle: io.TextIOBase, delimiter: str) -> list[dict]:
    """The rows after the header, read strictly: a lenient reader takes a stray quote for
    the start of a quoted cell, drops it, or lets it swallow every row up to the next one,
    and keeps the last of two columns that share a name."""
    header: list[str] | None = None
    records = []
    try:
        for line, cells in strict_csv_rows(handle, delimiter):
            if not cells:  # a blank line
                continue
            if header is None:
                header = _checked_header(path, cells)
            elif len(cells) > len(header):
                raise ValueError(
                    f"{path}: line {line} has {len(cells)} fields, but the header names "
                    f"{len(header)} columns. Quote the cells that hold the delimiter "
                    f"({delimiter!r}), or use JSON Lines."
                )
            else:
                records.append(dict(zip(header, cells, strict=False)))
    except MalformedCSV as error:
        raise ValueError(f"{path}: {error}. {CSV_QUOTING_RULE}") from None
    return records


def _checked_header(path: str, names: list[str]) -> list[str]:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(
                f"{path}: the header names {name!r} twice; give every column its own name."
            )
        seen.add(name)
    return names


class _DuplicateKey(ValueError):
    """A JSON object that names a field twice (``json`` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) < len(pairs):
        names = [name for name, _ in pairs]
        raise _DuplicateKey(next(name for name in names if names.count(name) > 1))
    return record


def _json_record(path: str, number: int, line: str) -> dict:
    try:
        record = json.loads(line, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: line {number} is not JSON ({error.msg}, column {error.colno}); a JSONL "
            "file holds one JSON object per line."
        ) from None
    except _DuplicateKey as error:
        raise ValueError(
            f"{path}: line {number} names {error.args[0]!r} twice; give every field its own name."
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


def refuse_repeated_ids(ids: Sequence[str], what: str, advice: str) -> None:
    """Refuse ids that are not unique, naming one that repeats: rows are resumed and
    matched by id, so two rows of one id would be one row."""
    seen: set[str] = set()
    for ident in ids:
        if ident in seen:
            raise ValueError(f"{what} ids are not unique: {ident!r} is there twice; {advice}.")
        seen.add(ident)


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
