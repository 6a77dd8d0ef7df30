"""Record files (CSV with a header, or JSONL) that a run appends to chunk by chunk, that a
later run resumes, and that one process at a time may write.

- One writer: the file is locked (``flock``) from opening to closing, and a second writer is
  refused.  The lock belongs to the open file, so the system releases it when the process
  ends, however it ends: no stale lock after SIGKILL.
- Durable chunks: each chunk goes to the file in one write, flushed and fsync'ed.
- Checked on resume: the file must hold whole records, possibly followed by one record cut
  short by a killed write, which is dropped (whatever the texts contain: quoted newlines in
  CSV, line separators in JSONL).  Anything else (a fragment between records, a duplicate
  key, other columns) is refused, so a damaged file is never taken for a finished one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, BinaryIO

from pll_harness.file_formats import COMPRESSION_SUFFIXES, format_from_name
from pll_harness.file_lock import lock

ENCODING = "utf-8"
ERRORS = "surrogateescape"
"""Undecodable bytes (a UTF-8 sequence cut in two) survive decoding and re-encoding, so
character offsets map back to byte offsets exactly."""


def lift_csv_field_limit() -> None:
    """Let the csv module read fields of any length: its default limit (128 KiB) would stop
    a long text in an input, and in an output make resuming take the row for damage."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # the C long of every platform


OUTPUT_FORMATS = ("csv", "jsonl")


def record_format(
    path: str | Path | None, explicit: str | None = None, what: str = "--output"
) -> str:
    """The format of a record file: ``explicit``, else what its name says (csv when it
    says nothing).  A name that says another format (``.tsv``, ``.parquet``, or ``.csv``
    beside ``explicit`` jsonl) or a compression is refused rather than written over with
    something else: records are appended chunk by chunk, which compressed files do not
    allow."""
    if path and PurePath(path).suffix.lower() in COMPRESSION_SUFFIXES:
        raise ValueError(
            f"{what} {path}: output is written uncompressed (it is appended to chunk by chunk); "
            "drop the compression suffix and compress the file when the run is done."
        )
    named = format_from_name(path) if path else None
    if explicit:
        if explicit not in OUTPUT_FORMATS:
            raise ValueError(f"Unknown output format {explicit!r}: use csv or jsonl.")
        if named is not None and named != explicit:
            raise ValueError(f"{what} {path} is named .{named} but the format asked is {explicit}.")
        return explicit
    if not path:
        return "csv"
    if named is not None and named not in OUTPUT_FORMATS:
        raise ValueError(f"{what} {path}: outputs are .csv or .jsonl, not {named}.")
    return named or "csv"


class DamagedOutput(ValueError):
    """An output file that is not whole records of this run's kind."""


