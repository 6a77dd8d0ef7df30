"""What the engine must know about each supported masked-LM architecture, in one place.

Each :class:`Architecture` names a transformers ``*ForMaskedLM`` class and says

- how its MLM head turns hidden rows into logits, using the model's own head modules, so
  that scoring can run the head on the target rows only (see :mod:`pll_harness.heads`);
  the encoder is always the model's ``base_model``;
- how many of its ``max_position_embeddings`` an input can use: fairseq-style models
  (RoBERTa and its descendants) number positions from ``pad_token_id + 1``, so their
  table holds ``pad_token_id + 1`` rows that no input reaches.

Adding an architecture is one entry in ``ARCHITECTURES`` plus its tiny test config in
``tests/test_architectures.py``, whose tests fail until both are right.  A model of any
other class still scores correctly (full logits, no position offset, the tokenizer's own
limit), only more slowly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Head = Callable[[torch.Tensor], torch.Tensor]
"""Hidden rows ``[rows x hidden]`` to logits ``[rows x vocab]``."""


def no_offset(config: Any) -> int:
    """Position ids start at 0: every row of the position table is usable."""
    return 0


def after_padding(config: Any) -> int:
    """fairseq's convention: position ids start at ``pad_token_id + 1``."""
    return (config.pad_token_id or 0) + 1


@dataclass(frozen=True)
class Architecture:
    """One supported ``*ForMaskedLM`` class (``model_class``, as transformers names it)."""

    model_class: str
    head: Callable[[torch.nn.Module], Head]
    position_offset: Callable[[Any], int]


def _attribute_head(name: str) -> Callable[[torch.nn.Module], Head]:
    """The head is one submodule, called on the hidden rows."""
    return lambda model: getattr(model, name)


def _distilbert_head(model: torch.nn.Module) -> Head:
    def head(hidden: torch.Tensor) -> torch.Tensor:
        hidden = model.activation(model.vocab_transform(hidden))
        return model.vocab_projector(model.vocab_layer_norm(hidden))

    return head


def _electra_head(model: torch.nn.Module) -> Head:
    return lambda hidden: model.generator_lm_head(model.generator_predictions(hidden))


def _deberta_v2_head(model: torch.nn.Module) -> Head:
    """``legacy`` checkpoints (the default, e.g. deberta-v3) keep the BERT-style ``cls``
    head; the others tie their decoder to the word embeddings at call time."""
    if getattr(model, "legacy", True) and hasattr(model, "cls"):
        return model.cls
    embeddings = model.deberta.embeddings.word_embeddings
    return lambda hidden: model.lm_predictions(hidden, embeddings)


def _modernbert_head(model: torch.nn.Module) -> Head:
    return lambda hidden: model.decoder(model.head(hidden))


ARCHITECTURES: dict[str, Architecture] = {
    spec.model_class: spec
    for spec in (
        Architecture("BertForMaskedLM", _attribute_head("cls"), no_offset),
        Architecture("RobertaForMaskedLM", _attribute_head("lm_head"), after_padding),
        Architecture("XLMRobertaForMaskedLM", _attribute_head("lm_head"), after_padding),
        Architecture("CamembertForMaskedLM", _attribute_head("lm_head"), after_padding),
        Architecture("Data2VecTextForMaskedLM", _attribute_head("lm_head"), after_padding),
        Architecture("LongformerForMaskedLM", _attribute_head("lm_head"), after_padding),
        Architecture("DistilBertForMaskedLM", _distilbert_head, no_offset),
        Architecture("AlbertForMaskedLM", _attribute_head("predictions"), no_offset),
        Architecture("ElectraForMaskedLM", _electra_head, no_offset),
        Architecture("DebertaV2ForMaskedLM", _deberta_v2_head, no_offset),
        Architecture("ModernBertForMaskedLM", _modernbert_head, no_offset),
    )
}


def architecture_of(model: torch.nn.Module) -> Architecture | None:
    """The spec of ``model``'s class, or None for a class without one."""
    return ARCHITECTURES.get(type(model).__name__)


def max_positions(model: torch.nn.Module) -> int | None:
    """How many tokens, special tokens included, the model's positions allow (None when
    its config declares no limit).  A model without a spec is taken to number its
    positions from 0."""
    config = model.config
    positions = getattr(config, "max_position_embeddings", None)
    if not positions:
        return None
    spec = architecture_of(model)
    return int(positions) - (spec.position_offset(config) if spec is not None else 0)
