"""The score columns every tool writes per sentence or word."""

from __future__ import annotations

from types import SimpleNamespace

from pll_harness.tools.records import score_columns, score_fields


def _score(logprob, n_tokens=3):
    return SimpleNamespace(logprob=logprob, tokens=("t",) * n_tokens)


def test_fields_follow_the_columns():
    per_metric = {
        "original": [_score(-1.0), _score(-2.0)],
        "word_l2r": [_score(-3.0), _score(-4.0)],
    }
    fields = score_fields(per_metric, 1)
    assert fields == {"pll_original": -2.0, "pll_word_l2r": -4.0}
    assert list(fields) == score_columns(["original", "word_l2r"], causal=False)
    with_causal = score_fields(per_metric, 0, [_score(-5.0, n_tokens=4), _score(-6.0)])
    assert list(with_causal) == score_columns(["original", "word_l2r"], causal=True)
    assert (with_causal["causal_logprob"], with_causal["causal_n_tokens"]) == (-5.0, 4)