def csv_text(columns: Sequence[str], rows: Iterable[dict[str, Any]], header: bool) -> str:
    """CSV lines (``\\r\\n``-terminated, minimal quoting) of ``rows``' ``columns``."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore")
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


class RecordFile:
    """A locked CSV or JSONL file of records whose fields are ``columns`` (JSONL records may
    hold the ``nested`` fields too), with ``key`` fields unique per record and the ``fixed``
    fields (among ``columns``) holding one value in every record.

    On opening, ``records`` holds what an earlier run wrote (nothing with ``overwrite``);
    a cut-short last record has been dropped from the file.
    """

    def __init__(
        self,
        path: Path,
        fmt: str,
        columns: Sequence[str],
        key: Sequence[str],
        overwrite: bool = False,
        nested: Sequence[str] = (),
        fixed: Mapping[str, str] | None = None,
    ) -> None:
        self.path, self.fmt, self.columns = path, fmt, list(columns)
        self.key, self.nested = tuple(key), frozenset(nested)
        self.fixed = dict(fixed or {})
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle: BinaryIO = open(path, "a+b")  # noqa: SIM115 - held open for the lock
        try:
            lock(self.handle, path, "another `pll-harness` command with the same output")
            self.records: list[dict[str, Any]] = [] if overwrite else self._read_back()
            self._check_fixed()
            if overwrite or not self.records:
                self.handle.truncate(0)
                if fmt == "csv":
                    self._append(csv_text(self.columns, [], header=True))
        except BaseException:
            self.handle.close()
            raise

    def _check_fixed(self) -> None:
        """Every record must hold this run's value of each ``fixed`` field (the model that
        scored it): a resumed file would otherwise mix two runs' numbers."""
        for record in self.records:
            for name, value in self.fixed.items():
                if str(record[name]) != value:
                    raise ValueError(
                        f"{self.path} was written with {name} {record[name]}, but this run "
                        f"has {name} {value}; resuming would mix the two. Use --overwrite or "
                        "another output file."
                    )

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Add ``rows``, with the ``fixed`` fields' values, in one durable write."""
        rows = [{**row, **self.fixed} for row in rows]
        if rows:
            text = csv_text(self.columns, rows, False) if self.fmt == "csv" else jsonl_text(rows)
            self._append(text)

    def replace(self, rows: Sequence[dict[str, Any]]) -> None:
        """Make the file hold exactly ``rows``."""
        self.handle.truncate(0)
        header = self.fmt == "csv"
        text = csv_text(self.columns, rows, header) if header else jsonl_text(rows)
        self._append(text)

    def close(self) -> None:
        self.handle.close()

    def _append(self, text: str) -> None:
        self.handle.write(text.encode(ENCODING, ERRORS))
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def _read_back(self) -> list[dict[str, Any]]:
        self.handle.seek(0)
        text = self.handle.read().decode(ENCODING, ERRORS)
        if self.fmt == "csv":
            records, end = self._csv_records(text)
        else:
            records, end = self._jsonl_records(text)
        if end < len(text):  # the last record was cut short by an interrupted run
            self.handle.truncate(len(text[:end].encode(ENCODING, ERRORS)))
        seen: set[tuple[Any, ...]] = set()
        for record in records:
            key = tuple(record[k] for k in self.key)
            if key in seen:
                raise DamagedOutput(
                    f"{self.path} holds {'/'.join(self.key)} {'/'.join(map(str, key))} twice "
                    "(written by two runs at once?), so it cannot be resumed. Use --overwrite "
                    "or another output file."
                )
            seen.add(key)
        return records

    def _damaged(self, what: str) -> DamagedOutput:
        return DamagedOutput(
            f"{self.path} {what}, so it cannot be resumed. Use --overwrite or another output file."
        )

    def _other_fields(self, fields: Sequence[str]) -> ValueError:
        return ValueError(
            f"{self.path} has columns {list(fields)}, but this run writes {self.columns} "
            "(other metrics, or --causal where the command takes it?). Use another output "
            "file or --overwrite."
        )

    def _csv_records(self, text: str) -> tuple[list[dict[str, Any]], int]:
        rows, ends = _whole_csv_rows(text)
        if rows and rows[0] != self.columns:
            raise self._other_fields(rows[0])
        whole = next((i for i, row in enumerate(rows) if len(row) != len(self.columns)), len(rows))
        end = ends[whole - 1] if whole else 0
        tail = text[end:]
        if tail and not _is_cut_csv_record(tail):
            raise self._damaged(f"is broken after its first {max(whole - 1, 0)} records")
        if not whole:
            if not csv_text(self.columns, [], header=True).startswith(tail):
                raise self._damaged("does not start with this run's header")
            return [], 0
        return [dict(zip(self.columns, row, strict=True)) for row in rows[1:whole]], end

    def _jsonl_records(self, text: str) -> tuple[list[dict[str, Any]], int]:
        end = text.rfind("\n") + 1  # JSON escapes newlines, so records end at "\n" only
        records = []
        for number, line in enumerate(text[:end].split("\n")[:-1], start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                raise self._damaged(f"has a line that is not a record (line {number})")
            fields = [k for k in record if k not in self.nested]
            if set(fields) != set(self.columns):
                raise self._other_fields(fields)
            records.append(record)
        return records, end


def _csv_line_length(text: str, start: int, row: list[str]) -> int | None:
    """Length of ``row`` as written at ``text[start:]`` (by this module, or with ``\\n``
    line ends by another tool), or None when the text there is not that row."""
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerow(row)
    line = buffer.getvalue()
    for variant in (line, line[:-2] + "\n"):
        if text.startswith(variant, start):
            return len(variant)
    return None


def _whole_csv_rows(text: str) -> tuple[list[list[str]], list[int]]:
    """The leading rows of ``text`` that are whole (they read back to the same text, line
    end included), and where each ends."""
    rows: list[list[str]] = []
    ends: list[int] = []
    end = 0
    lift_csv_field_limit()
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    while True:
        try:
            row = next(reader)
        except (StopIteration, csv.Error):
            break
        length = _csv_line_length(text, end, row)
        if length is None:
            break
        end += length
        rows.append(row)
        ends.append(end)
    return rows, ends


def _is_cut_csv_record(tail: str) -> bool:
    """Whether ``tail`` is the beginning of one CSV record, as a killed write leaves it: it
    ends inside a quoted field, or it is one row without its line end."""
    reader = csv.reader(io.StringIO(tail, newline=""), strict=True)
    rows = 0
    try:
        for _ in reader:
            rows += 1
    except csv.Error:
        return rows == 0
    return rows == 1 and not tail.endswith("\n")
