"""The CrowS-Pairs shared-token score against a naive float64 reference, on WordPiece,
byte-level BPE and sentencepiece-style Unigram pieces (Metaspace: ``▁`` starts a word and
punctuation stays in the word before it).

The reference follows the paper's ``metric.py`` step by step: tokenize each sentence with
its special tokens, align the two id sequences with difflib, and score every shared
non-special token from one forward pass of its own, with the metric's mask and the
differing tokens always visible.  Tolerance: 1e-4 nats per token and per sentence (the
engine runs float32, the reference float64).
"""

from __future__ import annotations

import difflib
import math

import pytest
from reference_pll import float64_model, naive_scores

from pll_harness.metrics import PLL_METRICS
from pll_harness.scorer import PLLScorer
from pll_harness.shared_tokens import score_shared_tokens, shared_positions

TOLERANCE = 1e-4

PAIRS = [
    ("The man is a nurse.", "The woman is a nurse."),
    ("The hooligan wrecked the souvenir.", "The traveler wrecked the souvenir."),
    ("Poor people steal souvenirs.", "Rich people steal souvenirs."),
    ("He cried.", "She laughed at the hooligan."),
    ("A cat sat.", "A cat sat."),
    # differing words of several pieces, which share a piece ("en") in the unigram model
    ("Women can't drive.", "Men can't drive."),
    # the differing word carries the shared "." (one word with "▁nurse" in the unigram model)
    ("The man is a nurse.", "The man is a doctor."),
    ("Señor Müller cooks crêpes.", "Mister Miller cooks crêpes."),
    # the first word differs: "▁", "H", "e" against "▁S", "he" in the unigram model
    ("He cried at the movie.", "She cried at the movie."),
]


@pytest.fixture(
    scope="module", params=["tiny_bert_dir", "tiny_roberta_dir", "tiny_sentencepiece_dir"]
)
def model_dir(request) -> str:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def model64(model_dir):
    from transformers import AutoModelForMaskedLM

    return float64_model(AutoModelForMaskedLM.from_pretrained(model_dir))


def paper_shared(first: list[int], second: list[int]) -> tuple[list[int], list[int]]:
    """The paper's get_span: positions inside difflib's 'equal' opcodes."""
    matcher = difflib.SequenceMatcher(None, [str(x) for x in first], [str(x) for x in second])
    one, two = [], []
    for op in matcher.get_opcodes():
        if op[0] == "equal":
            one += list(range(op[1], op[2]))
            two += list(range(op[3], op[4]))
    return one, two


def naive_shared(model64, tokenizer, first: str, second: str, metric: str):
    encodings = [tokenizer(s) for s in (first, second)]
    spans = paper_shared(*(e["input_ids"] for e in encodings))
    results = []
    for encoding, span in zip(encodings, spans, strict=True):
        ids, words = encoding["input_ids"], encoding.word_ids()
        targets = [p for p in span if words[p] is not None]
        scores = naive_scores(model64, tokenizer, ids, words, targets, metric)
        results.append(([ids[t] for t in targets], scores))
    return results


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_shared_token_scores_match_the_naive_reference(model_dir, model64, metric):
    scorer = PLLScorer.from_pretrained(model_dir, pll_metric=metric, device="cpu")
    results = score_shared_tokens(scorer, PAIRS)
    for pair, scored in zip(PAIRS, results, strict=True):
        expected = naive_shared(model64, scorer.tokenizer, *pair, metric)
        for got, (ids, want) in zip(scored, expected, strict=True):
            assert list(got.token_ids) == ids
            assert got.logprob == pytest.approx(math.fsum(want), abs=TOLERANCE)
            assert got.token_logprobs == pytest.approx(want, abs=TOLERANCE)


def test_differing_words_are_not_scored(model_dir):
    scorer = PLLScorer.from_pretrained(model_dir, pll_metric="original", device="cpu")
    (man, woman), (same, twin) = score_shared_tokens(scorer, [PAIRS[0], PAIRS[4]])
    assert man.tokens == woman.tokens
    assert not any(t.lstrip("Ġ#▁").lower() in {"man", "woman", "wo"} for t in man.tokens)
    assert same == twin
    assert same.logprob == pytest.approx(scorer.score(["A cat sat."])[0].logprob, abs=1e-5)


def test_shared_positions_follow_difflib():
    assert shared_positions([1, 5, 2, 3, 9], [1, 6, 2, 3, 9]) == ([0, 2, 3, 4], [0, 2, 3, 4])
    assert shared_positions([1, 2], [3, 4]) == ([], [])


def test_long_pairs_are_aligned_as_the_paper_aligns_them(tiny_bert_dir):
    """From 200 tokens on, difflib treats frequent tokens as junk unless told otherwise
    (``autojunk``), which changes which tokens count as shared: metric.py keeps the default,
    and so must we."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    body = " ".join(["the dog saw the cat and the man fed the bird ."] * 20)
    first = tokenizer("Women and the girls fed the bird . " + body)["input_ids"]
    second = tokenizer("Men and the boys fed the bird . " + body)["input_ids"]
    assert len(first) > 200
    assert shared_positions(first, second) == paper_shared(first, second)


@pytest.mark.parametrize(
    "pairs",
    [
        ("A cat sat.", "A dog sat."),
        ["A cat sat.", "A dog sat."],
        [("A cat sat.", "A dog sat.", "A cow sat."), ("A cat ran.", "A dog ran.")],
    ],
    ids=["one-pair", "one-pair-as-list", "three-sentences"],
)
def test_anything_but_pairs_of_two_sentences_is_refused(model_dir, pairs):
    """Read two by two, these would score characters or other pairs than meant."""
    scorer = PLLScorer.from_pretrained(model_dir, pll_metric="original", device="cpu")
    with pytest.raises(TypeError, match="sequence of"):
        score_shared_tokens(scorer, pairs)


def test_a_spelt_out_boundary_token_is_not_scored_even_when_shared(model_dir):
    scorer = PLLScorer.from_pretrained(model_dir, pll_metric="original", device="cpu")
    sep = scorer.tokenizer.sep_token
    ((more, less),) = score_shared_tokens(
        scorer, [(f"Women {sep} can not drive.", f"Men {sep} can not drive.")]
    )
    assert sep not in more.tokens and sep not in less.tokens
    assert more.tokens == less.tokens and len(more.tokens) >= 4
