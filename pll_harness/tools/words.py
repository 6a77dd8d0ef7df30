"""Words as PLL sees them: the fast tokenizer's word index of each scored token, runs of
tokens that form one word, and each word's text rebuilt from its tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pll_harness.encoding import split_words_at_whitespace
from pll_harness.masking import NO_WORD

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


def split_at_whitespace(
    text: str, ids: Sequence[int | None], offsets: Sequence[tuple[int, int]]
) -> list[int]:
    """Word ids (numbered from 0) that also start a new word at a token after whitespace
    or beginning with it, given each token's character ``offsets`` in ``text``; tokens
    outside any word (``None``) get -1.  A tokenizer that does not pre-tokenize at
    spaces (Llama's Metaspace without ``split``) gives one word id to a whole text.
    One text's view of the engine's rule, so that causal and masked words agree."""
    words = np.array([NO_WORD if w is None else w for w in ids], dtype=np.int64)
    spans = np.array(offsets, dtype=np.int64).reshape(-1, 2)
    lengths = np.array([len(words)], dtype=np.int64)
    return split_words_at_whitespace([text], words, spans, lengths).tolist()


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
