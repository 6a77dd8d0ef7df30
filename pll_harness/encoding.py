"""Turn text into the token sequences that get scored: which tokens, which words, which targets.

lm-eval hands us ``(context, continuation)`` pairs.  We tokenize their concatenation once,
so that word boundaries and byte-level BPE spaces come out as they would for the sentence
alone, and then read off which tokens belong to the continuation from character offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pll_harness.masking import NO_WORD


@dataclass(frozen=True)
class Encoded:
    """One text's tokens without special tokens.

    ``first_target`` is the index of the first continuation token: tokens before it are
    context (visible, never scored) and every token from it on is scored.
    """

    ids: tuple[int, ...]
    word_ids: tuple[int, ...]
    first_target: int

    @property
    def n_targets(self) -> int:
        return len(self.ids) - self.first_target


@dataclass(frozen=True)
class SpecialTokens:
    """The special tokens a tokenizer wraps around a single sequence, e.g. ``[CLS] … [SEP]``."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.prefix) + len(self.suffix)


def require_fast_tokenizer(tokenizer: Any, metric: str, word_level: bool) -> None:
    """Word-level metrics need ``word_ids()``, which only fast (Rust) tokenizers provide."""
    if word_level and not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"pll_metric={metric!r} needs word boundaries, which only a fast tokenizer gives "
            f"(word_ids()); {type(tokenizer).__name__} is a slow tokenizer. Load a fast one "
            "(use_fast=True, or a checkpoint that ships tokenizer.json), or use "
            "pll_metric=original."
        )


def special_tokens(tokenizer: Any) -> SpecialTokens:
    """Find the special tokens the tokenizer adds around one sequence.

    Comparing an encoding with and without special tokens works for every single-sequence
    template (BERT, RoBERTa, DeBERTa, XLM-R, ModernBERT …) without knowing its class.
    """
    probe = "a"
    bare = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return SpecialTokens(tuple(full[:start]), tuple(full[start + len(bare) :]))
    raise ValueError(
        f"Could not locate the text inside the tokenizer's special-token template: {full}"
    )


def encode_request(tokenizer: Any, context: str, continuation: str) -> Encoded:
    """Tokenize ``context + continuation`` with surrounding whitespace stripped.

    Stripping makes lm-eval's convention (continuations that start with a space) and ours
    (whole sentences with an empty context) give identical tokens, byte-level BPE included.
    A token that straddles the boundary belongs to the continuation.
    """
    full = context + continuation
    text = full.strip()
    leading = len(full) - len(full.lstrip())
    boundary = max(len(context) - leading, 0)
    if not text:
        return Encoded((), (), 0)
    if not getattr(tokenizer, "is_fast", False):
        return _encode_slow(tokenizer, text, boundary)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    ids = tuple(enc["input_ids"])
    word_ids = tuple(NO_WORD if w is None else w for w in enc.word_ids())
    first_target = len(ids)
    for index, (start, end) in enumerate(enc["offset_mapping"]):
        if end > boundary or start >= boundary:
            first_target = index
            break
    return Encoded(ids, word_ids, first_target)


def _encode_slow(tokenizer: Any, text: str, boundary: int) -> Encoded:
    """Slow tokenizers give neither offsets nor words: the context is the longest run of
    leading tokens that the context alone also produces, and each token is its own word
    (only ``original`` and ``sentence_l2r`` accept that; see require_fast_tokenizer)."""
    ids = tuple(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    context_ids = tokenizer(text[:boundary], add_special_tokens=False, verbose=False)["input_ids"]
    first_target = common_prefix_length(ids, context_ids)
    return Encoded(ids, tuple(range(len(ids))), first_target)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids ``a`` and ``b`` share: where a context's own tokens stop
    matching the tokens of context + continuation."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
