"""The score columns that every tool writes for a scored sentence or word: ``pll_<metric>``
for each metric and, with a causal model, ``causal_model``, ``causal_logprob`` and
``causal_n_tokens``; and the models that a record file's rows must all come from."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pll_harness.loading import model_identity
from pll_harness.models import DEMO_MODEL_DIR, DEMO_MODEL_NAME
from pll_harness.provenance import folder_fingerprint

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
    model (``causal_model``, as :func:`model_identity` gives it), its log-probability and
    token count."""
    fields: dict[str, Any] = {
        pll_column(m): scores[index].logprob for m, scores in per_metric.items()
    }
    if causal_scores is not None:
        fields[CAUSAL_MODEL] = causal_model
        fields[CAUSAL_LOGPROB] = causal_scores[index].logprob
        fields[CAUSAL_N_TOKENS] = len(causal_scores[index].tokens)
    return fields


def scoring_model(
    model: str,
    dtype: str | None = "auto",
    max_length: int | None = None,
    add_prefix_space: bool | None = None,
) -> str:
    """The masked LM as a record's ``model`` field shows it: :func:`model_identity`; for a
    local folder, a digest of its files (``files=...``, :func:`folder_fingerprint`), since
    a model saved again into the folder keeps its path; then each setting that changes its
    numbers and is not the default (``dtype=bfloat16``, ``max_length=128``,
    ``add_prefix_space=True``).  A file
    scored with the defaults by a hub model reads as before, and a resumed file never
    mixes two models' or two settings' scores.  A dtype that a local checkpoint's config
    declares is its default (``auto`` loads it in that dtype), so writing it out resumes
    the same file."""
    if dtype in (None, "auto") or dtype == _declared_dtype(model):
        dtype = None
    settings = {"dtype": dtype, "max_length": max_length, "add_prefix_space": add_prefix_space}
    given = "".join(f" {name}={value}" for name, value in settings.items() if value is not None)
    return model_label(model) + given


def _declared_dtype(model: str) -> str | None:
    """The dtype a local checkpoint's ``config.json`` declares (``dtype``, or transformers
    4's ``torch_dtype``); None where it says none or the model is not a local folder (a hub
    name, whose config this does not fetch)."""
    folder = DEMO_MODEL_DIR if model_identity(model) == DEMO_MODEL_NAME else Path(model)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    declared = (
        config.get("dtype") or config.get("torch_dtype") if isinstance(config, dict) else None
    )
    return declared if isinstance(declared, str) else None


def model_label(model: str) -> str:
    """:func:`model_identity`, and for a local folder the digest of its files.  The
    packaged demo model's too: a later version of the package ships a model trained
    again under the same name.  The digest reads the folder's files: a scorer takes its
    label once (``MLMScorers.label``, ``CausalScorer.label``) rather than per chunk."""
    identity = model_identity(model)
    files = folder_fingerprint(str(DEMO_MODEL_DIR) if identity == DEMO_MODEL_NAME else model)
    return identity if files is None else f"{identity} files={files}"


def scoring_models(model: str, causal: str | None) -> dict[str, str]:
    """The ``model`` field of a record file's rows (``model`` as :func:`scoring_model`
    gives it) and, with a causal model, ``causal_model`` (:func:`model_identity`): every
    row of a resumed file must hold the same, or the file would mix two models' scores."""
    models = {"model": model}
    if causal is not None:
        models[CAUSAL_MODEL] = model_label(causal)
    return models
