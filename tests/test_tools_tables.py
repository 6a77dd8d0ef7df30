"""Numbers as tables show them, and which of them a table marks best."""

from __future__ import annotations

import math

from pll_harness.tools.tables import best_shown, fmt_number


def test_best_is_judged_at_the_precision_shown():
    # 0.304 and 0.301 both show 0.30: both best, whatever lies below the shown digits
    assert [fmt_number(v) for v in (0.304, 0.301)] == ["0.30", "0.30"]
    assert best_shown([0.304, 0.301, 0.2]) == [True, True, False]
    assert best_shown([0.304, 0.296]) == [True, True]  # both show 0.30
    assert best_shown([0.306, 0.304]) == [True, False]  # 0.31 against 0.30
    assert best_shown([0.325, 0.32499999999999996, 0.3], digits=1, scale=100) == [
        True,
        True,
        False,
    ]


def test_closest_to_no_preference_on_either_side():
    assert best_shown([0.4, 0.6, 0.7], digits=1, scale=100, neutral=0.5) == [True, True, False]


def test_nan_and_a_lone_value_are_never_best():
    assert best_shown([math.nan, 0.1, math.nan]) == [False, True, False]
    assert best_shown([0.5]) == [False]
    assert best_shown([math.nan, math.nan]) == [False, False]
