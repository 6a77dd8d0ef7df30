"""collector_paused: no cyclic collection inside, the collector restored as it was on the
way out; the scorer's bulk host steps run inside it, and scoring leaves no reference
cycles that a paused collector would let pile up."""

from __future__ import annotations

import gc

import pytest

from pll_harness import scorer as scorer_module
from pll_harness.collector import collector_paused
from pll_harness.scorer import PLLScorer

TEXTS = ["The hooligan wrecked the souvenir.", "A cat sat.", "Who should Derek hug?"]


@pytest.fixture
def collector_enabled():
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def test_nested_pauses_end_with_the_outermost(collector_enabled):
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_paused_collector_is_restored_after_an_error(collector_enabled):
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled(collector_enabled):
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_pauses_in_two_threads_leave_the_collector_as_it_was(collector_enabled):
    """Sections that overlap across threads: one that reads the collector's state while
    another's pause is on, and ends after it, must not restore the paused state.  Threads
    switch every microsecond so that such overlaps happen; reading and pausing as two
    steps left the collector off after 4-8 of 200 trials."""
    import sys
    import threading

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def pausing() -> None:
        for _ in range(2000):
            with collector_paused():
                pass

    left_off = 0
    try:
        for _ in range(200):
            gc.enable()
            threads = [threading.Thread(target=pausing) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            left_off += not gc.isenabled()
    finally:
        sys.setswitchinterval(interval)
    assert left_off == 0


def test_tokenizing_and_assembling_run_with_the_collector_paused(
    tiny_model_dir, collector_enabled, monkeypatch
):
    scorer = PLLScorer.from_pretrained(tiny_model_dir, "word_l2r", device="cpu")
    seen: dict[str, bool] = {}

    def spying(name, function):
        def spy(*args, **kwargs):
            seen[name] = gc.isenabled()
            return function(*args, **kwargs)

        return spy

    monkeypatch.setattr(
        scorer_module, "encode_requests", spying("tokenize", scorer_module.encode_requests)
    )
    monkeypatch.setattr(scorer, "_token_strings", spying("assemble", scorer._token_strings))
    scorer.score(TEXTS)
    assert seen == {"tokenize": False, "assemble": False}
    assert gc.isenabled()


def test_scoring_leaves_no_reference_cycles(tiny_model_dir, collector_enabled):
    """What the collector would have found had it run throughout: nothing, so pausing it
    cannot let memory pile up (the forward passes' early exit included)."""
    scorer = PLLScorer.from_pretrained(tiny_model_dir, "word_l2r", device="cpu")
    scorer.score(TEXTS)
    gc.collect()
    gc.disable()
    scorer.score([*TEXTS, "The souvenir was lost by the traveler."])
    assert gc.collect() == 0
