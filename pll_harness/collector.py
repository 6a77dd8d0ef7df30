"""Python's cyclic garbage collector, paused while a bulk step builds many objects.

Tokenizing and assembling all of BLiMP create millions of lists, tuples and result
objects, none of them in reference cycles.  The collector still runs every 700 new
objects, and its full passes walk every object alive in the process (lm-eval's requests
included), so it made tokenizing all of BLiMP 0.4-0.9 s slower and assembling up to
0.5 s (``bench/host_steps.py``).  Objects are still freed by reference counting while it
is paused, and scoring leaves no cycles behind (tests/test_collector.py).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
"""How many paused sections are open now, in any thread."""
_was_enabled = False
"""Whether the collector ran before the outermost open section paused it."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside; when the last open section ends, in whatever thread,
    the collector is as it was before the first began.  Sections nest and overlap across
    threads (a run tokenizes its next part in a thread, :mod:`pll_harness.parts`): reading
    and changing the collector's state under one lock, as one count, keeps two threads
    from leaving it paused for good.  Usable as a decorator."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
