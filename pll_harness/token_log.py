"""The adapter's token log: every request's per-token scores, one JSON line each.

lm-eval keeps one ``(logprob, is_greedy)`` per request; the token log keeps the tokens
behind it.  One writer at a time: the file is locked from start-up to the end of the run,
so two runs never interleave their records, and each batch of records goes to the file in
one flushed write, so a killed run leaves whole records (at most the last one cut short).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from pll_harness.file_formats import jsonl_text
from pll_harness.file_lock import LocksUnavailable, lock

TAIL_BLOCK = 1 << 16
"""Bytes read at a time from the end of a log, looking for its last whole line."""

TOKEN_LOG_MODES = ("new", "overwrite", "append")
"""What ``token_log_mode`` does with an existing token log: refuse it, empty it, add to it."""


def check_mode(mode: str) -> None:
    if mode not in TOKEN_LOG_MODES:
        raise ValueError(
            f"token_log_mode={mode!r} is not valid; use one of {', '.join(TOKEN_LOG_MODES)}."
        )


class TokenLog:
    """An open, locked token log.  ``mode`` applies to an earlier run's records: ``new``
    refuses them at start-up, so a second run never mixes its records into the first's;
    ``overwrite`` drops them when this run writes its first records (so a run that stops
    before scoring anything leaves them); ``append`` keeps them (all but a last record cut
    short by a killed run)."""

    def __init__(self, path: Path, mode: str) -> None:
        check_mode(mode)
        if path.is_dir():
            raise ValueError(
                f"token_log={path} is a folder; name a file in it, such as {path / 'tokens.jsonl'}."
            )
        self.path = path
        self._made_folders = [folder for folder in path.parents if not folder.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._handle: BinaryIO = open(path, "xb")  # noqa: SIM115 - held open for the lock
            self._created = True
        except FileExistsError:
            self._handle = open(path, "ab")  # noqa: SIM115 - held open for the lock
            self._created = False
        try:
            lock(self._handle, path, "another run with the same token_log, in this process or not")
            if mode == "new" and os.fstat(self._handle.fileno()).st_size > 0:
                raise ValueError(
                    f"token_log={path} already holds records. Pass token_log_mode=overwrite "
                    "to replace them or token_log_mode=append to add to them, or choose a new "
                    "file."
                )
            if mode == "append":
                self._drop_cut_record()
        except LocksUnavailable:
            self.discard()
            raise
        except BaseException:
            self._handle.close()
            raise
        self._drop_earlier = mode == "overwrite"

    def _drop_cut_record(self) -> None:
        """Cut the file after its last whole line: a killed run can leave its last record
        short, and this run's first record must not be glued to it."""
        with open(self.path, "rb") as reader:
            end = reader.seek(0, os.SEEK_END)
            while end > 0:
                start = max(0, end - TAIL_BLOCK)
                reader.seek(start)
                block = reader.read(end - start)
                if b"\n" in block:
                    end = start + block.rfind(b"\n") + 1
                    break
                end = start
        if end < os.fstat(self._handle.fileno()).st_size:
            self._handle.truncate(end)

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        """Add ``records`` in one flushed write."""
        text = jsonl_text(records)
        if self._drop_earlier:
            self._handle.truncate(0)
            self._drop_earlier = False
        self._handle.write(text.encode("utf-8"))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Release the file (and its lock) before the run's end, e.g. in a notebook."""
        self._handle.close()

    def discard(self) -> None:
        """Close the log, and remove it and the folders made for it if this run created it
        and wrote nothing: for a run that fails as it starts, which would otherwise leave
        an empty log behind (or as it meets a file system without locks).  The file goes
        before its lock does, so that no other run locks a file that no longer has a name."""
        if self._created and os.fstat(self._handle.fileno()).st_size == 0:
            self.path.unlink(missing_ok=True)
            for folder in self._made_folders:  # the deepest first
                try:
                    folder.rmdir()
                except OSError:  # no longer empty: another file went there meanwhile
                    break
        self._handle.close()
