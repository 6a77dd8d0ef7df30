"""Keep the CPU engine's resident memory flat over a long run.

glibc serves large allocations with ``mmap`` and returns them on ``free``, but by default
it raises that threshold each time such a block is freed, up to 32 MB.  The engine frees
activation buffers of a few MB every batch, so after a few batches they come from the
heap instead, where blocks of changing sizes fragment and are not given back: on a
bert-base BLiMP run the resident set grew by about 120 MB over 64 sentences.  Setting the
threshold explicitly (to glibc's own initial 128 KiB) switches that adjustment off.  The
price is that every such buffer's pages are faulted in anew: 17% of a bert-base run on a
2-core VM, for 93 MB less peak memory (bench/README.md).  Buffers the engine itself fills
over and over, such as the head's logits, are therefore allocated once per run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

logger = logging.getLogger(f"lm_eval.{__name__}")

M_MMAP_THRESHOLD = -3
"""mallopt parameter number, from glibc's malloc.h."""

MMAP_THRESHOLD_BYTES = 128 * 1024

_pinned = False


def pin_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold once per process; False where the C library is not glibc."""
    global _pinned
    if _pinned:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _pinned = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    if _pinned:
        logger.debug("glibc mmap threshold fixed at %d bytes", MMAP_THRESHOLD_BYTES)
    return _pinned
