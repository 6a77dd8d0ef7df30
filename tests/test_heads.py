"""split_masked_lm: the base model's output at the targets through the spec's head
transform, then its projection, for supported architectures (checked architecture by
architecture in test_architectures.py), full logits for any other model."""

from __future__ import annotations

import logging

import torch
import transformers

from pll_harness.architectures import ARCHITECTURES
from pll_harness.heads import split_masked_lm

TINY_BERT = transformers.BertConfig(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=48,
    max_position_embeddings=40,
)


ROWS, POSITIONS = torch.tensor([0, 1, 1]), torch.tensor([4, 0, 3])


def test_supported_architecture_gives_the_heads_transform_of_the_base_models_output():
    """``states`` is what the projection takes (the transform runs once per batch, the
    projection chunk by chunk), and ``head`` is that projection alone."""
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(TINY_BERT).eval()
    parts = split_masked_lm(model)
    input_ids = torch.randint(3, 97, (2, 5))
    with torch.no_grad():
        states = parts.states(input_ids, ROWS, POSITIONS)
        hidden = model.base_model(input_ids=input_ids)[0][ROWS, POSITIONS]
        expected = model.cls.predictions.transform(hidden)
        logits = parts.head(states)
    assert parts.split
    torch.testing.assert_close(states, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits, model.cls.predictions.decoder(states))


def test_the_last_layer_runs_at_the_targets_only_and_leaves_no_hook():
    """The base model stops where the last layer would start (a pre-hook), and the spec's
    LastLayer computes the targets' rows: the layer's own forward never runs, and the
    model runs in full afterwards as before."""
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(TINY_BERT).eval()
    last = model.bert.encoder.layer[-1]
    calls = []
    last.register_forward_hook(lambda *_: calls.append(1))
    input_ids = torch.randint(3, 97, (2, 5))
    with torch.no_grad():
        split_masked_lm(model).states(input_ids, ROWS, POSITIONS)
        assert not calls
        assert not last._forward_pre_hooks
        model(input_ids=input_ids)
    assert calls == [1]


def test_relative_position_embeddings_run_the_last_layer_in_full():
    """transformers 4's BERT layers add relative position scores that the target-only
    layer does not compute; those configs keep the model's own last layer."""
    model = transformers.BertForMaskedLM(TINY_BERT).eval()
    model.config.position_embedding_type = "relative_key"
    assert ARCHITECTURES["BertForMaskedLM"].last_layer(model) is None


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
        logits = parts.states(input_ids, ROWS, POSITIONS)
        expected = model(input_ids, None).logits[ROWS, POSITIONS]
    torch.testing.assert_close(parts.head(logits), expected)


def _offloaded(model: torch.nn.Module, device_map: dict, tmp_path) -> torch.nn.Module:
    """``model`` saved and loaded again with some modules offloaded to disk by accelerate:
    their weights stay on the meta device outside their own forward."""
    model.save_pretrained(tmp_path / "model")
    return transformers.AutoModelForMaskedLM.from_pretrained(
        tmp_path / "model", device_map=device_map, offload_folder=str(tmp_path / "offload")
    ).eval()


def test_offloaded_weights_that_the_specs_read_directly_still_give_the_models_logits(tmp_path):
    """The head's projection (every spec) and ModernBERT's fused query-key-value projection
    are read as tensors rather than called, which an offloaded module does not allow."""
    torch.manual_seed(0)
    bert = _offloaded(
        transformers.BertForMaskedLM(TINY_BERT),
        {"bert.embeddings": "disk", "bert.encoder": "cpu", "cls": "disk"},
        tmp_path / "bert",
    )
    modernbert_config = transformers.ModernBertConfig(
        **{k: getattr(TINY_BERT, k) for k in ("vocab_size", "hidden_size", "intermediate_size")},
        num_hidden_layers=2,
        num_attention_heads=2,
        global_attn_every_n_layers=1,
        pad_token_id=0,
    )
    modernbert = _offloaded(
        transformers.ModernBertForMaskedLM(modernbert_config),
        {"model.embeddings": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk"}
        | {"model.final_norm": "cpu", "head": "cpu", "decoder": "cpu"},
        tmp_path / "modernbert",
    )
    # Without a bias, only some of the projection's tensors (the weight) are offloaded.
    modernbert_config.decoder_bias = modernbert_config.tie_word_embeddings = False
    bias_less = _offloaded(
        transformers.ModernBertForMaskedLM(modernbert_config),
        {"model": "cpu", "head": "cpu", "decoder": "disk"},
        tmp_path / "bias-less",
    )
    assert bias_less.decoder.bias is None
    input_ids = torch.randint(3, 97, (2, 5))
    for model in (bert, modernbert, bias_less):
        parts = split_masked_lm(model)
        with torch.no_grad():
            logits = parts.head(parts.states(input_ids, ROWS, POSITIONS))
            expected = model(input_ids=input_ids).logits[ROWS, POSITIONS]
        torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
