"""The score columns that every tool writes for a scored sentence or word: ``pll_<metric>``
for each metric and, with a causal model, ``causal_logprob`` and ``causal_n_tokens``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CAUSAL_COLUMNS = ("causal_logprob", "causal_n_tokens")


def pll_column(metric: str) -> str:
    return f"pll_{metric}"


def score_columns(metrics: Sequence[str], causal: bool) -> list[str]:
    """The names of :func:`score_fields`' keys, in their order."""
    return [*(pll_column(m) for m in metrics), *(CAUSAL_COLUMNS if causal else ())]


def score_fields(
    per_metric: Mapping[str, Sequence[Any]],
    index: int,
    causal_scores: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Item ``index``'s summed log-probability under each metric of ``per_metric``
    (``{metric: [SentenceScore, ...]}``) and, when ``causal_scores`` are given, the causal
    model's log-probability and token count."""
    fields: dict[str, Any] = {
        pll_column(m): scores[index].logprob for m, scores in per_metric.items()
    }
    if causal_scores is not None:
        fields["causal_logprob"] = causal_scores[index].logprob
        fields["causal_n_tokens"] = len(causal_scores[index].tokens)
    return fields
