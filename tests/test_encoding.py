"""Which tokens are context and which are scored, on WordPiece and byte-level BPE; which
tokens form a word, on those and sentencepiece-style pieces."""

from __future__ import annotations

import copy
import itertools
import re
from types import SimpleNamespace

import numpy as np
import pytest
from tokenizers import Regex, pre_tokenizers
from transformers import AutoTokenizer

from pll_harness import encoding
from pll_harness.encoding import (
    SpecialTokens,
    common_prefix_length,
    encode_requests,
    require_fast_tokenizer,
    special_tokens,
    split_words_at_whitespace,
    whitespace_inside_words,
)
from pll_harness.masking import NO_WORD


def encode_request(tokenizer, context: str, continuation: str) -> encoding.Encoded:
    """One request's tokens, as the batched call gives them."""
    return encode_requests(tokenizer, [(context, continuation)]).item(0)


@pytest.fixture(scope="module", params=["tiny_bert_dir", "tiny_roberta_dir"])
def tokenizer(request):
    return AutoTokenizer.from_pretrained(request.getfixturevalue(request.param))


def test_special_tokens_wrap_a_single_sequence(tokenizer):
    specials = special_tokens(tokenizer)
    full = tokenizer("A cat sat.")["input_ids"]
    assert full[: len(specials.prefix)] == list(specials.prefix)
    assert full[len(full) - len(specials.suffix) :] == list(specials.suffix)
    assert specials.prefix == (tokenizer.cls_token_id,)
    assert specials.suffix == (tokenizer.sep_token_id,)


def test_continuation_tokens_are_targets(tokenizer):
    whole = encode_request(tokenizer, "", "The hooligan wrecked the souvenir.")
    split = encode_request(tokenizer, "The hooligan", " wrecked the souvenir.")
    assert whole.first_target == 0
    assert split.ids == whole.ids
    context_tokens = tokenizer.convert_ids_to_tokens(list(split.ids[: split.first_target]))
    assert "".join(context_tokens).replace("##", "").replace("Ġ", "") == "Thehooligan"


def test_token_straddling_the_boundary_belongs_to_the_continuation(tokenizer):
    context = "The hooligan wrecked the souv"
    for cut in range(len("The hooligan wrecked the "), len(context) + 1):
        encoded = encode_request(tokenizer, context[:cut], context[cut:] + "enir.")
        offsets = tokenizer(
            "The hooligan wrecked the souvenir.",
            add_special_tokens=False,
            return_offsets_mapping=True,
        )["offset_mapping"]
        _, end = offsets[encoded.first_target]
        assert end > cut
        assert all(e <= cut for _, e in offsets[: encoded.first_target])


WHITESPACE_AT_THE_BOUNDARY = [
    ("A. ", " B"),
    ("double ", " space"),
    ("Two spaces.  ", "Next"),
    ("The cat ", "  sat"),
    ("The cat  ", "sat"),
    ("The cat", "   sat"),
]


def test_whitespace_at_the_boundary_stays_on_its_side(tiny_roberta_dir):
    """RoBERTa's tokenizer trims its offsets: a token of spaces alone gets an empty span
    just after them, so a context's own trailing space looked like the continuation's and
    was scored.  The same tokenizer with untrimmed offsets says where each token's text
    lies; the first target is the first token that ends after the boundary."""
    trimmed = AutoTokenizer.from_pretrained(tiny_roberta_dir)
    untrimmed = AutoTokenizer.from_pretrained(tiny_roberta_dir, trim_offsets=False)
    for context, continuation in WHITESPACE_AT_THE_BOUNDARY:
        encoded = encode_request(trimmed, context, continuation)
        true = untrimmed(
            context + continuation, add_special_tokens=False, return_offsets_mapping=True
        )
        assert list(encoded.ids) == true["input_ids"]
        first = next(i for i, (_, end) in enumerate(true["offset_mapping"]) if end > len(context))
        assert encoded.first_target == first, (context, continuation)


def test_surrounding_whitespace_is_stripped(tokenizer):
    plain = encode_request(tokenizer, "", "A cat sat.")
    padded = encode_request(tokenizer, "  ", "  A cat sat. \n")
    assert padded == plain
    assert encode_request(SlowView(tokenizer), " ", " A cat sat.") == encode_request(
        SlowView(tokenizer), "", "A cat sat."
    )
    assert encoding.strip_request(" ", " A cat sat.") == ("A cat sat.", 0)


