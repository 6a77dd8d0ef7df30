"""Agreement with minicons, an independent PLL implementation (tests/fixtures/README.md says
how its scores were produced). Tolerance: 1e-4 nats per sentence and per token."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import TINY_BERT_DIR, TINY_MODELS, TINY_SENTENCEPIECE_DIR, minicons_run

from pll_harness.metrics import METRICS
from pll_harness.scorer import PLLScorer

TOLERANCE = 1e-4
# The two shared tiny models and the sentencepiece one: WordPiece, byte-level BPE and
# Metaspace/Unigram each draw word boundaries differently, which word_l2r depends on.
MINICONS_MODELS = [*TINY_MODELS, (TINY_SENTENCEPIECE_DIR.name, TINY_SENTENCEPIECE_DIR)]
IN_MINICONS = [name for name, metric in METRICS.items() if metric.minicons]


@pytest.mark.parametrize(
    ("model_name", "model_dir"), MINICONS_MODELS, ids=[n for n, _ in MINICONS_MODELS]
)
@pytest.mark.parametrize("metric", IN_MINICONS)
def test_sentence_and_token_scores_match_minicons(minicons_scores, model_name, model_dir, metric):
    reference = minicons_run(minicons_scores, model_name, metric)
    assert len(reference) >= 50
    scorer = PLLScorer.from_pretrained(str(model_dir), pll_metric=metric, device="cpu")
    ours = scorer.score([entry["text"] for entry in reference])
    for entry, result in zip(reference, ours, strict=True):
        assert result.logprob == pytest.approx(entry["score"], abs=TOLERANCE), entry["text"]
        theirs = [logprob for _, logprob in entry["tokens"]]
        assert result.token_logprobs == pytest.approx(theirs, abs=TOLERANCE), entry["text"]


def test_the_reference_was_scored_with_minicons_name_for_each_metric(minicons_scores):
    """scripts/minicons_reference.py (minicons' venv, no pll_harness) keeps its own copy of
    the registry's ``minicons`` names; the scores it wrote say which it used."""
    used = {(run["metric"], run["minicons_metric"]) for run in minicons_scores["runs"]}
    assert used == {(name, METRICS[name].minicons) for name in IN_MINICONS}


def test_the_two_metrics_disagree_somewhere(minicons_scores):
    """Otherwise the word_l2r comparison above would not test anything beyond original."""
    original = minicons_run(minicons_scores, TINY_BERT_DIR.name, "original")
    word_l2r = minicons_run(minicons_scores, TINY_BERT_DIR.name, "word_l2r")
    differences = [abs(a["score"] - b["score"]) for a, b in zip(original, word_l2r, strict=True)]
    assert max(differences) > 0.1


def test_sentencepiece_reference_keeps_punctuation_in_the_word(
    minicons_scores: dict[str, Any],
) -> None:
    """The comparison checks sentencepiece word grouping only if minicons used it: in
    ``▁s ou v en ir .`` the final ``.`` belongs to the word, so word_l2r masks it while scoring
    ``ir`` (which then differs from original); ``.`` itself has no later piece to mask."""
    last_two: dict[str, dict[str, float]] = {}
    for metric in ("original", "word_l2r"):
        (entry,) = [
            e
            for e in minicons_run(minicons_scores, TINY_SENTENCEPIECE_DIR.name, metric)
            if e["text"] == "The hooligan wrecked the souvenir."
        ]
        last_two[metric] = dict(entry["tokens"][-2:])
    original, word_l2r = last_two["original"], last_two["word_l2r"]
    assert list(original) == ["ir", "."]
    assert abs(original["ir"] - word_l2r["ir"]) > 0.1
    assert original["."] == word_l2r["."]
