"""Pseudo-log-likelihood (PLL) scoring of masked language models for lm-evaluation-harness.

Importing the package is cheap: the torch-backed parts load on first use, so that the
start-up hook that tells lm-eval about ``pll-mlm`` costs nothing until it is needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "PLLMaskedLM": "pll_harness.lm",
    "PLLScorer": "pll_harness.scorer",
    "SentenceScore": "pll_harness.scorer",
    "score": "pll_harness.scorer",
    "PLL_METRICS": "pll_harness.metrics",
}

__all__ = ["PLL_METRICS", "PLLMaskedLM", "PLLScorer", "SentenceScore", "__version__", "score"]

if TYPE_CHECKING:
    from pll_harness.lm import PLLMaskedLM
    from pll_harness.metrics import PLL_METRICS
    from pll_harness.scorer import PLLScorer, SentenceScore, score


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pll_harness' has no attribute {name!r}")
    return getattr(import_module(module), name)