def test_an_information_separator_at_an_end_is_a_token_and_is_scored(tokenizer):
    """Python's strip() takes U+001C-U+001F for whitespace; the tokenizers do not: RoBERTa's
    gives one a token, which the stripped text then lacked, never scored (BERT's normaliser
    drops it, so there nothing changes)."""
    separated = encode_request(tokenizer, "", "A cat sat.\x1f")
    assert list(separated.ids) == tokenizer("A cat sat.\x1f", add_special_tokens=False)["input_ids"]


def test_word_ids_group_pieces(tokenizer):
    encoded = encode_request(tokenizer, "", "The souvenir.")
    pieces = tokenizer.convert_ids_to_tokens(list(encoded.ids))
    assert len(pieces) > 3, f"souvenir should split into several pieces: {pieces}"
    assert encoded.word_ids[0] != encoded.word_ids[1]
    assert len(set(encoded.word_ids[1:-1])) == 1
    assert encoded.word_ids[-1] != encoded.word_ids[-2]


class SlowView:
    """A tokenizer seen as slow: no offsets, no word_ids()."""

    is_fast = False

    def __init__(self, fast):
        self._fast = fast

    def __call__(self, text, add_special_tokens=True, verbose=True):
        return {"input_ids": self._fast(text, add_special_tokens=add_special_tokens)["input_ids"]}


def test_slow_tokenizer_finds_the_same_boundary(tokenizer):
    for context, continuation in [("The hooligan", " wrecked it."), ("The hooligan wre", "cked")]:
        fast = encode_request(tokenizer, context, continuation)
        slow = encode_request(SlowView(tokenizer), context, continuation)
        assert slow.ids == fast.ids
        assert slow.first_target == fast.first_target


def test_slow_tokenizer_with_word_level_metric_says_what_to_do():
    with pytest.raises(ValueError, match=r"fast tokenizer.*pll_metric=original"):
        require_fast_tokenizer(SlowView(None), "word_l2r", word_level=True)
    require_fast_tokenizer(SlowView(None), "original", word_level=False)


def test_common_prefix_length():
    assert common_prefix_length([5, 6, 7], [5, 6, 9, 9]) == 2
    assert common_prefix_length([5, 6], [5, 6, 7]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length((1, 2), [3]) == 0


TEXTS = [
    "The hooligan wrecked the souvenir.",
    "Who should Derek hug after shocking Richard?",
    "These dogs, unlike that cat, weren't barking at 3:45 in the morning!",
    "A cat sat.",
    "",
    "Hi",
    "The teachers who the student admires have praised the orchestra.",
] * 2


class RecordingBackend:
    """A Rust tokenizer that records how many texts each ``encode_batch`` call gets."""

    def __init__(self, backend) -> None:
        self.backend, self.calls = backend, []

    def encode_batch(self, texts, add_special_tokens):
        self.calls.append(len(texts))
        return self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)


@pytest.fixture
def lm_eval_parallelism(monkeypatch):
    """The tokenizers library told not to parallelize, as lm-eval's command line does."""
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


def test_tokenizing_in_threads_equals_one_call(tokenizer, monkeypatch, lm_eval_parallelism):
    monkeypatch.setattr(encoding, "TEXTS_PER_THREAD", 2)
    monkeypatch.setattr(encoding.torch, "get_num_threads", lambda: 3)
    backend = RecordingBackend(tokenizer.backend_tokenizer)
    threaded = encoding._encode_in_threads(backend, TEXTS)
    whole = tokenizer.backend_tokenizer.encode_batch(TEXTS, add_special_tokens=False)
    assert backend.calls == [5, 5, 4]
    assert [(e.ids, e.offsets, e.word_ids) for e in threaded] == [
        (e.ids, e.offsets, e.word_ids) for e in whole
    ]


def test_few_texts_get_one_call(tokenizer, monkeypatch, lm_eval_parallelism):
    monkeypatch.setattr(encoding.torch, "get_num_threads", lambda: 3)
    backend = RecordingBackend(tokenizer.backend_tokenizer)
    encoding._encode_in_threads(backend, TEXTS)
    assert backend.calls == [len(TEXTS)]


