"""Words as PLL sees them, on WordPiece and byte-level BPE."""

from __future__ import annotations

from pll_harness.scorer import PLLScorer
from pll_harness.tools.words import is_wordlike, word_ids, word_spans, words_of


def test_word_spans():
    assert word_spans([0, 1, 1, 1, 2]) == [(0, 1), (1, 4), (4, 5)]
    assert word_spans([]) == []


def test_words_are_rebuilt_from_their_pieces(tiny_model_dir):
    scorer = PLLScorer.from_pretrained(tiny_model_dir, device="cpu")
    tokenizer = scorer.tokenizer
    text = "The traveler lost the souvenir."
    ids = word_ids(scorer, text)
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])
    words = words_of(tokenizer, tokens, ids)
    assert [w for w, _ in words] == ["The", "traveler", "lost", "the", "souvenir", "."]
    assert sum(n for _, n in words) == len(tokens)
    assert dict(words)["souvenir"] > 1  # split into pieces by both tiny tokenizers


def test_word_ids_follow_the_scored_tokens(tiny_model_dir):
    """A spelt-out boundary token is visible but not scored: it has no word id, so that
    word ids and a SentenceScore's tokens pair up."""
    scorer = PLLScorer.from_pretrained(tiny_model_dir, device="cpu")
    text = f"The cat {scorer.tokenizer.sep_token} sat on the mat."
    (scored,) = scorer.score([text])
    ids = word_ids(scorer, text)
    assert len(ids) == len(scored.tokens)
    words = [word for word, _ in words_of(scorer.tokenizer, scored.tokens, ids) if word]
    assert words == ["The", "cat", "sat", "on", "the", "mat", "."]  # byte-level BPE: and a "Ġ"


def test_is_wordlike():
    assert is_wordlike("souvenir") and is_wordlike("3:45")
    assert not is_wordlike(".") and not is_wordlike("")
