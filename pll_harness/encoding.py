"""Turn text into the token sequences that get scored: which tokens, which words, which targets.

lm-eval hands us ``(context, continuation)`` pairs.  We tokenize their concatenation once,
so that word boundaries and byte-level BPE spaces come out as they would for the sentence
alone, and then read off which tokens belong to the continuation from character offsets.

Many requests are tokenized in one call of the fast tokenizer and kept as flat arrays
(:class:`Encodings`), because on a benchmark of 134,000 sentences the per-request Python
around the tokenizer costs more than the tokenizer itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pll_harness.masking import NO_WORD

PARALLELISM_VARIABLE = "TOKENIZERS_PARALLELISM"
"""The tokenizers library's switch: unset, its batch calls use every core."""

TEXTS_PER_THREAD = 4096
"""Fewest texts worth a tokenizer thread of their own (see :func:`_encode_in_threads`)."""

INFORMATION_SEPARATORS = "\x1c\x1d\x1e\x1f"
"""Control characters that ``str.isspace()`` counts as whitespace but Unicode (and so the
tokenizers' pre-tokenizers) does not."""

WHITESPACE = "".join(
    ch for ch in map(chr, range(0x3001)) if ch.isspace() and ch not in INFORMATION_SEPARATORS
)
"""Unicode's whitespace (its ``White_Space`` property, U+3000 the highest): space, tab,
line and paragraph ends, no-break, thin, ideographic spaces, ...: 25 characters."""

LAST_WHITESPACE = ord(WHITESPACE[-1])

GAPS = ("  ", *WHITESPACE)
"""What may separate two words, probed one kind at a time (see
:func:`whitespace_inside_words`): each whitespace character, and a double space."""

PROBE_WORDS = ("Hooligans", "wrecked", "3", "souvenirs,", "didn't", "they?", "Two", "cafés.")
"""Words with letters, digits, punctuation and accents, for the probes of :data:`GAPS`."""

_IS_WHITESPACE = np.isin(np.arange(LAST_WHITESPACE + 1), [ord(ch) for ch in WHITESPACE])


@dataclass(frozen=True)
class Encoded:
    """One text's tokens without special tokens.

    ``first_target`` is the index of the first continuation token: tokens before it are
    context (visible, never scored) and every token from it on is scored.
    """

    ids: tuple[int, ...]
    word_ids: tuple[int, ...]
    first_target: int


