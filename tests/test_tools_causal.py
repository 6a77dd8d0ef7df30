"""The causal LM beside the masked one: log P(text | BOS), long texts in windows."""

from __future__ import annotations

import logging
import math
import shutil

import pytest
from tools_support import causal_reference

from pll_harness.tools.causal import CausalScorer
from pll_harness.tools.words import words_of

PARAGRAPH = "The traveler lost the souvenir. A cat sat on the mat. She is a nurse."


def test_causal_scores_long_texts_in_windows(tiny_gpt2):
    """In windows, so without transformers' warning that the text is too long for the
    model, which would be false."""
    import torch

    scorer = CausalScorer(str(tiny_gpt2), device="cpu")
    scorer.tokenizer.model_max_length = scorer.max_length  # as gpt2's declares its 1024
    long_text = " ".join([PARAGRAPH] * 8)
    said: list[logging.LogRecord] = []
    heard = logging.Handler()
    heard.emit = said.append
    logging.getLogger("transformers").addHandler(heard)  # it does not propagate further
    try:
        ids = scorer.encode(long_text)
    finally:
        logging.getLogger("transformers").removeHandler(heard)
    assert not [r for r in said if "sequence length" in r.getMessage()]
    assert len(ids) > scorer.max_length  # 64 positions
    short, long = scorer.score(["A cat sat.", long_text])
    assert short.logprob == pytest.approx(causal_reference(tiny_gpt2, "A cat sat."), abs=1e-4)
    assert len(long.token_logprobs) == len(ids)
    assert all(math.isfinite(v) for v in long.token_logprobs)
    # the first half-window sees BOS and everything before it: same as one plain pass
    head = [scorer.bos, *ids[:40]]
    with torch.no_grad():
        logprobs = scorer.model(torch.tensor([head])).logits[0, :-1].log_softmax(-1)
    expected = logprobs.gather(1, torch.tensor(head[1:])[:, None])[:, 0].tolist()
    assert list(long.token_logprobs[:32]) == pytest.approx(expected[:32], abs=1e-4)


def test_a_context_is_visible_and_not_scored(tiny_gpt2):
    scorer = CausalScorer(str(tiny_gpt2), device="cpu")
    (alone,) = scorer.score(["the souvenir."])
    (given,) = scorer.score([" the souvenir."], context="The traveler lost")
    assert given.logprob == pytest.approx(
        causal_reference(tiny_gpt2, " the souvenir.", context="The traveler lost"), abs=1e-4
    )
    assert given.logprob != pytest.approx(alone.logprob, abs=1e-4)


def test_a_tokenizer_that_adds_bos_itself_gets_one_bos(tiny_llama):
    """Llama's tokenizer adds ``<s>`` itself: the text is still scored after one BOS,
    in a batch of several lengths (right-padded) as alone."""
    scorer = CausalScorer(str(tiny_llama), device="cpu", batch_size=3)
    texts = ["A cat sat.", "She is a nurse.", " The traveler lost the souvenir. ", "x", ""]
    scores = scorer.score(texts)
    for text, score in zip(texts, scores, strict=True):
        assert score.logprob == pytest.approx(causal_reference(tiny_llama, text), abs=1e-4)
    assert "<s>" not in scores[0].tokens


def test_words_break_at_spaces_when_the_tokenizer_does_not_pre_tokenize(tiny_llama, tiny_gpt2):
    """Llama's tokenizer gives every token of a sentence word id 0; the causal OOV ratio
    of ``diagnose`` needs its words, split at whitespace."""
    for folder, expected in [
        (tiny_llama, ["A", "cat", "sat", "on", "the", "mat."]),
        (tiny_gpt2, ["A", "cat", "sat", "on", "the", "mat", "."]),
    ]:
        scorer = CausalScorer(str(folder), device="cpu")
        text = " A cat sat on the mat."
        tokens = scorer.tokenizer.convert_ids_to_tokens(scorer.encode(text))
        words = words_of(scorer.tokenizer, tokens, scorer.word_ids(text))
        assert [word for word, _ in words] == expected
        assert sum(n for _, n in words) == len(tokens)


def test_a_checkpoint_without_its_tokenizer_files_is_refused(tiny_gpt2, tmp_path):
    """Its tokenizer would give no token of a sentence at all."""
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_gpt2 / name, tmp_path / name)
    with pytest.raises(ValueError, match="holds no tokenizer files"):
        CausalScorer(str(tmp_path), device="cpu")


def test_a_masked_lm_is_refused(tiny_model_dir):
    """BERT and RoBERTa load as ``AutoModelForCausalLM`` but attend both ways: their
    "causal" log-likelihoods would be meaningless numbers."""
    with pytest.raises(ValueError, match="not a causal LM"):
        CausalScorer(tiny_model_dir, device="cpu")
