"""Statistics of the desiderata reports."""

from __future__ import annotations

import math

import pytest

from pll_harness.tools.statistics import pearson


def test_pearson():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1, 2, 3], [5, 5, 5]))
    assert math.isnan(pearson([1, 2], [3, 4]))
