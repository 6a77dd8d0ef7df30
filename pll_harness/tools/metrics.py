"""The PLL metrics as the tools name, label and colour them, and the ``--metric`` parser."""

from __future__ import annotations

from collections.abc import Sequence

METRIC_NAMES: tuple[str, ...] = ("original", "word_l2r", "whole_word", "sentence_l2r")
DEFAULT_METRIC_NAME = "word_l2r"
"""``pll_harness.masking.PLL_METRICS`` and ``DEFAULT_METRIC``, repeated here so that the
command line starts without importing torch (a test checks that they agree)."""

METRIC_LABELS = {
    "original": "PLL-original",
    "word_l2r": "PLL-word-l2r",
    "whole_word": "PLL-whole-word",
    "sentence_l2r": "PLL-sentence-l2r",
}
"""The names the paper (Kauf & Ivanova 2023) uses in its figures and tables."""

METRIC_COLORS = {
    "original": "#9e9e9e",
    "word_l2r": "#7b3294",
    "whole_word": "#41ab5d",
    "sentence_l2r": "#e08214",
    "causal": "#2166ac",
}


def parse_metrics(spec: str | Sequence[str] | None) -> list[str]:
    """``all`` (or None) means every metric; otherwise a comma-separated list (or a list
    of such strings) of metric names, checked and de-duplicated in order."""
    from pll_harness.masking import PLL_METRICS, check_metric

    if spec is None:
        return list(PLL_METRICS)
    parts = [spec] if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for part in parts:
        for name in (p.strip() for p in part.split(",")):
            if not name:
                continue
            candidates = list(PLL_METRICS) if name == "all" else [check_metric(name)]
            names.extend(c for c in candidates if c not in names)
    if not names:
        raise ValueError(f"No metric given; choose 'all' or some of: {', '.join(PLL_METRICS)}.")
    return names
