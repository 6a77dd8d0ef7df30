"""Masking plans on hand-written cases: ``[CLS] The so ##uven ##ir . [SEP]``, through the
metric registry, and the context protection the planner adds on top."""

from __future__ import annotations

import numpy as np
import pytest
from reference_pll import DEFINITIONS, masked_set

from pll_harness.masking import NO_WORD
from pll_harness.metrics import PLL_METRICS, get_metric
from pll_harness.planning import copy_masks

# [CLS] The so ##uven ##ir . [SEP]
WORDS = np.array([NO_WORD, 0, 1, 1, 1, 2, NO_WORD])
TARGETS = np.array([1, 2, 3, 4, 5])

EXPECTED = {
    "original": [{1}, {2}, {3}, {4}, {5}],
    "word_l2r": [{1}, {2, 3, 4}, {3, 4}, {4}, {5}],
    "whole_word": [{1}, {2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {5}],
    "sentence_l2r": [{1, 2, 3, 4, 5, 6}, {2, 3, 4, 5, 6}, {3, 4, 5, 6}, {4, 5, 6}, {5, 6}],
}


def as_sets(plan: np.ndarray) -> list[set[int]]:
    return [set(np.flatnonzero(row).tolist()) for row in plan]


def plan(metric: str, targets: np.ndarray, words: np.ndarray = WORDS) -> np.ndarray:
    return get_metric(metric).plan(np.broadcast_to(words, (len(targets), len(words))), targets)


def test_every_registered_metric_has_expectations_and_a_reference_definition():
    assert set(EXPECTED) == set(PLL_METRICS)
    assert set(DEFINITIONS) == set(PLL_METRICS)


def test_the_reference_refuses_unknown_metrics():
    with pytest.raises(ValueError, match="Unknown pll_metric"):
        masked_set([None, 0, None], [1], 1, "global_l2r")


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_plans_match_the_definitions(metric):
    assert as_sets(plan(metric, TARGETS)) == EXPECTED[metric]


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_rows_of_different_sequences_are_planned_independently(metric):
    """One call plans targets of many sequences: each row uses its own words."""
    other = np.array([NO_WORD, 0, 0, 0, 1, 2, NO_WORD])  # [CLS] so ##uv ##en ir . [SEP]
    words = np.stack([WORDS, other, WORDS])
    targets = np.array([2, 1, 3])
    alone = [plan(metric, targets[i : i + 1], words[i]) for i in range(3)]
    together = get_metric(metric).plan(words, targets)
    assert as_sets(together) == [as_sets(a)[0] for a in alone]


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_protected_context_is_never_masked(metric):
    # Context "The so", continuation "uvenir.": the word straddles the boundary.
    targets = np.array([3, 4, 5])
    words = np.broadcast_to(WORDS, (3, len(WORDS)))
    visible = np.broadcast_to([False, True, True, False, False, False, False], (3, 7))
    masks = copy_masks(get_metric(metric), words, targets, visible)
    expected = {
        "original": [{3}, {4}, {5}],
        "word_l2r": [{3, 4}, {4}, {5}],
        "whole_word": [{3, 4}, {3, 4}, {5}],
        "sentence_l2r": [{3, 4, 5, 6}, {4, 5, 6}, {5, 6}],
    }[metric]
    assert as_sets(masks) == expected


def test_special_tokens_are_not_one_word():
    """Both specials carry NO_WORD; whole_word must not tie them together."""
    assert as_sets(plan("whole_word", np.array([5]))) == [{5}]


@pytest.fixture(params=["tiny_bert_dir", "tiny_roberta_dir"])
def tokenizer(request):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(request.getfixturevalue(request.param))


def real_plan(tokenizer, context: str, continuation: str, metric: str) -> list[set[int]]:
    """The plan the scorer builds: positions count from [CLS]/<s> at 0."""
    from pll_harness.encoding import encode_requests

    encoded = encode_requests(tokenizer, [(context, continuation)]).item(0)
    words = np.array([NO_WORD, *encoded.word_ids, NO_WORD])
    targets = np.arange(encoded.first_target, len(encoded.ids)) + 1
    rows = np.broadcast_to(words, (len(targets), len(words)))
    visible = np.zeros(rows.shape, dtype=bool)
    visible[:, 1 : encoded.first_target + 1] = True
    return as_sets(copy_masks(get_metric(metric), rows, targets, visible))


def test_hooligan_sentence_on_real_tokenizers(tokenizer):
    """WordPiece `ho ##ol ##ig ##an wreck ##ed ... s ##ou ##v ##en ##ir` and byte-level BPE
    `Ġho ol ig an Ġwreck ed ... Ġs ou v en ir` split the same way in the tiny fixtures."""
    sentence = "The hooligan wrecked the souvenir."
    pieces = tokenizer.tokenize(sentence)
    assert [p.lstrip("#Ġ") for p in pieces] == [
        "The", "ho", "ol", "ig", "an", "wreck", "ed", "the", "s", "ou", "v", "en", "ir", ".",
    ]  # fmt: skip
    word_l2r = real_plan(tokenizer, "", sentence, "word_l2r")
    assert word_l2r[0] == {1}
    assert word_l2r[1:5] == [{2, 3, 4, 5}, {3, 4, 5}, {4, 5}, {5}]
    assert word_l2r[5:7] == [{6, 7}, {7}]
    assert word_l2r[8] == {9, 10, 11, 12, 13}
    assert word_l2r[13] == {14}
    whole = real_plan(tokenizer, "", sentence, "whole_word")
    assert whole[1:5] == [{2, 3, 4, 5}] * 4
    original = real_plan(tokenizer, "", sentence, "original")
    assert original == [{p} for p in range(1, 15)]
    assert real_plan(tokenizer, "", sentence, "sentence_l2r")[12] == {13, 14, 15}


def test_context_split_inside_a_word_on_real_tokenizers(tokenizer):
    """Context `... the sou`: `s ##ou` stay visible, `##v ##en ##ir .` are the targets."""
    context, continuation = "The hooligan wrecked the sou", "venir."
    assert real_plan(tokenizer, context, continuation, "original") == [{11}, {12}, {13}, {14}]
    assert real_plan(tokenizer, context, continuation, "whole_word")[0] == {11, 12, 13}
    assert real_plan(tokenizer, context, continuation, "word_l2r")[1] == {12, 13}
    assert real_plan(tokenizer, context, continuation, "sentence_l2r")[0] == {11, 12, 13, 14, 15}
