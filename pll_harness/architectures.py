"""What the engine must know about each supported masked-LM architecture, in one place.

Each :class:`Architecture` names a transformers ``*ForMaskedLM`` class and says

- how its MLM head turns hidden rows into logits: the model's own modules up to the
  vocabulary projection, then that projection's weight and bias (a :class:`Head`), so
  that scoring can run the head on the target rows only (see :mod:`pll_harness.heads`)
  and write the logits into a buffer it reuses; the encoder is always the model's
  ``base_model``;
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

Transform = Callable[[torch.Tensor], torch.Tensor]
Projection = Callable[[], tuple[torch.Tensor, torch.Tensor | None]]


@dataclass(frozen=True)
class Head:
    """An MLM head as its two steps: ``transform`` (hidden rows to the projection's input)
    and the affine projection onto the vocabulary, ``rows @ weight.T + bias``, whose
    ``(weight, bias)`` ``projection`` returns when called (so a model moved to another
    device after the split is still read correctly).

    The projection is done here rather than by the model's module so that the caller can
    pass ``out``: for a small model, a fresh logits tensor for every chunk cost more than
    the projection itself (bench/README.md, "Why fresh buffers were slow").
    """

    transform: Transform
    projection: Projection

    def __call__(self, hidden: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        rows = self.transform(hidden)
        weight, bias = self.projection()
        if bias is None:
            return torch.mm(rows, weight.t(), out=out)
        return torch.addmm(bias, rows, weight.t(), out=out)


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


def _linear(module: torch.nn.Linear) -> Projection:
    return lambda: (module.weight, module.bias)


def _bert_head(model: torch.nn.Module) -> Head:
    predictions = model.cls.predictions
    return Head(predictions.transform, _linear(predictions.decoder))


def _roberta_head(model: torch.nn.Module) -> Head:
    """RobertaLMHead and its copies (XLM-R, CamemBERT, Data2VecText, Longformer)."""
    from transformers.activations import gelu

    head = model.lm_head
    return Head(lambda x: head.layer_norm(gelu(head.dense(x))), _linear(head.decoder))


def _distilbert_head(model: torch.nn.Module) -> Head:
    def transform(hidden: torch.Tensor) -> torch.Tensor:
        return model.vocab_layer_norm(model.activation(model.vocab_transform(hidden)))

    return Head(transform, _linear(model.vocab_projector))


def _albert_head(model: torch.nn.Module) -> Head:
    head = model.predictions
    return Head(lambda x: head.LayerNorm(head.activation(head.dense(x))), _linear(head.decoder))


def _electra_head(model: torch.nn.Module) -> Head:
    return Head(model.generator_predictions, _linear(model.generator_lm_head))


def _deberta_v2_head(model: torch.nn.Module) -> Head:
    """``legacy`` checkpoints (the default, e.g. deberta-v3) keep the BERT-style ``cls``
    head; the others project onto the word embeddings, plus the head's own bias."""
    if getattr(model, "legacy", True) and hasattr(model, "cls"):
        return _bert_head(model)
    head = model.lm_predictions.lm_head
    embeddings = model.deberta.embeddings.word_embeddings
    return Head(
        lambda x: head.LayerNorm(head.transform_act_fn(head.dense(x))),
        lambda: (embeddings.weight, head.bias),
    )


def _modernbert_head(model: torch.nn.Module) -> Head:
    return Head(model.head, _linear(model.decoder))


ARCHITECTURES: dict[str, Architecture] = {
    spec.model_class: spec
    for spec in (
        Architecture("BertForMaskedLM", _bert_head, no_offset),
        Architecture("RobertaForMaskedLM", _roberta_head, after_padding),
        Architecture("XLMRobertaForMaskedLM", _roberta_head, after_padding),
        Architecture("CamembertForMaskedLM", _roberta_head, after_padding),
        Architecture("Data2VecTextForMaskedLM", _roberta_head, after_padding),
        Architecture("LongformerForMaskedLM", _roberta_head, after_padding),
        Architecture("DistilBertForMaskedLM", _distilbert_head, no_offset),
        Architecture("AlbertForMaskedLM", _albert_head, no_offset),
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
