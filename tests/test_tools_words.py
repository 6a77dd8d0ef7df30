"""Words as PLL sees them, on WordPiece and byte-level BPE."""

from __future__ import annotations

from transformers import AutoTokenizer

from pll_harness.tools.words import is_wordlike, word_ids, word_spans, words_of


def test_word_spans():
    assert word_spans([0, 1, 1, 1, 2]) == [(0, 1), (1, 4), (4, 5)]
    assert word_spans([]) == []


def test_words_are_rebuilt_from_their_pieces(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "The traveler lost the souvenir."
    ids = word_ids(tokenizer, text)
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])
    words = words_of(tokenizer, tokens, ids)
    assert [w for w, _ in words] == ["The", "traveler", "lost", "the", "souvenir", "."]
    assert sum(n for _, n in words) == len(tokens)
    assert dict(words)["souvenir"] > 1  # split into pieces by both tiny tokenizers


def test_is_wordlike():
    assert is_wordlike("souvenir") and is_wordlike("3:45")
    assert not is_wordlike(".") and not is_wordlike("")