@dataclass(frozen=True)
class Encodings:
    """The tokens of many texts in flat arrays: text ``i`` holds tokens
    ``offsets[i]:offsets[i + 1]`` of ``ids``, ``word_ids`` (``NO_WORD`` outside any word)
    and ``scored``.  Scored tokens are the targets; every other token of the text stays
    visible whatever the metric: lm-eval's context, or the tokens in which the two
    sentences of a CrowS-Pairs pair differ."""

    ids: np.ndarray
    word_ids: np.ndarray
    scored: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def n_targets(self) -> np.ndarray:
        """Scored tokens per text."""
        before = np.zeros(self.scored.shape[0] + 1, dtype=np.int64)
        np.cumsum(self.scored, out=before[1:])
        return np.diff(before[self.offsets])

    def item(self, index: int) -> Encoded:
        """Text ``index`` as an :class:`Encoded` (its scored tokens must be a suffix)."""
        start, stop = int(self.offsets[index]), int(self.offsets[index + 1])
        scored = self.scored[start:stop]
        first_target = int(np.argmax(scored)) if scored.any() else stop - start
        if not scored[first_target:].all():
            raise ValueError(f"Text {index}'s scored tokens are not one final run.")
        return Encoded(
            tuple(self.ids[start:stop].tolist()),
            tuple(self.word_ids[start:stop].tolist()),
            first_target,
        )

    def select(self, indices: np.ndarray) -> Encodings:
        """The texts at ``indices``, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        offsets = np.zeros(indices.shape[0] + 1, dtype=np.int64)
        np.cumsum(self.lengths[indices], out=offsets[1:])
        flat = self.positions(indices)
        return Encodings(self.ids[flat], self.word_ids[flat], self.scored[flat], offsets)

    def positions(self, indices: np.ndarray) -> np.ndarray:
        """Where the tokens of the texts at ``indices`` lie in the flat arrays, in order."""
        lengths = self.lengths[indices]
        before = np.cumsum(lengths) - lengths
        return np.repeat(self.offsets[indices] - before, lengths) + np.arange(lengths.sum())

    def with_scored(self, scored: np.ndarray) -> Encodings:
        """The same tokens with other targets."""
        return Encodings(self.ids, self.word_ids, np.asarray(scored, dtype=bool), self.offsets)

    @classmethod
    def concatenate(cls, parts: Sequence[Encodings]) -> Encodings:
        """The texts of ``parts`` one after the other (data-parallel ranks pool theirs)."""
        offsets = [np.zeros(1, dtype=np.int64)]
        base = 0
        for part in parts:
            offsets.append(part.offsets[1:] + base)
            base += int(part.offsets[-1])
        return cls(
            np.concatenate([np.zeros(0, np.int64), *(p.ids for p in parts)]),
            np.concatenate([np.zeros(0, np.int64), *(p.word_ids for p in parts)]),
            np.concatenate([np.zeros(0, bool), *(p.scored for p in parts)]),
            np.concatenate(offsets),
        )

    @classmethod
    def from_lists(
        cls,
        ids: Sequence[Sequence[int]],
        word_ids: Sequence[Sequence[int | None]],
        first_target: Sequence[int],
    ) -> Encodings:
        """Flatten per-text token lists (``None`` word ids become ``NO_WORD``); text ``i``
        scores its tokens from ``first_target[i]`` on."""
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        flat_ids = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
        flat_words = np.fromiter(
            (NO_WORD if w is None else w for w in itertools.chain.from_iterable(word_ids)),
            dtype=np.int64,
            count=total,
        )
        position = np.arange(total) - np.repeat(offsets[:-1], lengths)
        scored = position >= np.repeat(np.asarray(first_target, dtype=np.int64), lengths)
        return cls(flat_ids, flat_words, scored, offsets)


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


def strip_request(context: str, continuation: str) -> tuple[str, int]:
    """``context + continuation`` with surrounding whitespace stripped, and the character
    index where the continuation starts in it.

    Stripping makes lm-eval's convention (continuations that start with a space) and ours
    (whole sentences with an empty context) give identical tokens, byte-level BPE included.
    Only Unicode's whitespace goes (:data:`WHITESPACE`): an information separator at an end
    is a token for the tokenizer, and is scored as one.
    """
    full = context + continuation
    leading = len(full) - len(full.lstrip(WHITESPACE))
    return full.strip(WHITESPACE), max(len(context) - leading, 0)


def encode_requests(
    tokenizer: Any, requests: Sequence[tuple[str, str]], inside_words: str | None = None
) -> Encodings:
    """Tokenize every ``(context, continuation)`` in one call of the tokenizer.

    A token that straddles the context/continuation boundary belongs to the continuation.
    ``inside_words`` is :func:`whitespace_inside_words` of the tokenizer, when the caller
    keeps it (it depends on the tokenizer alone); None probes the tokenizer again.
    """
    stripped = [strip_request(context, continuation) for context, continuation in requests]
    if not getattr(tokenizer, "is_fast", False):
        slow = [_encode_slow(tokenizer, text, boundary) for text, boundary in stripped]
        return Encodings.from_lists(
            [e.ids for e in slow], [e.word_ids for e in slow], [e.first_target for e in slow]
        )
    texts = [text for text, _ in stripped]
    try:
        encodings = _rust_encodings(tokenizer, texts) if texts else []
    except TypeError:
        refuse_unreadable(texts)
        raise
    ids = [e.ids if text else [] for e, text in zip(encodings, texts, strict=True)]
    words = [e.word_ids if text else [] for e, text in zip(encodings, texts, strict=True)]
    first_target = np.zeros(len(texts), dtype=np.int64)
    with_context = [i for i, (text, boundary) in enumerate(stripped) if text and boundary > 0]
    if with_context:
        first_target[with_context] = _first_scored(
            [encodings[i].offsets for i in with_context], [stripped[i][1] for i in with_context]
        )
    encoded = Encodings.from_lists(ids, words, first_target)
    if inside_words is None:
        inside_words = whitespace_inside_words(tokenizer) if texts else ""
    if not inside_words:
        return encoded
    indices = np.flatnonzero(_holding_any(texts, inside_words))
    spans, lengths = _flat_spans([encodings[i].offsets for i in indices])
    positions = encoded.positions(indices)
    word_ids = encoded.word_ids.copy()
    word_ids[positions] = split_words_at_whitespace(
        [texts[i] for i in indices], encoded.word_ids[positions], spans, lengths
    )
    return dataclasses.replace(encoded, word_ids=word_ids)


def lone_surrogate(text: str) -> int | None:
    """Where ``text`` holds a lone surrogate, or None.

    Such a string (from JSON's ``"\\ud800"`` or bytes decoded with ``surrogateescape``) is
    a Python ``str`` but no Unicode text: the Rust tokenizer cannot read it, and no UTF-8
    file can store it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def refuse_unreadable(texts: Iterable[str]) -> None:
    """Name the text that made the Rust tokenizer (or an encoding to UTF-8) fail, if it
    holds a lone surrogate: the tokenizer refuses the whole call with a ``TypeError`` about
    its argument's type that names neither the text nor the cause.  Looked for only once
    that has happened, so that well-formed runs pay nothing."""
    for text in texts:
        at = lone_surrogate(text)
        if at is not None:
            raise ValueError(
                f"The text {text[:60]!r} holds a lone surrogate ({text[at]!r} at character "
                f"{at}), which is no Unicode text and which the tokenizer cannot read: fix or "
                "drop it (it comes from JSON escapes such as \\ud800 or from bytes decoded "
                "with 'surrogateescape')."
            )


def whitespace_inside_words(tokenizer: Any) -> str:
    """The whitespace characters that the fast tokenizer's ``word_ids()`` let a word span:
    none for BERT, RoBERTa, XLM-R …, every kind for Llama's and Gemma's; none for a slow
    tokenizer, whose tokens are each a word of their own.

    Those two do not pre-tokenize at spaces (Metaspace without ``split``, or spaces made
    ``▁`` before a split on " "), and a ``tokenizer.json`` may carry such a pre-tokenizer
    for any model that loads it as it is; DeBERTa-v2's and BigBird's split at " " only.  A
    word that spans a gap would make word-level metrics mask the words on both sides
    without an error.  A pre-tokenizer is a fixed rule on characters, so one probe per
    kind of gap (:data:`GAPS`) tells; only texts holding a kind found inside words are
    then split there (:func:`encode_requests`), and the others keep their word ids and
    cost nothing more.  Whitespace that the tokenizer's normalizer deletes (BERT's drops
    control characters such as U+000B) is not a gap the model sees, and is not probed."""
    if not getattr(tokenizer, "is_fast", False):
        return ""
    gaps = [gap for gap in GAPS if _kept(tokenizer, gap)]
    if not gaps:
        return ""
    probes = [gap.join(PROBE_WORDS) for gap in gaps]
    encodings = tokenizer(probes, add_special_tokens=False, verbose=False).encodings
    spans, lengths = _flat_spans([e.offsets for e in encodings])
    words = np.fromiter(
        (NO_WORD if w is None else w for e in encodings for w in e.word_ids),
        dtype=np.int64,
        count=int(lengths.sum()),
    )
    split = split_words_at_whitespace(probes, words, spans, lengths)
    text_of = np.repeat(np.arange(len(probes)), lengths)
    merged = np.zeros(words.shape[0], dtype=bool)
    merged[1:] = (
        (words[1:] == words[:-1]) & (split[1:] != split[:-1]) & (text_of[1:] == text_of[:-1])
    )
    return "".join(sorted({ch for i in np.unique(text_of[merged]) for ch in gaps[i]}))


def _kept(tokenizer: Any, gap: str) -> bool:
    """Whether the tokenizer's normalizer leaves anything of ``gap`` between two words.
    Probed between words, not alone: DeBERTa-v2's normalizer strips trailing whitespace,
    which would delete a gap on its own, though it keeps one inside a text."""
    normalizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "normalizer", None)
    if normalizer is None:
        return True
    return len(normalizer.normalize_str(f"a{gap}a")) > len(normalizer.normalize_str("aa"))


