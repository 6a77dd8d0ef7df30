"""Words as PLL sees them: the fast tokenizer's word index of each scored token, runs of
tokens that form one word, and each word's text rebuilt from its tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def word_ids(tokenizer: Any, text: str) -> list[int]:
    """The word index of each scored token of ``text``, as the engine encodes it."""
    from pll_harness.encoding import encode_request

    return list(encode_request(tokenizer, "", text).word_ids)


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
