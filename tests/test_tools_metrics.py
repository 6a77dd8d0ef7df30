"""The tools' metric names, labels and colours come from the registry, and the --metric
parser."""

from __future__ import annotations

import pytest

from pll_harness.metrics import METRICS, PLL_METRICS
from pll_harness.tools.metrics import CAUSAL_COLOUR, metric_colour, metric_label, parse_metrics


def test_parse_metrics():
    assert parse_metrics("all") == list(PLL_METRICS)
    assert parse_metrics(None) == list(PLL_METRICS)
    assert parse_metrics(["original,word_l2r", "original"]) == ["original", "word_l2r"]
    with pytest.raises(ValueError, match="Choose one of"):
        parse_metrics("l2r")


def test_an_unknown_metric_names_the_tools_default():
    """The tools' --metric defaults to 'all' (their --help and docs/tools.md), not to
    pll-mlm's word_l2r, which the registry's own error names."""
    with pytest.raises(ValueError, match="Unknown pll_metric 'l2r'") as error:
        parse_metrics("original,l2r")
    message = str(error.value)
    assert "'all' (the default)" in message
    assert all(name in message for name in PLL_METRICS)
    assert "word_l2r'" not in message


def test_labels_and_colours_are_the_registry_s():
    assert [metric_label(m) for m in PLL_METRICS] == [METRICS[m].label for m in PLL_METRICS]
    assert [metric_colour(m) for m in PLL_METRICS] == [METRICS[m].colour for m in PLL_METRICS]
    assert metric_colour("causal") == CAUSAL_COLOUR
    assert len({metric_colour(m) for m in [*PLL_METRICS, "causal"]}) == len(PLL_METRICS) + 1


def test_an_unknown_metric_has_no_label_or_colour():
    with pytest.raises(KeyError):
        metric_label("global_l2r")
    with pytest.raises(KeyError):
        metric_colour("global_l2r")


def test_empty_names_in_a_metric_list_are_skipped():
    """``--metric original,`` (a trailing comma, or two in a row when a list is edited)
    means the metrics named, not an unknown metric ''."""
    assert parse_metrics("original,") == ["original"]
    assert parse_metrics("original,, word_l2r") == ["original", "word_l2r"]