def test_a_tokenizer_free_to_parallelize_gets_one_call(tokenizer, monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    monkeypatch.setattr(encoding, "TEXTS_PER_THREAD", 2)
    monkeypatch.setattr(encoding.torch, "get_num_threads", lambda: 3)
    backend = RecordingBackend(tokenizer.backend_tokenizer)
    encoding._encode_in_threads(backend, TEXTS)
    assert backend.calls == [len(TEXTS)]


GAPPED = [
    "The traveler lost the souvenir.",
    "Renée’s naïve fiancé ate crème brûlée at the café.",
    "Who should\tDerek hug\nafter shocking  Richard?",
    "",
    "Two\u00a0cafés\u3000fell, didn't they?",
]


def whitespace_words(text: str, offsets) -> list[int]:
    """The oracle: each token's word is the whitespace-separated chunk holding its first
    non-space character (-1 for a token of spaces only, whose word is a matter of taste)."""
    words = []
    for start, end in offsets:
        inner = [i for i in range(start, end) if not text[i].isspace()]
        words.append(len(text[: inner[0] + 1].split()) - 1 if inner else -1)
    return words


DIRECT_TEXTS = ["The hooligan wrecked the souvenir.", "A cat sat.", "Who should Derek hug?"]


def ids_of(encodings) -> list[list[int]]:
    return [list(e.ids) for e in encodings]


def test_the_direct_rust_call_gives_what_the_tokenizer_gives(tokenizer):
    expected = ids_of(tokenizer(DIRECT_TEXTS, add_special_tokens=False).encodings)
    assert ids_of(encoding._rust_encodings(tokenizer, DIRECT_TEXTS)) == expected


def test_settings_the_direct_call_cannot_see_take_the_tokenizers_own_call(tokenizer, monkeypatch):
    """The Rust call is made directly only where it is what ``tokenizer(texts)`` makes:
    not for a class with its own encoding step, and not when a first text comes out
    otherwise than in the tokenizer's own call."""

    class Shouting(type(tokenizer)):
        """Upper-cases every text but the first, which the one ordinary call sees."""

        def _encode_plus(self, text, *args, **kwargs):
            if isinstance(text, list):
                text = text[:1] + [t.upper() for t in text[1:]]
            return super()._encode_plus(text, *args, **kwargs)

    shouting = copy.deepcopy(tokenizer)
    shouting.__class__ = Shouting
    expected = ids_of(shouting(DIRECT_TEXTS, add_special_tokens=False).encodings)
    assert expected != ids_of(tokenizer(DIRECT_TEXTS, add_special_tokens=False).encodings)
    assert ids_of(encoding._rust_encodings(shouting, DIRECT_TEXTS)) == expected

    reversed_ids = [
        [*reversed(ids)]
        for ids in ids_of(
            tokenizer.backend_tokenizer.encode_batch(DIRECT_TEXTS, add_special_tokens=False)
        )
    ]
    monkeypatch.setattr(
        encoding,
        "_encode_in_threads",
        lambda backend, texts: [SimpleNamespace(ids=ids) for ids in reversed_ids],
    )
    expected = ids_of(tokenizer(DIRECT_TEXTS, add_special_tokens=False).encodings)
    assert ids_of(encoding._rust_encodings(tokenizer, DIRECT_TEXTS)) == expected


def test_words_of_a_script_without_spaces(tiny_bert_dir, tiny_sentencepiece_dir):
    """README: WordPiece makes each CJK ideograph a word; a sentencepiece model keeps the
    whole run between spaces as one word."""
    text = "我喜欢猫 我们"
    wordpiece = encode_requests(AutoTokenizer.from_pretrained(tiny_bert_dir), [("", text)])
    unigram = encode_requests(AutoTokenizer.from_pretrained(tiny_sentencepiece_dir), [("", text)])
    assert len(set(wordpiece.item(0).word_ids)) == 6
    assert len(set(unigram.item(0).word_ids)) == 2


def test_split_words_at_whitespace_numbers_each_text_from_zero():
    """One text's words as a sentencepiece tokenizer without split gives them, an empty
    text, then byte-level BPE's (a lone space token opens the word the next continues)."""
    texts = ["A cat sat. <s> Ok", "", "a  cat."]
    llama = [(0, 1), (1, 5), (5, 9), (9, 10), (11, 14), (14, 17)]
    byte_level = [(0, 1), (1, 2), (2, 3), (3, 6), (6, 7)]
    words = np.array([0, 0, 0, 0, NO_WORD, 0, 0, 1, 2, 2, 3])
    spans = np.array([*llama, *byte_level])
    split = split_words_at_whitespace(texts, words, spans, np.array([6, 0, 5]))
    assert split.tolist() == [0, 1, 2, 2, NO_WORD, 3, 0, 1, 2, 2, 3]


@pytest.mark.parametrize("model", ["tiny_bert_dir", "tiny_roberta_dir", "tiny_sentencepiece_dir"])
def test_words_that_break_at_whitespace_are_the_tokenizers_own(model, request):
    """WordPiece, byte-level BPE and XLM-R's pipeline need no help: their word ids are
    used as they are (byte-level BPE keeps `` \n`` one word, which a split would undo)."""
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(model))
    assert whitespace_inside_words(tokenizer) == ""
    texts = [*GAPPED, "Who \n should  Derek hug?"]
    encoded = encode_requests(tokenizer, [("", text) for text in texts])
    for index, text in enumerate(texts):
        own = tokenizer(text, add_special_tokens=False).word_ids() if text else []
        assert encoded.item(index).word_ids == tuple(own)


