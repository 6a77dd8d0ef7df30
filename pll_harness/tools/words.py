"""Words as PLL sees them: the fast tokenizer's word index of each scored token, runs of
tokens that form one word, and each word's text: rebuilt from its tokens, or read from the
sentence with punctuation trimmed (:func:`sentence_words`)."""

from __future__ import annotations

import unicodedata
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


def token_offsets(tokenizer: Any, texts: Sequence[str]) -> list[list[tuple[int, int]]] | None:
    """Each token's character span in its text, tokenized as the scorers do (no special
    tokens); None for a slow tokenizer, which has no offsets."""
    if not getattr(tokenizer, "is_fast", False):
        return None
    if not texts:
        return []
    encoded = tokenizer(
        list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False
    )
    return [list(map(tuple, spans)) for spans in encoded["offset_mapping"]]


def sentence_words(
    text: str, offsets: Sequence[tuple[int, int]], ids: Sequence[int]
) -> list[tuple[str, int]]:
    """Each word of ``text`` that holds a letter or digit, as written there, and how many of
    its tokens hold its letters and digits; ``offsets`` and ``ids`` are its tokens'
    character spans and word ids.

    Read from the text, not from the tokens: an unknown word stays itself rather than a
    literal ``[UNK]``, and an uncased tokenizer's "cafe" stays "café".  Punctuation at
    either end is trimmed, because SentencePiece's pre-tokenizer splits at whitespace only
    ("mat." is one word) where WordPiece's and byte-level BPE's split punctuation off; a
    token of punctuation only ("." or a "▁" before a quote) is then not the word's, so
    that such a tokenizer's words count as split only where their letters are.  An unknown
    word is the one token it becomes (``[UNK]``): not split."""
    words = []
    for a, b in word_spans(ids):
        start = min(span[0] for span in offsets[a:b])
        start, stop = _trimmed(text, start, max(span[1] for span in offsets[a:b]))
        if start < stop:
            pieces = sum(s < stop and e > start for s, e in offsets[a:b])
            words.append((text[start:stop], pieces))
    return words


def _trimmed(text: str, start: int, stop: int) -> tuple[int, int]:
    """``text[start:stop]`` without the characters at either end that are neither letters,
    digits nor combining marks (so that a decomposed "café" keeps its accent); an empty span
    when nothing is left."""
    while start < stop and not _in_word(text[start]):
        start += 1
    while stop > start and not _in_word(text[stop - 1]):
        stop -= 1
    return start, stop


def _in_word(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char).startswith("M")


def is_wordlike(text: str) -> bool:
    """A word for OOV and frequency statistics holds a letter or digit (not punctuation)."""
    return any(ch.isalnum() for ch in text)
