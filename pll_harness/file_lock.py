"""One writer per output file: the lock that refuses a second one, and the test of two
names for one file; and the lock by which the runs that use one ``--use_cache`` database
know of each other."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX (Windows): no flock to take
    fcntl = None  # type: ignore[assignment]


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two names lead to one file (``x.csv`` and ``./x.csv``, a link, a hard
    link), whether or not it exists yet."""
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return Path(a).resolve() == Path(b).resolve()


NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS}
"""What ``flock`` answers on a file system that offers no lock at all."""


class LocksUnavailable(ValueError):
    """The file system offers no lock: no other writer can hold the file either, so the
    caller that just created it may remove it again rather than leave an empty file behind
    (a file that another writer holds must never be removed)."""


def lock(handle: BinaryIO, path: Path, other_writer: str) -> None:
    """Take the exclusive lock on ``handle`` or refuse: ``other_writer`` (what probably
    holds it, for the message) writes ``path``.

    The lock (``flock``) belongs to the open file, so the system releases it when the
    file is closed or the process ends, however it ends: no stale lock after SIGKILL.
    A file system that offers no lock (some network mounts answer ENOLCK) is refused with
    what to do: written unlocked, two writers would interleave their records.
    """
    if fcntl is None:
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if isinstance(error, BlockingIOError) or error.errno == errno.EACCES:
            # EACCES: a lock held elsewhere, where flock is emulated with fcntl's locks
            raise ValueError(
                f"{path} is being written by another writer ({other_writer}?). Wait for it "
                "to finish, or write to another file."
            ) from None
        if error.errno not in NO_LOCKS:
            raise
        raise LocksUnavailable(
            f"{path} cannot be locked ({error.strerror}): its file system (a network mount?) "
            "offers no lock by which a second writer of the file would be refused. Write it "
            "to a local disk, and copy it where it belongs once the run is done."
        ) from None


def alone_or_shared(handle: BinaryIO) -> bool:
    """Take ``handle``'s file for this process alone (True) when no other process holds
    it, else share it with them (False; waiting while one holds it alone).  :func:`share`
    then lets others in.  Without ``flock`` (not POSIX) every caller is alone."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        return False
    except OSError:  # a file system without flock (some network mounts): none to take
        return True


def share(handle: BinaryIO) -> None:
    """Turn a lock taken alone (:func:`alone_or_shared`) into a shared one."""
    if fcntl is None:
        return
    with contextlib.suppress(OSError):  # a file system without flock: none was taken
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
