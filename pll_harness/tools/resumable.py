"""Record files (CSV with a header, or JSONL) that a run appends to chunk by chunk, that a
later run resumes, and that one process at a time may write.

- One writer: the file is locked (``flock``) from opening (or, for a new file, creating) to
  closing, and a second writer is refused.  The lock belongs to the open file, so the system
  releases it when the process ends, however it ends: no stale lock after SIGKILL.
- Nothing written before the run can start: opening reads and checks; the file is created,
  trimmed and given its header by ``start``, once the models have loaded and every other
  output has been opened and checked, so a run that fails at start-up leaves no file behind.
- Durable chunks: each chunk goes to the file in one write, flushed and fsync'ed.
- Checked on resume: the file must hold whole records, possibly followed by one record cut
  short by a killed write, which is dropped (whatever the texts contain: quoted newlines in
  CSV, line separators in JSONL), or by blank lines (an editor's final newline), which are
  dropped too.  Anything else (a fragment between records, a duplicate
  key, other columns) is refused, so a damaged file is never taken for a finished one.
"""

from __future__ import annotations

import csv
import errno
import io
import itertools
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, BinaryIO

from pll_harness.file_formats import (
    COMPRESSION_SUFFIXES,
    SCORE_FILE_FORMATS,
    format_from_name,
    jsonl_text,
    lift_csv_field_limit,
)
from pll_harness.file_lock import LocksUnavailable, lock
from pll_harness.provenance import split_commit

BOM = "\ufeff"
"""The byte-order mark that spreadsheet programs put before a file's first cell: read past
when a file is resumed, as the input reader reads past it."""

ENCODING = "utf-8"
ERRORS = "surrogateescape"
"""Undecodable bytes (a UTF-8 sequence cut in two) survive decoding and re-encoding, so
character offsets map back to byte offsets exactly."""


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
        if explicit not in SCORE_FILE_FORMATS:
            raise ValueError(f"Unknown output format {explicit!r}: use csv or jsonl.")
        if named is not None and named != explicit:
            raise ValueError(f"{what} {path} is named .{named} but the format asked is {explicit}.")
        return explicit
    if not path:
        return "csv"
    if named is not None and named not in SCORE_FILE_FORMATS:
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


