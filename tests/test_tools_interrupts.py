"""SIGINT and SIGTERM become an exception, held off while a chunk is written."""

from __future__ import annotations

import os
import signal

import pytest

from pll_harness.tools.interrupts import Interrupted, InterruptGuard


@pytest.fixture(autouse=True)
def python_sigint():
    """Python's own Ctrl-C handler, even where the test runner was started with SIGINT
    ignored (a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_raises_at_once_outside_a_hold(signum):
    with pytest.raises(Interrupted) as caught, InterruptGuard():
        os.kill(os.getpid(), signum)
        for _ in range(1000):  # Python runs the handler between bytecodes
            pass
    assert caught.value.signum == signum
    assert isinstance(caught.value, KeyboardInterrupt)


def test_a_signal_waits_for_the_held_block():
    finished = []
    with pytest.raises(Interrupted), InterruptGuard() as guard, guard.hold():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
        finished.append(True)
    assert finished == [True]


def test_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with InterruptGuard():
        assert signal.getsignal(signal.SIGTERM) not in before
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with InterruptGuard():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
