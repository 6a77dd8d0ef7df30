"""Which part of a run each request belongs to: a run scores its requests part by part so
that the host tokenizes and plans the next part while an accelerator runs the current one.

A plan's groups hold every sequence of one length (:mod:`pll_harness.planning`), so no
batch can run before every request is tokenized; tokenizing all of BLiMP took 1.9-2.2 s
on an H100's host while the device waited (bench/README.md).  Parts grow geometrically
(:data:`PART_SHARES`): the first, the only one tokenized before the device starts, is a
thirty-second of the requests; the others are tokenized one after another while the
device runs the parts before, each about twice the one before.

A request's part is a hash of its content, never of its position, so that a part holds
the same requests whoever scores them: data-parallel processes, which each tokenize their
own share, pool the parts and plan the batches one process plans (tests/test_distributed.py),
and requests given in another order are scored in the same batches.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from pll_harness.encoding import refuse_unreadable

T = TypeVar("T")

PART_SHARES = (1, 2, 4, 8, 17)
"""Each part's share of the requests, in 32ths, in the order the parts run."""

PARTS_FROM = 32_768
"""Fewest distinct requests in a run that is split into parts.  Each part adds a partly filled
batch per sequence length, about a millisecond of an H100's time each on bert-base, 0.15 s
for five parts of BLiMP's 35 lengths; tokenizing takes 7-15 microseconds a request on its
host, so splitting pays from 10,000-20,000 requests on, and a smaller run (a 2,000-sentence
sample, a task under ``--limit``) keeps its full batches."""

_BOUNDS = np.cumsum(PART_SHARES) * (1 << 32) // sum(PART_SHARES)


def request_digests(requests: Sequence[tuple[str, str]]) -> np.ndarray:
    """A 64-bit digest of each ``(context, continuation)``: the same in every process and
    Python version, as ``hash()`` of a string is not.  It sets a request's part
    (:func:`request_parts`), and processes that each hold some requests count the distinct
    ones of all by it (two requests share one with probability 2**-64)."""
    try:
        return np.fromiter(
            (
                int.from_bytes(
                    hashlib.blake2b(f"{context}\0{continuation}".encode(), digest_size=8).digest(),
                    "little",
                )
                for context, continuation in requests
            ),
            dtype=np.uint64,
            count=len(requests),
        )
    except UnicodeEncodeError:
        refuse_unreadable(text for request in requests for text in request)
        raise


def request_parts(requests: Sequence[tuple[str, str]]) -> np.ndarray:
    """The part of each ``(context, continuation)``: where the top 32 bits of its digest
    fall among the parts' shares of the 32-bit range (0.09 s for all of BLiMP)."""
    return np.searchsorted(_BOUNDS, request_digests(requests) >> np.uint64(32), side="right")


def in_parts(parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that puts ``parts`` part after part (stable within a part), and where each
    part starts in that order, with the total at the end."""
    order = np.argsort(parts, kind="stable")
    bounds = np.searchsorted(parts[order], np.arange(len(PART_SHARES) + 1))
    return order, bounds


def prepared_ahead(items: Iterator[T], name: str = "pll-next-parts") -> MadeAhead[T]:
    """``items``, made one after another in a thread (called ``name``) that starts at
    once, before the caller takes the first, while the caller works on those made before:
    the tokenizer's Rust call and much of numpy release the GIL, and a thread that
    launches work on an accelerator mostly waits for it.  The thread does not wait for the
    caller to take an item before making the next one: then the device waits only when
    preparing all parts up to the next is slower than running all parts up to this one,
    not whenever one part prepares slower than the one before runs.  An error in the
    thread is raised where its item would have come.  A caller that stops early (``close``,
    a ``break``, an error) does not wait for the item in progress, and no item is made
    after it stopped, whether or not it took one.  The thread is a daemon: an interrupted
    process exits without waiting for it either."""
    ready: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()
    stopped = threading.Event()

    def make() -> None:
        try:
            for item in items:
                if stopped.is_set():
                    return
                ready.put((item, None))
        except BaseException as error:  # handed to the caller, raised there
            ready.put((None, error))
            return
        ready.put((_END, None))

    threading.Thread(target=make, name=name, daemon=True).start()
    return MadeAhead(ready, stopped)


_END = object()
"""What the thread of :func:`prepared_ahead` sends after the last item."""


class MadeAhead(Iterator[T]):
    """The items of :func:`prepared_ahead` in order.  Closing it, reaching its end or
    dropping it stops the thread; a generator would not, if closed before its first item."""

    def __init__(
        self, ready: queue.SimpleQueue[tuple[Any, BaseException | None]], stopped: threading.Event
    ) -> None:
        self._ready, self._stopped = ready, stopped

    def __next__(self) -> T:
        if self._stopped.is_set():
            raise StopIteration
        item, error = self._ready.get()
        if error is not None:
            self.close()
            raise error
        if item is _END:
            self.close()
            raise StopIteration
        return item

    def close(self) -> None:
        self._stopped.set()

    def __del__(self) -> None:
        self._stopped.set()
