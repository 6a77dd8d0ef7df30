"""Words as PLL sees them, on WordPiece, byte-level BPE and SentencePiece (Unigram)."""

from __future__ import annotations

from pll_harness.scorer import PLLScorer
from pll_harness.tools.words import (
    is_wordlike,
    sentence_words,
    token_offsets,
    word_ids,
    word_spans,
    words_of,
)


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


def _sentence_words(tokenizer, text: str) -> list[tuple[str, int]]:
    (offsets,) = token_offsets(tokenizer, [text])
    return sentence_words(text, offsets, tokenizer(text, add_special_tokens=False).word_ids())


def test_words_are_the_text_as_written_not_their_tokens(tiny_bert_dir):
    """An unknown word is itself, not "[UNK]", and counts as its one token; an uncased
    tokenizer's word keeps its capitals and accents."""
    from transformers import AutoTokenizer

    cased = AutoTokenizer.from_pretrained(tiny_bert_dir)
    text = "The naïve Zoë met me."
    assert cased.tokenize(text).count(cased.unk_token) == 2
    assert _sentence_words(cased, text) == [
        ("The", 1),
        ("naïve", 1),
        ("Zoë", 1),
        ("met", 1),
        ("me", 2),
    ]
    uncased = AutoTokenizer.from_pretrained(tiny_bert_dir, do_lower_case=True)
    assert "##e" in uncased.tokenize("The café.")  # "cafe" to the tokenizer
    assert _sentence_words(uncased, "The café.") == [("The", 1), ("café", 3)]


def test_sentencepiece_words_leave_their_punctuation_out(tiny_sentencepiece_dir):
    """Metaspace splits words at whitespace only: "nurse." is one pre-tokenized word of two
    tokens, but the word is "nurse", of one token."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    assert tokenizer.tokenize("He is a nurse.")[-2:] == ["▁nurse", "."]
    assert _sentence_words(tokenizer, "He is a nurse.") == [
        ("He", 3),  # "▁", "H", "e"
        ("is", 1),
        ("a", 1),
        ("nurse", 1),
    ]
    words = _sentence_words(tokenizer, '"The cat," she said 𝄞.')
    assert [w for w, _ in words] == ["The", "cat", "she", "said"]
    assert dict(words)["The"] == 2  # "T", "he": not the "▁" and quote before them


def test_a_decomposed_accent_stays_in_its_word(tiny_bert_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    text = "cafe\u0301 au lait"
    assert [w for w, _ in _sentence_words(tokenizer, text)] == ["cafe\u0301", "au", "lait"]
