"""The tools' masked LM: loaded once, one scorer per metric; model names for display."""

from __future__ import annotations

from pll_harness.models import DEMO_MODEL_DIR
from pll_harness.tools.models import MLMScorers, short_model_name


def test_the_demo_model_is_found_by_its_short_name():
    scorers = MLMScorers("pll-demo", ["original", "word_l2r"], device="cpu")
    assert scorers.tokenizer.name_or_path == str(DEMO_MODEL_DIR)
    first, second = scorers.scorers.values()
    assert first.model is second.model  # one copy of the weights
    scores = scorers.score(["A cat sat."])
    assert set(scores) == {"original", "word_l2r"}


def test_short_model_name(tmp_path):
    assert short_model_name("bert-base-cased") == "bert-base-cased"
    assert short_model_name("org/model") == "org/model"
    assert short_model_name(f"{tmp_path}/my-bert/") == "my-bert"
    assert short_model_name("./runs/ckpt") == "ckpt"


def test_every_metric_shares_one_model_and_says_a_warning_once(tiny_bert_dir, caplog):
    import logging

    from pll_harness.metrics import PLL_METRICS

    scorers = MLMScorers(tiny_bert_dir, list(PLL_METRICS), device="cpu")
    assert len({id(s.model) for s in scorers.scorers.values()}) == 1
    assert [s.metric for s in scorers.scorers.values()] == list(PLL_METRICS)
    with caplog.at_level(logging.WARNING):
        scorers.score(["The cat [SEP] sat.", "A dog sat."])
    assert caplog.text.count("special tokens written out in the text") == 1


def test_metrics_are_checked_before_the_model_loads():
    import pytest

    with pytest.raises(ValueError, match="No metric given"):
        MLMScorers("no-such-model", [])
    with pytest.raises(ValueError, match="nope"):
        MLMScorers("no-such-model", ["nope"])
