"""The CPU allocator settings: both mallopt calls made once per process on glibc (checked
on a stand-in C library), their effect on a real glibc (a large block comes from the heap
and its freed pages stay resident until released), nothing done elsewhere, and MKL's
work buffers given back on release (on torch's own MKL, where it has one)."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch

from pll_harness import allocator
from pll_harness.runner import PLLRunner

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


class StandInFunction:
    """A C function that records its calls (and, like ctypes', takes argtypes)."""

    def __init__(self, name: str, libc: StandInLibc) -> None:
        self.name, self.libc = name, libc

    def __call__(self, *arguments: int) -> int:
        self.libc.calls.append((self.name, *arguments))
        return self.libc.answer


class StandInLibc:
    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.calls: list[tuple] = []
        self.mallopt = StandInFunction("mallopt", self)
        self.malloc_trim = StandInFunction("malloc_trim", self)


@pytest.fixture
def libc(monkeypatch) -> StandInLibc:
    """A glibc Linux whose C library records its calls, in a process not yet configured."""
    stand_in = StandInLibc(answer=1)
    monkeypatch.setattr(allocator, "_configured", False)
    monkeypatch.setattr(allocator.platform, "system", lambda: "Linux")
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: stand_in)
    monkeypatch.setattr(
        allocator, "_mkl_free_buffers", lambda: lambda: stand_in.calls.append(("mkl_free",))
    )
    allocator._glibc.cache_clear()
    yield stand_in
    allocator._glibc.cache_clear()


def test_thresholds_are_set_once_per_process(libc):
    assert allocator.reuse_freed_blocks() is True
    assert allocator.reuse_freed_blocks() is True
    # M_MMAP_THRESHOLD and M_TRIM_THRESHOLD in glibc's malloc.h
    assert libc.calls == [("mallopt", -3, 32 << 20), ("mallopt", -1, 64 << 20)]


def test_a_refused_setting_is_reported_and_tried_again(libc):
    libc.answer = 0
    assert allocator.reuse_freed_blocks() is False
    assert allocator.reuse_freed_blocks() is False
    assert libc.calls == [("mallopt", -3, 32 << 20)] * 2


def test_release_frees_mkl_buffers_then_trims_every_arena(libc):
    allocator.release_free_memory()
    assert libc.calls == [("mkl_free",), ("malloc_trim", 0)]


def test_other_c_libraries_are_left_alone(libc, monkeypatch):
    monkeypatch.setattr(allocator.platform, "system", lambda: "Darwin")
    assert allocator.reuse_freed_blocks() is False
    allocator.release_free_memory()
    assert libc.calls == [("mkl_free",)]


def mkl_buffer_bytes() -> int:
    """Bytes that MKL's memory manager holds (``mkl_mem_stat``, exported by torch's wheels
    under its internal name)."""
    library = allocator._mkl_library()
    stat = getattr(library, "mkl_mem_stat", None) or library.mkl_serv_mem_stat
    stat.restype, stat.argtypes = ctypes.c_int64, [ctypes.POINTER(ctypes.c_int)]
    return stat(ctypes.byref(ctypes.c_int()))


@pytest.mark.skipif(allocator._mkl_library() is None, reason="torch without MKL")
def test_mkl_work_buffers_are_given_back():
    weight = torch.randn(512, 256)
    with torch.inference_mode():
        for rows in (97, 211, 389):  # shapes no other test multiplies
            torch.nn.functional.linear(torch.randn(rows, 256), weight)
    held = mkl_buffer_bytes()
    if held == 0:
        pytest.skip("this MKL kept no work buffers for these products")
    allocator.release_free_memory()
    assert mkl_buffer_bytes() == 0


def test_only_cpu_runners_configure_the_allocator(monkeypatch):
    calls = []
    monkeypatch.setattr("pll_harness.runner.reuse_freed_blocks", lambda: calls.append(1))
    PLLRunner(None, 4, "meta", 10)
    assert calls == []
    PLLRunner(None, 4, "cpu", 10)
    assert calls == [1]


# Prints, for a 16 MB block written and freed: whether it was mapped on its own (1) or
# came from the heap (0), then how many MB of its pages stay resident after the free and
# after release_free_memory().
PROBE = textwrap.dedent(
    """
    import ctypes, os, sys
    from pll_harness import allocator

    if sys.argv[1] == "configured":
        assert allocator.reuse_freed_blocks()
    libc = ctypes.CDLL("libc.so.6")
    fields = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in fields.split()]

    def rss_mb():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblks
    block = libc.malloc(16 << 20)
    mapped = libc.mallinfo2().hblks - before
    ctypes.memset(block, 1, 16 << 20)
    written = rss_mb()
    libc.free(block)
    freed = rss_mb()
    allocator.release_free_memory()
    released = rss_mb()
    print(mapped, written - freed, written - released)
    """
)


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_freed_blocks_stay_for_reuse_until_released():
    if tuple(int(part) for part in platform.libc_ver()[1].split(".")[:2]) < (2, 33):
        pytest.skip("mallinfo2 needs glibc 2.33")
    # the probe measures glibc's own behaviour: no allocator settings from outside
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MALLOC_") and name not in ("GLIBC_TUNABLES", "LD_PRELOAD")
    }
    outcome = {}
    for mode in ("default", "configured"):
        printed = subprocess.run(
            [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, env=env
        ).stdout.split()
        outcome[mode] = (int(printed[0]), float(printed[1]), float(printed[2]))
    # glibc's default maps the block and unmaps it on free, giving its 16 MB back at once;
    # configured, it comes from the heap, stays resident when freed, and goes on release
    # (1 MB of slack for whatever else the process allocates or frees meanwhile).
    mapped, at_free, at_release = outcome["default"]
    assert mapped == 1 and at_free > 15 and at_release > 15
    mapped, at_free, at_release = outcome["configured"]
    assert mapped == 0 and at_free < 1 and at_release > 15
