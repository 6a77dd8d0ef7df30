"""Split a masked LM into its encoder and its MLM head.

Scoring needs logits at the target positions only.  Running the encoder on all copies and
the head on the gathered target rows avoids the ``[copies x seq x vocab]`` logits tensor,
which dominates time and memory for large vocabularies.  Each supported architecture's
own head modules are called, so the numbers are those of ``model(...).logits``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)

Encoder = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Head = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class MaskedLMParts:
    """``encoder(input_ids, attention_mask) -> hidden`` and ``head(hidden rows) -> logits``.

    ``split`` is False for the fallback, whose "hidden states" are already full logits.
    """

    encoder: Encoder
    head: Head
    split: bool


def _base_encoder(base: torch.nn.Module) -> Encoder:
    def encode(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return base(input_ids=input_ids, attention_mask=attention_mask)[0]

    return encode


def _distilbert_head(model: torch.nn.Module) -> Head:
    def head(hidden: torch.Tensor) -> torch.Tensor:
        hidden = model.activation(model.vocab_transform(hidden))
        return model.vocab_projector(model.vocab_layer_norm(hidden))

    return head


def _electra_head(model: torch.nn.Module) -> Head:
    return lambda hidden: model.generator_lm_head(model.generator_predictions(hidden))


def _deberta_v2_head(model: torch.nn.Module) -> Head:
    if getattr(model, "legacy", True) and hasattr(model, "cls"):
        return model.cls
    embeddings = model.deberta.embeddings.word_embeddings
    return lambda hidden: model.lm_predictions(hidden, embeddings)


def _modernbert_head(model: torch.nn.Module) -> Head:
    return lambda hidden: model.decoder(model.head(hidden))


_ARCHITECTURES: dict[str, tuple[str, Callable[[torch.nn.Module], Head]]] = {
    "BertForMaskedLM": ("bert", lambda m: m.cls),
    "RobertaForMaskedLM": ("roberta", lambda m: m.lm_head),
    "XLMRobertaForMaskedLM": ("roberta", lambda m: m.lm_head),
    "CamembertForMaskedLM": ("roberta", lambda m: m.lm_head),
    "DistilBertForMaskedLM": ("distilbert", _distilbert_head),
    "AlbertForMaskedLM": ("albert", lambda m: m.predictions),
    "ElectraForMaskedLM": ("electra", _electra_head),
    "DebertaV2ForMaskedLM": ("deberta", _deberta_v2_head),
    "ModernBertForMaskedLM": ("model", _modernbert_head),
}

SUPPORTED_ARCHITECTURES = tuple(_ARCHITECTURES)


def split_masked_lm(model: torch.nn.Module) -> MaskedLMParts:
    """Encoder and head of a supported architecture, or a full-logits fallback."""
    entry = _ARCHITECTURES.get(type(model).__name__)
    if entry is not None:
        base_name, head_factory = entry
        return MaskedLMParts(_base_encoder(getattr(model, base_name)), head_factory(model), True)
    logger.warning(
        "%s is not one of the architectures whose MLM head pll_harness applies at target "
        "positions only (%s); falling back to full logits, which is slower and uses more "
        "memory. Scores are unaffected.",
        type(model).__name__,
        ", ".join(SUPPORTED_ARCHITECTURES),
    )

    def full_logits(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits

    return MaskedLMParts(full_logits, lambda rows: rows, False)
