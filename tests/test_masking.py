"""Masking plans on hand-written cases: ``[CLS] The so ##uven ##ir . [SEP]``."""

from __future__ import annotations

import pytest
import torch

from pll_harness.masking import NO_WORD, PLL_METRICS, check_metric, mask_plan

# [CLS] The so ##uven ##ir . [SEP]
WORDS = torch.tensor([NO_WORD, 0, 1, 1, 1, 2, NO_WORD])
TARGETS = torch.tensor([1, 2, 3, 4, 5])

EXPECTED = {
    "original": [{1}, {2}, {3}, {4}, {5}],
    "word_l2r": [{1}, {2, 3, 4}, {3, 4}, {4}, {5}],
    "whole_word": [{1}, {2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {5}],
    "sentence_l2r": [{1, 2, 3, 4, 5, 6}, {2, 3, 4, 5, 6}, {3, 4, 5, 6}, {4, 5, 6}, {5, 6}],
}


def as_sets(plan: torch.Tensor) -> list[set[int]]:
    return [set(row.nonzero().flatten().tolist()) for row in plan]


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_plans_match_the_definitions(metric):
    assert as_sets(mask_plan(WORDS, TARGETS, metric)) == EXPECTED[metric]


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_protected_context_is_never_masked(metric):
    # Context "The so", continuation "uvenir.": the word straddles the boundary.
    protected = torch.tensor([False, True, True, False, False, False, False])
    plan = mask_plan(WORDS, torch.tensor([3, 4, 5]), metric, protected)
    expected = {
        "original": [{3}, {4}, {5}],
        "word_l2r": [{3, 4}, {4}, {5}],
        "whole_word": [{3, 4}, {3, 4}, {5}],
        "sentence_l2r": [{3, 4, 5, 6}, {4, 5, 6}, {5, 6}],
    }[metric]
    assert as_sets(plan) == expected


def test_special_tokens_are_not_one_word():
    """Both specials carry NO_WORD; whole_word must not tie them together."""
    plan = mask_plan(WORDS, torch.tensor([5]), "whole_word")
    assert as_sets(plan) == [{5}]


def test_unknown_metric_lists_the_valid_ones():
    with pytest.raises(ValueError, match="original, word_l2r, whole_word, sentence_l2r"):
        check_metric("within_word_l2r")
    with pytest.raises(ValueError, match="Unknown pll_metric"):
        mask_plan(WORDS, TARGETS, "global_l2r")


@pytest.fixture(params=["tiny_bert_dir", "tiny_roberta_dir"])
def tokenizer(request):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(request.getfixturevalue(request.param))


def real_plan(tokenizer, context: str, continuation: str, metric: str) -> list[set[int]]:
    """The plan the scorer builds: positions count from [CLS]/<s> at 0."""
    from pll_harness.encoding import encode_request

    encoded = encode_request(tokenizer, context, continuation)
    words = torch.tensor([NO_WORD, *encoded.word_ids, NO_WORD])
    targets = torch.arange(encoded.first_target, len(encoded.ids)) + 1
    protected = torch.zeros(len(words), dtype=torch.bool)
    protected[1 : encoded.first_target + 1] = True
    return as_sets(mask_plan(words, targets, metric, protected))


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