def _holding_any(texts: Sequence[str], characters: str) -> np.ndarray:
    """Which texts hold any of ``characters``, all texts at once."""
    codes, starts = _code_points(texts)
    found = _running_count(np.isin(codes, [ord(ch) for ch in characters]))
    return found[starts[1:]] > found[starts[:-1]]


def split_words_at_whitespace(
    texts: Sequence[str], word_ids: np.ndarray, spans: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Word ids (numbered from 0 in each text, ``NO_WORD`` kept) that also start a new word
    at every token that begins with whitespace or after it.

    ``word_ids`` and ``spans`` (character offsets into its text, one row per token) are
    flat over ``texts``, text ``i`` holding ``lengths[i]`` tokens.  A token after one
    outside any word starts a word too.  Pieces that the pre-tokenizer already keeps
    apart stay apart: the result only ever adds word starts."""
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    first = np.zeros(word_ids.shape[0], dtype=bool)
    first[starts[:-1][lengths > 0]] = True
    changed = np.ones_like(first)
    changed[1:] = word_ids[1:] != word_ids[:-1]
    in_word = word_ids != NO_WORD
    new = (first | changed | _after_whitespace(texts, spans, lengths)) & in_word
    count = np.cumsum(new)
    nonempty = lengths > 0
    before_text = np.repeat((count - new)[starts[:-1][nonempty]], lengths[nonempty])
    return np.where(in_word, count - 1 - before_text, NO_WORD)


def _after_whitespace(texts: Sequence[str], spans: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """For each token: does whitespace lie between the end of the tokens before it in its
    text and its own first character, that character included?  All texts at once, as
    positions in their concatenation."""
    codes, text_starts = _code_points(texts)
    spaces = _running_count(
        (codes <= LAST_WHITESPACE) & _IS_WHITESPACE[np.minimum(codes, LAST_WHITESPACE)]
    )
    base = np.repeat(text_starts[:-1], lengths)
    start, stop = spans[:, 0] + base, spans[:, 1] + base
    # Texts follow one another, so a running maximum of ends never reaches into the next.
    gap_start = base.copy()
    if stop.shape[0] > 1:
        gap_start[1:] = np.maximum(np.maximum.accumulate(stop)[:-1], base[1:])
    gap_stop = np.maximum(np.minimum(start + 1, np.repeat(text_starts[1:], lengths)), gap_start)
    return spaces[gap_stop] > spaces[gap_start]


def _code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The code points of all texts one after the other (character offsets count code
    points), and where each text starts among them, with the total at the end."""
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=starts[1:])
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return codes, starts


