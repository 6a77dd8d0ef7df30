"""The tools' metric names: the same as the engine's, and the --metric parser."""

from __future__ import annotations

import pytest

from pll_harness.masking import PLL_METRICS
from pll_harness.tools.metrics import DEFAULT_METRIC_NAME, METRIC_NAMES, parse_metrics


def test_parse_metrics():
    assert parse_metrics("all") == list(PLL_METRICS)
    assert parse_metrics(None) == list(PLL_METRICS)
    assert parse_metrics(["original,word_l2r", "original"]) == ["original", "word_l2r"]
    with pytest.raises(ValueError, match="Choose one of"):
        parse_metrics("l2r")


def test_cli_metric_names_match_engine():
    from pll_harness.masking import DEFAULT_METRIC

    assert METRIC_NAMES == PLL_METRICS
    assert DEFAULT_METRIC_NAME == DEFAULT_METRIC
