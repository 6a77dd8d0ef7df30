"""The CPU allocator setting: mallopt called once per process on glibc (checked on a stand-in
C library), its effect on a real glibc (a freed large block no longer raises the mmap
threshold), and nothing done elsewhere."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from pll_harness import allocator
from pll_harness.runner import PLLRunner

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


class StandInLibc:
    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.answer


@pytest.fixture
def libc(monkeypatch) -> StandInLibc:
    """A glibc Linux whose C library records mallopt calls, in a process not yet pinned."""
    stand_in = StandInLibc(answer=1)
    monkeypatch.setattr(allocator, "_pinned", False)
    monkeypatch.setattr(allocator.platform, "system", lambda: "Linux")
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: stand_in)
    return stand_in


def test_threshold_is_pinned_once_per_process(libc):
    assert allocator.pin_mmap_threshold() is True
    assert allocator.pin_mmap_threshold() is True
    assert libc.calls == [(-3, 128 * 1024)]  # M_MMAP_THRESHOLD in glibc's malloc.h


def test_a_refused_setting_is_reported_and_tried_again(libc):
    libc.answer = 0
    assert allocator.pin_mmap_threshold() is False
    assert allocator.pin_mmap_threshold() is False
    assert len(libc.calls) == 2


def test_other_c_libraries_are_left_alone(libc, monkeypatch):
    monkeypatch.setattr(allocator.platform, "system", lambda: "Darwin")
    assert allocator.pin_mmap_threshold() is False
    assert libc.calls == []


def test_cpu_runner_pins_the_threshold(monkeypatch):
    calls = []
    monkeypatch.setattr("pll_harness.runner.pin_mmap_threshold", lambda: calls.append(1))
    PLLRunner(None, 4, "cpu", 10)
    assert calls == [1]


# Frees a 4 MB mmapped block (which, unpinned, raises glibc's threshold to 4 MB), then
# prints how many mmapped blocks a 1 MB allocation adds: 0 from the heap, 1 if mmapped.
MMAP_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from pll_harness import allocator

    if sys.argv[1] == "pin":
        assert allocator.pin_mmap_threshold()
    libc = ctypes.CDLL("libc.so.6")
    fields = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in fields.split()]

    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(4 << 20))
    before = libc.mallinfo2().hblks
    block = libc.malloc(1 << 20)
    print(libc.mallinfo2().hblks - before)
    libc.free(block)
    """
)


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_pinned_threshold_keeps_large_blocks_out_of_the_heap():
    if tuple(int(part) for part in platform.libc_ver()[1].split(".")[:2]) < (2, 33):
        pytest.skip("mallinfo2 needs glibc 2.33")
    added = {
        mode: subprocess.run(
            [sys.executable, "-c", MMAP_PROBE, mode], capture_output=True, text=True, check=True
        ).stdout.strip()
        for mode in ("default", "pin")
    }
    assert added == {"default": "0", "pin": "1"}
