"""The CPU allocator setting: applied on glibc, a no-op elsewhere, idempotent."""

from __future__ import annotations

import platform

import pytest

from pll_harness import allocator
from pll_harness.runner import PLLRunner


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_cpu_runner_pins_the_mmap_threshold_on_glibc(monkeypatch):
    monkeypatch.setattr(allocator, "_pinned", False)
    calls = []
    real = allocator.pin_mmap_threshold

    def spy():
        calls.append(real())
        return calls[-1]

    monkeypatch.setattr("pll_harness.runner.pin_mmap_threshold", spy)
    PLLRunner(None, 4, "cpu", 10)
    assert calls == [True]  # mallopt accepted the setting
    assert allocator.pin_mmap_threshold() is True  # and a second call is a no-op


def test_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(allocator, "_pinned", False)
    monkeypatch.setattr(allocator.platform, "system", lambda: "Darwin")
    assert allocator.pin_mmap_threshold() is False
