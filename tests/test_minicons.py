"""Agreement with minicons, an independent PLL implementation (tests/fixtures/README.md says
how its scores were produced). Tolerance: 1e-4 nats per sentence and per token."""

from __future__ import annotations

import pytest
from conftest import TINY_MODELS, minicons_run

from pll_harness.scorer import PLLScorer

TOLERANCE = 1e-4


@pytest.mark.parametrize(("model_name", "model_dir"), TINY_MODELS, ids=[n for n, _ in TINY_MODELS])
@pytest.mark.parametrize("metric", ["original", "word_l2r"])
def test_sentence_and_token_scores_match_minicons(minicons_scores, model_name, model_dir, metric):
    reference = minicons_run(minicons_scores, model_name, metric)
    assert len(reference) >= 50
    scorer = PLLScorer.from_pretrained(str(model_dir), pll_metric=metric, device="cpu")
    ours = scorer.score([entry["text"] for entry in reference])
    for entry, result in zip(reference, ours, strict=True):
        assert result.logprob == pytest.approx(entry["score"], abs=TOLERANCE), entry["text"]
        theirs = [logprob for _, logprob in entry["tokens"]]
        assert result.token_logprobs == pytest.approx(theirs, abs=TOLERANCE), entry["text"]


def test_the_two_metrics_disagree_somewhere(minicons_scores):
    """Otherwise the word_l2r comparison above would not test anything beyond original."""
    original = minicons_run(minicons_scores, "tiny-bert-wordpiece", "original")
    word_l2r = minicons_run(minicons_scores, "tiny-bert-wordpiece", "word_l2r")
    differences = [abs(a["score"] - b["score"]) for a, b in zip(original, word_l2r, strict=True)]
    assert max(differences) > 0.1
