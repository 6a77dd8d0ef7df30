"""Researcher tools behind the ``pll-harness`` command: score, explain, diagnose, compare.

Each sub-command is a Python function too::

    from pll_harness.tools import compare, diagnose, explain, read_sentences, score_file

Plots need the ``tools`` extra (matplotlib, wordfreq): ``pip install '.[tools]'`` in a checkout;
matplotlib and wordfreq are imported only when a plot or a frequency is needed.
"""

from __future__ import annotations

from pll_harness.tools.causal import CausalScorer
from pll_harness.tools.compare import compare
from pll_harness.tools.diagnose import diagnose
from pll_harness.tools.explain import explain, explain_sentences, plot_explanations
from pll_harness.tools.models import MLMScorers
from pll_harness.tools.score import score_file
from pll_harness.tools.sentences import read_sentences

__all__ = [
    "CausalScorer",
    "MLMScorers",
    "compare",
    "diagnose",
    "explain",
    "explain_sentences",
    "plot_explanations",
    "read_sentences",
    "score_file",
]
