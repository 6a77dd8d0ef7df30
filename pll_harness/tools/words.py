"""Words as PLL sees them: the fast tokenizer's word index of each scored token, runs of
tokens that form one word, and each word's text rebuilt from its tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pll_harness.scorer import PLLScorer


def word_ids(scorer: PLLScorer, text: str) -> list[int]:
    """The word index of each token ``scorer`` scores in ``text``, one per entry of its
    ``SentenceScore.tokens``: tokens it leaves unscored (a spelt-out ``[SEP]``) have
    none, so that tools can pair the two lists position by position."""
    _, jobs = scorer.distinct_jobs([("", text)])
    encodings = jobs.encodings
    return encodings.word_ids[encodings.scored].tolist()


def word_spans(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of equal word ids as ``(start, end)`` token spans, in order."""
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(ids) + 1):
        if index == len(ids) or ids[index] != ids[start]:
            spans.append((start, index))
            start = index
    return spans if ids else []


def words_of(tokenizer: Any, tokens: Sequence[str], ids: Sequence[int]) -> list[tuple[str, int]]:
    """Each word of a token sequence: its text (the tokenizer joins its pieces) and how
    many tokens it takes."""
    return [
        (tokenizer.convert_tokens_to_string(list(tokens[a:b])).strip(), b - a)
        for a, b in word_spans(ids)
    ]


def is_wordlike(text: str) -> bool:
    """A word for OOV and frequency statistics holds a letter or digit (not punctuation)."""
    return any(ch.isalnum() for ch in text)
