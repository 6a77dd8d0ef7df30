"""Each supported architecture's encoder + head reproduces ``model(...).logits`` exactly
(tolerance 1e-5 in float32), so gathering target rows before the head changes nothing."""

from __future__ import annotations

import logging

import pytest
import torch
import transformers

from pll_harness.heads import SUPPORTED_ARCHITECTURES, split_masked_lm

SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 48,
    "max_position_embeddings": 40,
}

CONFIGS = {
    "BertForMaskedLM": ("BertConfig", {}),
    "RobertaForMaskedLM": ("RobertaConfig", {"pad_token_id": 1}),
    "XLMRobertaForMaskedLM": ("XLMRobertaConfig", {"pad_token_id": 1}),
    "CamembertForMaskedLM": ("CamembertConfig", {"pad_token_id": 1}),
    "DistilBertForMaskedLM": (
        "DistilBertConfig",
        {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 48},
    ),
    "AlbertForMaskedLM": ("AlbertConfig", {"embedding_size": 16}),
    "ElectraForMaskedLM": ("ElectraConfig", {"embedding_size": 16}),
    "DebertaV2ForMaskedLM": ("DebertaV2Config", {}),
    "ModernBertForMaskedLM": (
        "ModernBertConfig",
        {"global_attn_every_n_layers": 1, "local_attention": 8, "pad_token_id": 0},
    ),
}


def tiny_model(architecture: str) -> torch.nn.Module:
    config_name, extra = CONFIGS[architecture]
    config = getattr(transformers, config_name)(**{**SMALL, **extra})
    torch.manual_seed(0)
    return getattr(transformers, architecture)(config).eval()


def test_every_supported_architecture_is_tested():
    assert set(CONFIGS) == set(SUPPORTED_ARCHITECTURES)


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_split_head_equals_full_logits(architecture):
    model = tiny_model(architecture)
    parts = split_masked_lm(model)
    assert parts.split
    torch.manual_seed(1)
    input_ids = torch.randint(3, 97, (3, 11))
    attention = torch.ones_like(input_ids)
    attention[1, 7:] = 0
    with torch.no_grad():
        full = model(input_ids=input_ids, attention_mask=attention).logits
        hidden = parts.encoder(input_ids, attention)
        rows = torch.tensor([0, 1, 1, 2])
        cols = torch.tensor([0, 3, 6, 10])
        gathered = parts.head(hidden[rows, cols])
    torch.testing.assert_close(gathered, full[rows, cols], atol=1e-5, rtol=1e-5)


def test_unknown_architecture_falls_back_to_full_logits(caplog):
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = tiny_model("BertForMaskedLM")

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    model = Wrapped()
    with caplog.at_level(logging.WARNING):
        parts = split_masked_lm(model)
    assert not parts.split
    assert "falling back to full logits" in caplog.text
    input_ids = torch.randint(3, 97, (2, 5))
    logits = parts.encoder(input_ids, torch.ones_like(input_ids))
    assert logits.shape == (2, 5, 97)
