"""Windows over over-long inputs: every target once, never wider than allowed."""

from __future__ import annotations

import pytest

from pll_harness.windows import Window, plan_windows


def covered(windows: list[Window]) -> list[int]:
    return [t for w in windows for t in range(w.target_start, w.target_end)]


CASES = [
    (n_tokens, first_target, capacity)
    for n_tokens in (1, 5, 10, 11, 37, 100, 101)
    for first_target in (0, 3, 9)
    for capacity in (1, 2, 4, 10, 62)
    if first_target < n_tokens
]


@pytest.mark.parametrize(("n_tokens", "first_target", "capacity"), CASES)
def test_every_target_scored_once_inside_its_window(n_tokens, first_target, capacity):
    windows = plan_windows(n_tokens, first_target, capacity)
    assert covered(windows) == list(range(first_target, n_tokens))
    for w in windows:
        assert 0 <= w.start <= w.target_start < w.target_end <= w.end <= n_tokens
        assert w.end - w.start <= capacity


def test_short_input_is_one_window():
    assert plan_windows(10, 4, 62) == [Window(0, 10, 4, 10)]


def test_long_context_is_cut_from_the_left_to_keep_the_continuation():
    assert plan_windows(100, 95, 10) == [Window(90, 100, 95, 100)]


def test_long_continuation_gets_centred_overlapping_windows():
    windows = plan_windows(100, 0, 20)
    assert [(w.target_start, w.target_end) for w in windows] == [
        (i, i + 10) for i in range(0, 100, 10)
    ]
    middle = windows[4]
    assert middle == Window(35, 55, 40, 50)
    assert all(w.end - w.start == 20 for w in windows)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity"):
        plan_windows(5, 0, 0)


@pytest.mark.parametrize(("n_tokens", "first_target", "capacity"), CASES)
def test_windowed_targets_sit_in_the_middle_of_full_windows(n_tokens, first_target, capacity):
    """README: windows of the maximum length, chunks of half of it in their middle (the
    window moved inward only where the text ends)."""
    windows = plan_windows(n_tokens, first_target, capacity)
    if n_tokens - first_target <= capacity:
        assert len(windows) == 1
        return
    chunks = [w.target_end - w.target_start for w in windows]
    assert chunks[:-1] == [max(1, capacity // 2)] * (len(windows) - 1)
    assert chunks[-1] <= max(1, capacity // 2)
    for w in windows:
        assert w.end - w.start == capacity
        left, right = w.target_start - w.start, w.end - w.target_end
        if w.start > 0 and w.end < n_tokens:
            assert abs(left - right) <= 1
        else:
            assert (w.start == 0 and left <= right + 1) or (w.end == n_tokens and right <= left + 1)