class RecordFile:
    """A locked CSV or JSONL file of records whose fields are ``columns`` (JSONL records may
    hold the ``nested`` fields too), with ``key`` fields unique per record and the ``fixed``
    fields (among ``columns``: the models' labels) holding one value in every record, a
    hub model's commit checked once it has loaded (:meth:`confirm`).

    Opening only reads: ``records`` holds what an earlier run wrote (nothing with
    ``overwrite``), checked, and an existing file is locked; a file that does not exist yet
    is only checked to be creatable.  :meth:`start` creates the file, drops a cut-short last
    record and writes the CSV header.  A run calls it once everything that can make it fail
    at start-up has passed (models loaded, every output opened and checked), so that such a
    failure leaves no file, nor a header with no records, behind.
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
        numeric: Sequence[str] = (),
    ) -> None:
        self.path, self.fmt, self.columns = path, fmt, list(columns)
        self._name = path.absolute()
        """The file's name for :meth:`_check_in_place`, whatever the working folder is then."""
        self.numeric = tuple(numeric)
        self.key, self.nested = tuple(key), tuple(nested)
        self.fixed = dict(fixed or {})
        self.overwrite = overwrite
        self.records: list[dict[str, Any]] = []
        self.handle: BinaryIO | None = None
        self.started = False
        self._whole_bytes: int | None = None
        self._record_ends: list[int] = []
        """Where each record read back ends, in bytes (after the CSV header)."""
        self._created = False
        if not path.exists():
            check_creatable(path)
            return
        if not path.is_file() and not path.is_dir():
            raise ValueError(
                f"{path} is not a file but a pipe or a device: an output is read back to be "
                "resumed, so it must be a file. Give a file name, or leave out -o to write to "
                "standard output."
            )
        self.handle = open(path, "r+b")  # noqa: SIM115 - held open for the lock
        try:
            lock(self.handle, path, "another `pll-harness` command with the same output")
            if not overwrite:
                self.records = self._read_back()
            self._check_fixed()
        except BaseException:
            self.close()
            raise

    def start(self) -> None:
        """Make the file ready for :meth:`append`: created (with its folder) and locked if
        it did not exist, emptied with ``overwrite`` or when it holds no whole record,
        otherwise trimmed to its whole records; a CSV starts with its header."""
        if self.handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.handle = open(self.path, "xb")  # noqa: SIM115 - held open for the lock
            except FileExistsError:
                raise ValueError(
                    f"{self.path} was created by another run while this one started; run "
                    "this command again once that one is done (it resumes the file), or write "
                    "to another file."
                ) from None
            try:
                lock(self.handle, self.path, "another `pll-harness` command with the same output")
            except BaseException as error:
                empty = os.fstat(self.handle.fileno()).st_size == 0
                self.close()
                self.handle = None
                if isinstance(error, LocksUnavailable) and empty:  # ours alone, and empty
                    self.path.unlink(missing_ok=True)
                raise
            self._created = True
        if self.overwrite or not self.records:
            self.handle.truncate(0)
            if self.fmt == "csv":
                self._append(csv_text(self.columns, [], header=True))
        elif self._whole_bytes is not None:
            self.handle.truncate(self._whole_bytes)
        self.started = True

    def remove_if_created(self) -> None:
        """Close the file, and delete it if :meth:`start` created it: for a run that fails
        after starting this file but before writing any record (another of its files could
        not start).  The file goes before the lock does: another run that opened it in
        between would lock a file with no name and write its records into nothing."""
        if self._created:
            self.path.unlink(missing_ok=True)
        self.close()

    def confirm(self, fixed: Mapping[str, str]) -> None:
        """Check the records again against the ``fixed`` values as the loaded models give
        them, and write those: a hub model's label has its commit only once the model has
        loaded (online, ``main`` may have moved since the file was opened)."""
        if dict(fixed) != self.fixed:
            self.fixed = dict(fixed)
            self._check_fixed()

    def _check_fixed(self) -> None:
        """Every record must hold this run's value of each ``fixed`` field (the model that
        scored it): a resumed file would otherwise mix two runs' numbers.  A hub model's
        commit is compared once this run's value has one (:meth:`confirm`); records without
        one, written before labels named it, are resumed with a warning."""
        uncommitted: dict[str, str] = {}
        ours = {name: split_commit(value) for name, value in self.fixed.items()}
        for record in self.records:
            for name, value in self.fixed.items():
                written, written_commit = split_commit(str(record[name]))
                label, commit = ours[name]
                if written != label:
                    raise ValueError(
                        f"{self.path} was written with {name} {record[name]}, but this run "
                        f"has {name} {value}; resuming would mix the two. Use --overwrite or "
                        "another output file."
                    )
                if commit is None or written_commit == commit:
                    continue
                if written_commit is not None:
                    raise ValueError(
                        f"{self.path} was written with {name} {label} at commit "
                        f"{written_commit}, but this run loaded commit {commit}: the hub's "
                        "main moved between the two runs, and resuming would mix two versions "
                        "of the model. Use --overwrite or another output file: the commands "
                        "load a hub model's main, and to keep a new output to one version, "
                        "score a snapshot folder of it (its rows then name its files, not "
                        "this file's commit)."
                    )
                uncommitted[name] = f"{label} at commit {commit}"
        for name, value in uncommitted.items():
            print(
                f"pll-harness: warning: {self.path} was written before records named a hub "
                f"model's commit, so whether its rows were scored by {name} {value}, as this "
                "run's are, cannot be checked; the rows this run adds name it.",
                file=sys.stderr,
            )

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Add ``rows``, with the ``fixed`` fields' values, in one durable write."""
        rows = [self._laid_out(row) for row in rows]
        if rows:
            text = csv_text(self.columns, rows, False) if self.fmt == "csv" else jsonl_text(rows)
            self._append(text)

    def _laid_out(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with the ``fixed`` values, its fields in the order of ``columns`` (then
        the ``nested`` ones it has): ``columns`` is the one definition of a record's layout,
        in a JSONL line as in a CSV row, whatever order the caller built ``row`` in."""
        row = {**row, **self.fixed}
        return {
            **{column: row[column] for column in self.columns},
            **{name: row[name] for name in self.nested if name in row},
        }

    def keep_first(self, count: int) -> None:
        """Make :meth:`start` cut the file after its first ``count`` records.  A cut is one
        truncation, which a kill at any moment leaves done or not done: nothing kept is
        ever rewritten."""
        assert self.handle is not None and not self.overwrite and count <= len(self.records)
        self.records = self.records[:count]
        self._whole_bytes = self._record_ends[count - 1] if count else self._header_bytes

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def _append(self, text: str) -> None:
        assert self.handle is not None, "append after start()"
        self._check_in_place()
        self.handle.seek(0, os.SEEK_END)
        self.handle.write(text.encode(ENCODING, ERRORS))
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def _check_in_place(self) -> None:
        """Stop when the file this run holds no longer has its name: removed, or replaced
        by another file (``sed -i``, an editor's save).  Written on, the records would go to
        a file that no one can read, and the run would report them written; and a run
        started on the name meanwhile writes the other file, unrefused."""
        assert self.handle is not None
        if os.name != "posix":  # elsewhere file ids may be 0, and an open file stays put
            return
        held = os.fstat(self.handle.fileno())
        try:
            named = os.stat(self._name)
        except (FileNotFoundError, NotADirectoryError):
            named = None
        except OSError:  # a folder on the way that cannot be read now: no telling
            return
        if named is None or not os.path.samestat(named, held):
            raise ValueError(
                f"{self.path} was removed or replaced by another file while this run wrote "
                "it, so what it would write now would be lost. Re-run the command to resume "
                "the file that has that name now (or to start it anew if there is none)."
            )

    def _read_back(self) -> list[dict[str, Any]]:
        """The whole records; where a cut-short one follows them, :meth:`start` drops it."""
        assert self.handle is not None
        self.handle.seek(0)
        text = self.handle.read().decode(ENCODING, ERRORS)
        bom = len(BOM.encode()) if text.startswith(BOM) else 0  # a spreadsheet saved it
        text = text[1:] if bom else text
        if self.fmt == "csv":
            records, ends = self._csv_records(text)
        else:
            records, ends = self._jsonl_records(text)
        end = ends[-1]
        if end < len(text):  # the last record was cut short by an interrupted run
            self._whole_bytes = bom + len(text[:end].encode(ENCODING, ERRORS))
        sizes = [len(text[a:b].encode(ENCODING, ERRORS)) for a, b in itertools.pairwise(ends)]
        self._header_bytes = bom + len(text[: ends[0]].encode(ENCODING, ERRORS))
        self._record_ends = list(itertools.accumulate(sizes, initial=self._header_bytes))[1:]
        seen: set[tuple[str, ...]] = set()
        for record in records:
            # As text: the tools match records by str(id), so a JSONL id edited into the
            # number 0 beside the string "0" is the same sentence, held twice.
            key = tuple(str(record[k]) for k in self.key)
            if key in seen:
                raise DamagedOutput(
                    f"{self.path} holds {'/'.join(self.key)} {'/'.join(map(str, key))} twice "
                    "(written by two runs at once?), so it cannot be resumed. Use --overwrite "
                    "or another output file."
                )
            seen.add(key)
            self._check_numbers(record, key)
        return records

    def _check_numbers(self, record: dict[str, Any], key: tuple[Any, ...]) -> None:
        """A score that does not read as a number (a hand edit, another tool's ``n/a``)
        would be taken for a finished record and stop a later command without a file."""
        for column in self.numeric:
            if not _is_number(record[column]):
                raise self._damaged(
                    f"holds {'/'.join(self.key)} {'/'.join(map(str, key))} with {column} "
                    f"{record[column]!r}, which is not a number"
                )

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

    def _csv_records(self, text: str) -> tuple[list[dict[str, Any]], list[int]]:
        """The whole records, and where the header and each record end (characters)."""
        rows, ends = _whole_csv_rows(text)
        if rows and rows[0] != self.columns:
            raise self._other_fields(rows[0])
        whole = next((i for i, row in enumerate(rows) if len(row) != len(self.columns)), len(rows))
        end = ends[whole - 1] if whole else 0
        tail = "" if _is_blank(text[end:]) else text[end:]
        if tail and not _is_cut_csv_record(tail):
            raise self._damaged(f"is broken after its first {max(whole - 1, 0)} records")
        if not whole:
            if not csv_text(self.columns, [], header=True).startswith(tail):
                raise self._damaged("does not start with this run's header")
            return [], [0]
        records = [dict(zip(self.columns, row, strict=True)) for row in rows[1:whole]]
        return records, ends[:whole]

    def _jsonl_records(self, text: str) -> tuple[list[dict[str, Any]], list[int]]:
        """The records, and where each ends (characters), after a start at 0."""
        end = text.rfind("\n") + 1  # JSON escapes newlines, so records end at "\n" only
        lines = text[:end].split("\n")[:-1]
        while lines and _is_blank(lines[-1]):
            lines.pop()
        records = []
        for number, line in enumerate(lines, start=1):
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
        return records, [0, *itertools.accumulate(len(line) + 1 for line in lines)]


def start_all(files: Sequence[RecordFile]) -> None:
    """:meth:`RecordFile.start` every file, or none: when one cannot start (another run
    created it meanwhile), those this call created are removed again."""
    started: list[RecordFile] = []
    try:
        for record_file in files:
            record_file.start()
            started.append(record_file)
    except BaseException:
        for record_file in started:
            record_file.remove_if_created()
        raise


def check_creatable(path: Path) -> None:
    """Raise the error that creating ``path`` (and its missing folders) would raise, without
    creating anything: its nearest existing ancestor must be a folder this process may
    write in.  A link to nothing is refused: the file could not be created where it is
    (an exclusive create does not follow a link), and its target may be a typo."""
    if path.is_symlink() and not path.exists():
        raise ValueError(
            f"{path} is a link to {os.readlink(path)}, which does not exist: give the path of "
            "the file to write, or create its folder, or remove the link."
        )
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(ancestor))
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(ancestor))


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


def _is_number(value: Any) -> bool:
    """A number, or a CSV cell's text of one (``nan`` included); not a boolean or null."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_blank(text: str) -> bool:
    """Whether ``text`` holds only line ends (or nothing): the blank lines an editor may
    leave after the last record, which a resumed run drops rather than taking the file
    for damaged."""
    return not text.strip("\r\n")


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
