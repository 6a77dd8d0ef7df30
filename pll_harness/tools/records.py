"""The score columns that every tool writes for a scored sentence or word: ``pll_<metric>``
for each metric and, with a causal model, ``causal_model``, ``causal_logprob`` and
``causal_n_tokens``; and the models that a record file's rows must all come from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CAUSAL_COLUMNS = CAUSAL_MODEL, CAUSAL_LOGPROB, CAUSAL_N_TOKENS = (
    "causal_model",
    "causal_logprob",
    "causal_n_tokens",
)

COUNT_COLUMNS = ("n_tokens", "n_words", "n_multi_token_words")
"""The counts ``score`` writes of each sentence, after its ``id``, ``text`` and ``model``."""


def pll_column(metric: str) -> str:
    return f"pll_{metric}"


TEXT_COLUMNS = frozenset({"id", "text", "model", CAUSAL_MODEL, "word"})
"""The columns of a score table that hold text; every other one holds a number, a whole
one in :data:`COUNT_COLUMNS` and ``causal_n_tokens``."""


def typed_row(row: Mapping[str, str]) -> dict[str, Any]:
    """A row read back from a score table, with its numbers as numbers again."""
    whole = {*COUNT_COLUMNS, CAUSAL_N_TOKENS}
    return {
        key: value if key in TEXT_COLUMNS else int(value) if key in whole else float(value)
        for key, value in row.items()
    }


def number_columns(columns: Sequence[str]) -> list[str]:
    """The columns of a score table that hold numbers: all but :data:`TEXT_COLUMNS`."""
    return [column for column in columns if column not in TEXT_COLUMNS]


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
    model (``causal_model``, as :func:`model_label` gives it), its log-probability and
    token count."""
    fields: dict[str, Any] = {
        pll_column(m): scores[index].logprob for m, scores in per_metric.items()
    }
    if causal_scores is not None:
        fields[CAUSAL_MODEL] = causal_model
        fields[CAUSAL_LOGPROB] = causal_scores[index].logprob
        fields[CAUSAL_N_TOKENS] = len(causal_scores[index].tokens)
    return fields


def scoring_models(model: str, causal: str | None) -> dict[str, str]:
    """The ``model`` field of a record file's rows (``model`` as :func:`scoring_model`
    gives it) and, with a causal model, ``causal_model`` (``causal`` as :func:`model_label`
    gives it): every row of a resumed file must hold the same, or the file would mix two
    models' scores."""
    models = {"model": model}
    if causal is not None:
        models[CAUSAL_MODEL] = causal
    return models
