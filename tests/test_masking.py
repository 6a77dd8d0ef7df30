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
