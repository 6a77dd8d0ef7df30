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


def test_a_row_read_back_has_its_counts_whole_and_its_scores_as_floats():
    from pll_harness.tools.records import typed_row
    from pll_harness.tools.score import sentence_columns

    columns = sentence_columns(["original"], causal=True)
    row = dict.fromkeys(columns, "7")
    typed = typed_row(row)
    whole = {c for c, v in typed.items() if type(v) is int}
    assert whole == {"n_tokens", "n_words", "n_multi_token_words", "causal_n_tokens"}
    assert {c for c, v in typed.items() if type(v) is str} == {
        "id",
        "text",
        "model",
        "causal_model",
    }
    assert type(typed["pll_original"]) is type(typed["causal_logprob"]) is float
