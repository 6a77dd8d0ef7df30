"""Masking plans: which positions are hidden when one target token is scored.

A plan is a pure function of the word each position belongs to, so it can be checked by
hand on tiny examples and reused for any tokenizer.  Every plan works on many targets at
once: row ``k`` of ``words`` holds the word id of each position of the sequence that
target ``k`` belongs to, ``targets[k]`` is the target's position, and the plan returns a
boolean ``[k, position]`` matrix, True where the position is replaced by the mask token.
Rows of any number of sequences of one length go through in one call, which is what lets
the planner handle all of BLiMP with a few array operations instead of a loop per sentence.

The definitions follow Kauf & Ivanova (2023, section 3.1 and appendix G); which plan
belongs to which metric name is recorded in :mod:`pll_harness.metrics`.  Context that must
stay visible (lm-eval's context) is removed from a plan by the planner, not here.
"""

from __future__ import annotations

import numpy as np

NO_WORD = -1
"""Word id given to special tokens: they belong to no word and are never targets."""


def _positions(words: np.ndarray) -> np.ndarray:
    return np.arange(words.shape[1])[None, :]


def _same_word(words: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """True where a position belongs to its row's target word (never for NO_WORD)."""
    target_words = words[np.arange(words.shape[0]), targets][:, None]
    return (words == target_words) & (target_words != NO_WORD)


def mask_target_only(words: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``original``: the target alone."""
    return _positions(words) == targets[:, None]


def mask_word_to_right(words: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``word_l2r``: the target and the later tokens of its word, so that the first piece of
    ``so ##uven ##ir`` cannot be read off its own continuation."""
    positions = _positions(words)
    later = positions >= targets[:, None]
    return (positions == targets[:, None]) | (_same_word(words, targets) & later)


def mask_whole_word(words: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``whole_word``: every token of the target's word."""
    return (_positions(words) == targets[:, None]) | _same_word(words, targets)


def mask_sentence_to_right(words: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``sentence_l2r``: the target and every later position, the closing special token
    included, as the paper's reference code does."""
    return _positions(words) >= targets[:, None]
