"""Researcher tools behind the ``pll-harness`` command: score, explain, diagnose, compare.

Each sub-command is a Python function too::

    from pll_harness.tools import compare, diagnose, explain, read_sentences, score_file

Plots need the ``tools`` extra (matplotlib, wordfreq): ``pip install 'pll-harness[tools]'``;
matplotlib and wordfreq are imported only when a plot or a frequency is needed.
"""

from __future__ import annotations

from pll_harness.tools.common import (
    CausalScorer,
    MLMScorers,
    read_sentences,
    resolve_model_name,
)
from pll_harness.tools.compare import compare
from pll_harness.tools.diagnose import diagnose
from pll_harness.tools.explain import explain, explain_sentences, plot_explanations
from pll_harness.tools.score import score_file

__all__ = [
    "CausalScorer",
    "MLMScorers",
    "compare",
    "diagnose",
    "explain",
    "explain_sentences",
    "plot_explanations",
    "read_sentences",
    "resolve_model_name",
    "score_file",
]
