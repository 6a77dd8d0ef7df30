"""``pll-harness explain``: per-token tables, the two-sentence difference and the chart."""

from __future__ import annotations

import json
import math

import pytest
from tools_support import assert_png

from pll_harness.cli import main
from pll_harness.metrics import PLL_METRICS
from pll_harness.scorer import PLLScorer
from pll_harness.tools.explain import (
    Explanation,
    align,
    difference_report,
    explain,
    explain_sentences,
    plot_explanations,
    token_table,
)
from pll_harness.tools.models import MLMScorers

SOUVENIR = "The traveler lost the souvenir."


@pytest.fixture(scope="module")
def scorers(tiny_bert_dir) -> MLMScorers:
    return MLMScorers(tiny_bert_dir, list(PLL_METRICS), device="cpu")


def test_explanation_matches_scorer(scorers, tiny_bert_dir):
    (explanation,) = explain_sentences(scorers, [SOUVENIR])
    assert explanation.metrics == list(PLL_METRICS)
    reference = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="original", device="cpu")
    (expected,) = reference.score([SOUVENIR])
    assert explanation.tokens == expected.tokens
    assert explanation.token_logprobs["original"] == pytest.approx(expected.token_logprobs)
    # words: "souvenir" is one word of several pieces, the period its own word
    assert "souvenir" in explanation.words and explanation.words[-1] == "."
    spans = explanation.spans
    assert len(spans) == len(explanation.words) == 6
    assert max(b - a for a, b in spans) > 1
    # the first piece of a multi-token word is easier under original than word_l2r
    start = next(a for a, b in spans if b - a > 1)
    lp = explanation.token_logprobs
    assert lp["original"][start] > lp["word_l2r"][start]


def test_token_table_lists_every_token_and_sum(scorers):
    (explanation,) = explain_sentences(scorers, [SOUVENIR])
    table = token_table(explanation)
    lines = table.splitlines()
    assert "PLL-word-l2r" in lines[0] and "PLL-original" in lines[0]
    assert len(lines) == 2 + len(explanation.tokens) + 1
    assert "┌" in table and "└" in table  # multi-piece word grouped
    assert f"{explanation.total('word_l2r'):.2f}" in lines[-1]


def test_difference_rows_sum_to_sentence_difference(scorers):
    a, b = explain_sentences(scorers, ["She is a nurse.", "He is a nurse."])
    rows = align(a, b)
    for metric in PLL_METRICS:
        total = math.fsum(r.delta[metric] for r in rows)
        assert total == pytest.approx(a.total(metric) - b.total(metric), abs=1e-6)
    shared = [r for r in rows if r.token_a == r.token_b]
    assert [r.token_a for r in shared][-3:] == ["a", "nurse", "."]
    report = difference_report(a, b)
    assert "PLL(A) − PLL(B)" in report and "largest shares" in report


def test_plot_has_one_bar_per_token_and_metric(scorers, tmp_path):
    texts = [SOUVENIR, "A cat sat on the mat."]
    explanations = explain_sentences(scorers, texts)
    fig = plot_explanations(explanations)
    axes = fig.axes
    assert len(axes) == 2
    for ax, explanation in zip(axes, explanations, strict=True):
        assert len(ax.containers) == len(PLL_METRICS)
        for container, metric in zip(ax.containers, PLL_METRICS, strict=True):
            heights = [bar.get_height() for bar in container]
            assert heights == pytest.approx(list(explanation.token_logprobs[metric]))
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == list(explanation.tokens)
        multi = [(a, b) for a, b in explanation.spans if b - a > 1]
        word_labels = [t.get_text() for t in ax.texts]
        assert len(word_labels) == len(multi)  # one shaded, labelled band per such word
    assert "souvenir" in [t.get_text() for t in axes[0].texts]
    out = tmp_path / "fig.png"
    fig.savefig(out)
    assert_png(out)


def test_plot_shows_dollar_signs_as_written(tmp_path):
    """Matplotlib reads text between two ``$`` as TeX: a sentence about prices would be
    drawn garbled, or fail to draw at all."""
    text = "It costs $5 or $_$."
    tokens = ("It", "costs", "$", "5", "or", "$", "_", "$", ".")
    word_ids = (0, 1, 2, 3, 4, 5, 5, 5, 6)
    words = ("It", "costs", "$", "5", "or", "$_$", ".")
    explanation = Explanation(text, tokens, word_ids, words, {"original": (-1.0,) * len(tokens)})
    fig = plot_explanations([explanation], title="$model$")
    fig.savefig(tmp_path / "prices.png")
    (ax,) = fig.axes
    assert ax.get_title() == text
    assert [t.get_text() for t in ax.get_xticklabels()] == list(tokens)
    shown = [ax.title, fig._suptitle, *ax.get_xticklabels()]
    assert not any(t.get_parse_math() for t in [*shown, *ax.texts])


