"""The score columns that every tool writes for a scored sentence or word: ``pll_<metric>``
for each metric and, with a causal model, ``causal_model``, ``causal_logprob`` and
``causal_n_tokens``; and the models that a record file's rows must all come from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pll_harness.loading import model_identity

CAUSAL_COLUMNS = ("causal_model", "causal_logprob", "causal_n_tokens")


def pll_column(metric: str) -> str:
    return f"pll_{metric}"


def score_columns(metrics: Sequence[str], causal: bool) -> list[str]:
    """The names of :func:`score_fields`' keys, in their order."""
    return [*(pll_column(m) for m in metrics), *(CAUSAL_COLUMNS if causal else ())]


def score_fields(
    per_metric: Mapping[str, Sequence[Any]],
    index: int,
    causal_scores: Sequence[Any] | None = None,
    causal_model: str = "",
) -> dict[str, Any]:
    """Item ``index``'s summed log-probability under each metric of ``per_metric``
    (``{metric: [SentenceScore, ...]}``) and, when ``causal_scores`` are given, the causal
    model (``causal_model``, as :func:`model_identity` gives it), its log-probability and
    token count."""
    fields: dict[str, Any] = {
        pll_column(m): scores[index].logprob for m, scores in per_metric.items()
    }
    if causal_scores is not None:
        fields["causal_model"] = causal_model
        fields["causal_logprob"] = causal_scores[index].logprob
        fields["causal_n_tokens"] = len(causal_scores[index].tokens)
    return fields


def scoring_models(model: str, causal: str | None) -> dict[str, str]:
    """The ``model`` and (with a causal model) ``causal_model`` fields of a record file's
    rows, each as :func:`model_identity` gives it: every row of a resumed file must hold
    the same, or the file would mix two models' scores."""
    models = {"model": model_identity(model)}
    if causal is not None:
        models["causal_model"] = model_identity(causal)
    return models