def _running_count(flags: np.ndarray) -> np.ndarray:
    """How many of ``flags`` are true before each position (one more entry: all of them)."""
    count = np.zeros(flags.shape[0] + 1, dtype=np.int64)
    np.cumsum(flags, out=count[1:])
    return count


def _flat_spans(offsets: Sequence[Sequence[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Many texts' token offsets as one ``(tokens, 2)`` array, and each text's token count."""
    lengths = np.fromiter(map(len, offsets), dtype=np.int64, count=len(offsets))
    flat = itertools.chain.from_iterable(itertools.chain.from_iterable(offsets))
    spans = np.fromiter(flat, dtype=np.int64, count=2 * int(lengths.sum())).reshape(-1, 2)
    return spans, lengths


def _first_scored(offsets: Sequence[Sequence[tuple[int, int]]], boundaries: Sequence[int]):
    """Index of the first token that ends after its text's boundary or starts at or after
    it (the token's length when there is none), for many texts at once.

    An empty span ``(p, p)`` after ``p = 0`` is a token of whitespace whose offsets were
    trimmed (RoBERTa's tokenizers, ``trim_offsets``): its text ends at ``p``, so it lies
    after the boundary only if ``p`` does; taken as starting at ``p``, a context's own
    trailing space would be scored as the continuation's."""
    spans, lengths = _flat_spans(offsets)
    boundary = np.repeat(np.asarray(boundaries, dtype=np.int64), lengths)
    start, end = spans[:, 0], spans[:, 1]
    start = np.where((start == end) & (end > 0), end - 1, start)
    scored = (end > boundary) | (start >= boundary)
    starts = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    index_in_text = np.arange(spans.shape[0]) - np.repeat(starts, lengths)
    candidates = np.where(scored, index_in_text, np.repeat(lengths, lengths))
    first = lengths.copy()
    nonempty = lengths > 0
    first[nonempty] = np.minimum.reduceat(candidates, starts[nonempty])
    return first


def _rust_encodings(tokenizer: Any, texts: list[str]) -> list[Any]:
    """The Rust encodings of ``texts``, exactly as ``tokenizer(texts)`` computes them.

    transformers turns every encoding into Python lists and dicts, which on short sentences
    costs as much again as tokenizing; when the tokenizer's class encodes through the base
    class's Rust call (every fast tokenizer of the supported models), we make that call
    ourselves after one ordinary call has applied the tokenizer's settings (truncation,
    padding, special-token splitting).
    """
    from transformers import PreTrainedTokenizerFast

    probe = tokenizer(texts[:1], add_special_tokens=False, verbose=False)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    own_path = any(
        getattr(type(tokenizer), name, None) is not getattr(PreTrainedTokenizerFast, name, None)
        for name in ("_encode_plus", "_batch_encode_plus")
    )
    if backend is None or own_path or backend.truncation or backend.padding:
        return tokenizer(texts, add_special_tokens=False, verbose=False).encodings
    encodings = _encode_in_threads(backend, texts)
    if encodings[0].ids != probe.encodings[0].ids:  # a setting we do not know of: play safe
        return tokenizer(texts, add_special_tokens=False, verbose=False).encodings
    return encodings


def _encode_in_threads(backend: Any, texts: list[str]) -> list[Any]:
    """``backend.encode_batch(texts)``, in consecutive parts on torch's intra-op thread
    count when ``TOKENIZERS_PARALLELISM`` is set.

    lm-eval's command line sets ``TOKENIZERS_PARALLELISM=false`` for its whole process, so
    one call runs on one core: 2.8-3.2 s for all of BLiMP on a 2-core machine, against
    1.6 s in two threads.  The Rust call releases the GIL, so Python threads suffice; the
    thread count is the one the user gave torch, so that tokenizing uses no more cores than
    the model does.  Each part is encoded exactly as it would be in one call.  With the
    variable unset, the tokenizer spreads one call over every core itself, as fast as the
    threads and 40 MB lighter at the peak of all of BLiMP (bench/README.md).  Set to a true
    value, the parts also go to the tokenizer's own pool, which still bounds the cores used.
    """
    parts = max(1, min(torch.get_num_threads(), len(texts) // TEXTS_PER_THREAD))
    if parts == 1 or PARALLELISM_VARIABLE not in os.environ:
        return backend.encode_batch(texts, add_special_tokens=False)
    size = -(-len(texts) // parts)
    chunks = [texts[start : start + size] for start in range(0, len(texts), size)]
    with ThreadPoolExecutor(len(chunks), thread_name_prefix="pll-tokenize") as pool:
        encoded = pool.map(
            lambda chunk: backend.encode_batch(chunk, add_special_tokens=False), chunks
        )
        return list(itertools.chain.from_iterable(encoded))


def _encode_slow(tokenizer: Any, text: str, boundary: int) -> Encoded:
    """Slow tokenizers give neither offsets nor words: the context is the longest run of
    leading tokens that the context alone also produces, and each token is its own word
    (only metrics that are not word-level accept that; see require_fast_tokenizer)."""
    if not text:
        return Encoded((), (), 0)
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