SPACES_ONLY = encoding.WHITESPACE.replace(" ", "")


@pytest.mark.parametrize(
    ("pre_tokenizer", "inside"),
    [
        (pre_tokenizers.Metaspace(split=False), encoding.WHITESPACE),  # Llama's
        (pre_tokenizers.Metaspace(split=True), SPACES_ONLY),  # BigBird's: splits at " " only
        (  # every gap but the tab: a probe that is one word must not mark the next gap
            pre_tokenizers.Split(
                Regex(f"[{re.escape(SPACES_ONLY.replace(chr(9), ''))} ]+"), "removed"
            ),
            "\t",
        ),
    ],
    ids=["metaspace-unsplit", "metaspace-spaces-only", "split-all-but-tab"],
)
def test_words_that_span_whitespace_are_split_there(tiny_sentencepiece_dir, pre_tokenizer, inside):
    tokenizer = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizer
    assert whitespace_inside_words(tokenizer) == "".join(sorted(inside))
    assert_words_break_at_whitespace(tokenizer)


def test_a_normalizer_that_strips_the_end_keeps_the_gaps_between_words(
    tiny_deberta_v2_tokenizer,
):
    """DeBERTa-v2's normalizer strips trailing whitespace, so a gap alone normalizes to
    nothing though a gap between words stays: probed alone, every gap looked deleted and
    the probe of none of them crashed the tokenizer call (an IndexError on building a
    scorer for any DeBERTa-v2/v3 checkpoint loaded by transformers 5)."""
    tokenizer = tiny_deberta_v2_tokenizer
    assert tokenizer.backend_tokenizer.normalizer.normalize_str("a \n") == "a"
    inside = whitespace_inside_words(tokenizer)
    assert inside and not set(inside) & set(" \t\n\r")  # "\n" and the like become " "
    assert_words_break_at_whitespace(tokenizer)


def assert_words_break_at_whitespace(tokenizer) -> None:
    """The engine's words of each :data:`GAPPED` text are the tokenizer's, broken at every
    whitespace between them (:func:`whitespace_words`)."""
    encoded = encode_requests(tokenizer, [("", text) for text in GAPPED])
    for index, text in enumerate(GAPPED):
        offsets = tokenizer(text, add_special_tokens=False).encodings[0].offsets if text else []
        want = whitespace_words(text, offsets)
        got = [g for g, w in zip(encoded.item(index).word_ids, want, strict=True) if w >= 0]
        want = [w for w in want if w >= 0]
        assert same_as_before(got) == same_as_before(want), text


def same_as_before(words: list[int]) -> list[bool]:
    """Which tokens continue the word of the token before them: word ids compared as a
    grouping, whatever their numbers."""
    return [a == b for a, b in itertools.pairwise(words)]


def test_split_words_keep_the_checkpoints_words_on_plain_text(tiny_sentencepiece_dir):
    """On text with single spaces the unsplit pipeline gives the checkpoint's own tokens,
    and after the split its own words too."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    unsplit = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    unsplit.backend_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(split=False)
    requests = [("", text) for text in GAPPED[:2]] + [("The traveler", " lost the souvenir.")]
    got, want = encode_requests(unsplit, requests), encode_requests(tokenizer, requests)
    for field in ("ids", "word_ids", "scored", "offsets"):
        assert np.array_equal(getattr(got, field), getattr(want, field)), field


def test_a_tokenizer_that_adds_no_special_tokens_has_an_empty_template():
    """The text may fill the whole encoding: no prefix, no suffix (kills a search for the
    text that stops one start short)."""

    def tokenizer(text, add_special_tokens):
        return {"input_ids": [5] * len(text)}

    assert special_tokens(tokenizer) == SpecialTokens((), ())
