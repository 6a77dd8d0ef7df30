"""The causal LM beside the masked one: log P(text | BOS), long texts in windows."""

from __future__ import annotations

import math

import pytest
from tools_support import causal_reference

from pll_harness.tools.causal import CausalScorer

PARAGRAPH = "The traveler lost the souvenir. A cat sat on the mat. She is a nurse."


def test_causal_scores_long_texts_in_windows(tiny_gpt2):
    import torch

    scorer = CausalScorer(str(tiny_gpt2), device="cpu")
    long_text = " ".join([PARAGRAPH] * 8)
    ids = scorer.encode(long_text)
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
