"""split_masked_lm: the spec's head on the base model for supported architectures (checked
architecture by architecture in test_architectures.py), full logits for any other model."""

from __future__ import annotations

import logging

import torch
import transformers

from pll_harness.heads import split_masked_lm

TINY_BERT = transformers.BertConfig(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=48,
    max_position_embeddings=40,
)


def test_supported_architecture_runs_its_base_model_as_the_encoder():
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(TINY_BERT).eval()
    parts = split_masked_lm(model)
    input_ids = torch.randint(3, 97, (2, 5))
    with torch.no_grad():
        hidden = parts.encoder(input_ids, torch.ones_like(input_ids))
    assert parts.split
    assert hidden.shape == (2, 5, TINY_BERT.hidden_size)


def test_unknown_architecture_falls_back_to_full_logits(caplog):
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = transformers.BertForMaskedLM(TINY_BERT)

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    model = Wrapped().eval()
    with caplog.at_level(logging.WARNING):
        parts = split_masked_lm(model)
    assert not parts.split
    assert "falling back to full logits" in caplog.text
    input_ids = torch.randint(3, 97, (2, 5))
    with torch.no_grad():
        logits = parts.encoder(input_ids, torch.ones_like(input_ids))
        expected = model(input_ids, torch.ones_like(input_ids)).logits
    torch.testing.assert_close(parts.head(logits), expected)
