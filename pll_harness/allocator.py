"""Let the CPU engine reuse its activation memory from batch to batch, and give it back
when the shape of the batches changes.

Every forward pass allocates and frees activation buffers of a few MB, and glibc's malloc
handles such blocks in one of two ways, each costly here:

- *mmap*: each block is a fresh mapping whose pages the kernel faults in and zeroes on
  first write (about 0.8 us per 4 KiB page on a 2-core VM).  With the threshold pinned at
  glibc's initial 128 KiB, this engine's previous setting, bert-base ran about 1.2x and
  all of BLiMP on a nano model 1.04-1.6x slower than now (four noisy runs,
  bench/README.md).
- *the heap*: glibc's default raises its mmap threshold each time a large block is freed,
  so after a few batches the buffers come from the heap, where freed blocks are reused
  without page faults, but blocks of the changing shapes of a long run fragment and are
  never given back: the resident set grew by about 120 MB over 64 bert-base sentences and
  by 210-300 MB over all of BLiMP on the nano model.

So the engine takes the heap and bounds it: :func:`reuse_freed_blocks` fixes both
thresholds at the ceilings glibc's own adjustment reaches on 64-bit systems (blocks up to
32 MB from the heap, up to 64 MB of free memory kept at its top), and the runner calls
:func:`release_free_memory` (``malloc_trim``) whenever the length of its batches changes
and at the end of a run.  The heap then holds at most what the batches of one length
left free, and batches of one length, which share their shapes, reuse each other's
memory.

Intel MKL, which runs torch's float32 matrix products on x86 CPUs, keeps work buffers of
its own for reuse: a few MB for each new matrix shape, never given back, so over a
bert-base run of 150 sentences they grew to 43 MB and lifted the peak by about 30 MB.
:func:`release_free_memory` returns them too: the shapes of one length are reused, so
freeing them when the length changes costs no speed (bench/README.md).

The settings hold for the whole process from the first CPU runner on, so they override a
``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES`` given at
start-up, and they have no effect where another allocator (jemalloc, tcmalloc through
``LD_PRELOAD``) serves ``malloc``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(f"lm_eval.{__name__}")

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""mallopt parameter numbers, from glibc's malloc.h."""

MKL_FREE_BUFFERS = ("mkl_free_buffers", "mkl_serv_free_buffers")
"""MKL's function that returns its memory manager's unused buffers: the documented name, as a
shared MKL (``libmkl_rt``) exports it, and the internal one that torch's wheels export,
which link MKL into ``libtorch_cpu`` without the documented name."""

MMAP_THRESHOLD_BYTES = 32 << 20
"""glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems: larger blocks are still mapped
(and unmapped when freed) one by one."""

TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES
"""Free memory kept at the top of the heap between explicit releases; glibc's own
adjustment sets it to twice the mmap threshold."""

_configured = False


@functools.cache
def _glibc() -> Any | None:
    """The C library, where it is glibc (whose mallopt parameters this module uses)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    return libc


def _mkl_library() -> Any | None:
    """torch's CPU library where torch uses MKL, or None.  Symbols are looked up through the
    libraries it links too, so this finds MKL whether torch's wheel holds it (the internal
    name) or links a shared ``libmkl_rt`` (the documented one)."""
    if not torch.backends.mkl.is_available():
        return None
    for candidate in sorted((Path(torch.__file__).parent / "lib").glob("*torch_cpu.*")):
        try:
            library = ctypes.CDLL(str(candidate))
        except OSError:
            continue
        if any(hasattr(library, name) for name in MKL_FREE_BUFFERS):
            return library
    return None


@functools.cache
def _mkl_free_buffers() -> Callable[[], None] | None:
    library = _mkl_library()
    if library is None:
        return None
    function = next(getattr(library, name) for name in MKL_FREE_BUFFERS if hasattr(library, name))
    function.argtypes, function.restype = [], None
    return function


def reuse_freed_blocks() -> bool:
    """Fix glibc's mmap and trim thresholds once per process; False where the C library
    is not glibc or refuses."""
    global _configured
    if _configured:
        return True
    libc = _glibc()
    if libc is None:
        return False
    _configured = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    logger.debug(
        "glibc malloc: mmap threshold %d bytes, trim threshold %d bytes: %s",
        MMAP_THRESHOLD_BYTES,
        TRIM_THRESHOLD_BYTES,
        "set" if _configured else "refused",
    )
    return _configured


def release_free_memory() -> None:
    """Give MKL's unused work buffers back to malloc, where torch uses MKL, then the free
    pages of every malloc arena back to the system (``malloc_trim``), where the C library is
    glibc.  The runner calls it between batches, when torch's threads are idle."""
    free_mkl_buffers = _mkl_free_buffers()
    if free_mkl_buffers is not None:
        free_mkl_buffers()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
