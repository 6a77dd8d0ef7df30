"""The metric registry: what each entry must hold, the error for an unknown name, and the
README's metric table and references, which are rendered from it."""

from __future__ import annotations

import re
import runpy

import pytest
from conftest import REPO_ROOT

from pll_harness import masking
from pll_harness.metrics import DEFAULT_METRIC, METRICS, PLL_METRICS, check_metric, get_metric
from pll_harness.tools.metrics import parse_metrics


def test_an_unknown_metric_is_refused_with_the_valid_ones_and_the_default():
    listed = re.escape(", ".join(PLL_METRICS))
    with pytest.raises(ValueError, match=f"Unknown pll_metric 'within_word_l2r'.*{listed}"):
        check_metric("within_word_l2r")
    with pytest.raises(ValueError, match=f"default {DEFAULT_METRIC!r}"):
        get_metric(None)


@pytest.mark.parametrize("tool", [check_metric, parse_metrics])
def test_minicons_name_of_a_metric_is_refused_with_ours(tool):
    """A minicons user types its names; the error says which of ours it is, for pll-mlm and
    the tools alike, and says nothing of the kind for other unknown names."""
    with pytest.raises(ValueError, match="'within_word_l2r' is minicons' name for 'word_l2r'"):
        tool("within_word_l2r")
    # None, pll-mlm's pll_metric=None (for the tools, all metrics): no minicons name either
    for other in ("word_l2l", None) if tool is check_metric else ("word_l2l",):
        with pytest.raises(ValueError) as error:
            tool(other)
        assert "minicons" not in str(error.value)


def test_each_entry_plans_with_masking_and_is_told_apart_in_plots():
    """A plan is one of the masking module's functions (the ones its tests check); labels
    and colours tell the metrics apart in the tools' tables and plots."""
    assert DEFAULT_METRIC in METRICS
    for metric in METRICS.values():
        assert getattr(masking, metric.plan.__name__) is metric.plan
        assert re.fullmatch("#[0-9a-f]{6}", metric.colour)
        assert metric.hidden and metric.label and metric.source and metric.citation
    for field in ("plan", "label", "colour"):
        assert len({getattr(m, field) for m in METRICS.values()}) == len(METRICS), field


def test_the_readme_metric_table_and_references_are_the_registry():
    """The README's table of metrics and its references are the registry's rendering, row
    for row (adding a metric: run scripts/render_metric_table.py)."""
    script = runpy.run_path(str(REPO_ROOT / "scripts" / "render_metric_table.py"))
    readme = (REPO_ROOT / "README.md").read_text()
    assert script["replace_table"](readme) == readme, "run scripts/render_metric_table.py"
    assert len(script["render"]()) == 2 + len(METRICS)
    for metric in METRICS.values():
        assert f"- {metric.citation}\n" in readme


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_a_device_in_the_metrics_place_says_to_name_it(device):
    """minicons' MaskedLMScorer(model, device) carried over to from_pretrained(model, ...)."""
    with pytest.raises(ValueError, match=f"a device\\? .* pass device='{device}' by name"):
        get_metric(device)
    with pytest.raises(ValueError) as error:
        get_metric("l2r")
    assert "device" not in str(error.value)