def test_explain_function_and_cli(tiny_roberta_dir, tmp_path, capsys):
    out = tmp_path / "two.png"
    text = explain(
        ["She is a nurse.", "He is a nurse."],
        tiny_roberta_dir,
        metrics="original,word_l2r",
        plot=out,
    )
    assert text.startswith("A: She is a nurse.")
    assert "Δ PLL-word-l2r" in text and "PLL-whole-word" not in text
    assert_png(out)

    assert (
        main(["explain", "-m", tiny_roberta_dir, SOUVENIR, "--plot", str(tmp_path / "one.png")])
        == 0
    )
    shown = capsys.readouterr().out
    assert "PLL-sentence-l2r" in shown and "souvenir" in shown
    assert_png(tmp_path / "one.png")

    assert (
        main(
            [
                "explain",
                "-m",
                tiny_roberta_dir,
                "--metric",
                "word_l2r",
                "--json",
                SOUVENIR,
                "--plot",
                str(tmp_path / "j.png"),
            ]
        )
        == 0
    )
    assert_png(tmp_path / "j.png")
    (record,) = json.loads(capsys.readouterr().out)
    assert list(record["token_logprobs"]) == ["word_l2r"]
    assert record["totals"]["word_l2r"] == pytest.approx(
        math.fsum(record["token_logprobs"]["word_l2r"])
    )
    assert main(["explain", "-m", tiny_roberta_dir, "a.", "b.", "c."]) == 1


@pytest.mark.parametrize(
    ("sentences", "message"),
    [
        (["A.", "B.", "C."], "one sentence, or two"),
        (["   "], "has none"),
        (["A cat sat.", ""], "has none"),
    ],
)
@pytest.mark.parametrize("json_output", [False, True])
def test_sentences_are_checked_before_the_model_loads(capsys, sentences, message, json_output):
    argv = ["explain", "-m", "no-such-model", *sentences, *(["--json"] if json_output else [])]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("sentences", [["\u200b"], ["\u200b", "The cat."], ["The cat.", "\ufeff"]])
@pytest.mark.parametrize("json_output", [False, True])
def test_a_sentence_with_no_token_to_score_is_refused(
    tiny_bert_dir, capsys, sentences, json_output
):
    """The tokenizer drops a zero-width space: its PLL 0.0 (probability 1) would win any
    comparison."""
    argv = ["explain", "-m", tiny_bert_dir, *sentences, *(["--json"] if json_output else [])]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "has no token to score" in captured.err and captured.out == ""


def test_explain_sentences_refuses_a_sentence_with_no_token(scorers):
    with pytest.raises(ValueError, match=r"'\\u200b' has no token to score"):
        explain_sentences(scorers, ["\u200b"])


@pytest.mark.parametrize("as_json", [False, True])
def test_a_plot_path_that_is_a_folder_is_refused_before_the_model_loads(
    tmp_path, monkeypatch, capsys, as_json
):
    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(MLMScorers, "__init__", loaded)
    argv = ["explain", "-m", "some-model", "A cat sat.", "--plot", str(tmp_path)]
    assert main([*argv, *(["--json"] if as_json else [])]) == 1
    assert "is a folder; give the plot a file name" in capsys.readouterr().err


def test_a_tie_favours_neither_sentence():
    """Two sentences with the same PLL (the same sentence twice, or a swap the model cannot
    tell) are a tie: naming A would report a preference that is not there."""
    from pll_harness.tools.explain import Explanation

    a = Explanation("a b", ("a", "b"), (0, 1), ("a", "b"), {"original": (-1.0, -2.0)})
    b = Explanation("b a", ("b", "a"), (0, 1), ("b", "a"), {"original": (-2.0, -1.0)})
    assert "= +0.00 nats, favours neither;" in difference_report(a, b)
    worse = Explanation("c", ("c",), (0,), ("c",), {"original": (-9.0,)})
    assert "favours A;" in difference_report(a, worse)
