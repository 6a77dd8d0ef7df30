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
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside; on the way out the collector is as it was.  Nested
    uses keep it paused until the outermost ends; usable as a decorator."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
