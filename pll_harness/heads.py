"""Split a masked LM into its encoder and its MLM head.

Scoring needs logits at the target positions only.  Running the encoder on all copies and
the head on the gathered target rows avoids the ``[copies x seq x vocab]`` logits tensor,
which dominates time and memory for large vocabularies.  Each supported architecture's
own head modules are called (see :mod:`pll_harness.architectures`), so the numbers are
those of ``model(...).logits``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from pll_harness.architectures import ARCHITECTURES, architecture_of

logger = logging.getLogger(f"lm_eval.{__name__}")

Encoder = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LogitsHead = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]
"""``head(hidden rows, out)``: the logits of the rows, written into ``out`` where the head
can (see :class:`pll_harness.architectures.Head`)."""


@dataclass(frozen=True)
class MaskedLMParts:
    """``encoder(input_ids, attention_mask) -> hidden`` and ``head(hidden rows, out) ->
    logits``.

    ``split`` is False for the fallback, whose "hidden states" are already full logits
    (its head returns them as they are and leaves ``out`` alone).
    """

    encoder: Encoder
    head: LogitsHead
    split: bool


def _base_encoder(base: torch.nn.Module) -> Encoder:
    def encode(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return base(input_ids=input_ids, attention_mask=attention_mask)[0]

    return encode


def split_masked_lm(model: torch.nn.Module) -> MaskedLMParts:
    """Encoder and head of a supported architecture, or a full-logits fallback."""
    spec = architecture_of(model)
    if spec is not None:
        return MaskedLMParts(_base_encoder(model.base_model), spec.head(model), True)
    logger.warning(
        "%s is not one of the architectures whose MLM head pll_harness applies at target "
        "positions only (%s); falling back to full logits, which is slower and uses more "
        "memory. Scores are unaffected.",
        type(model).__name__,
        ", ".join(ARCHITECTURES),
    )

    def full_logits(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits

    def logits_as_they_are(rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return rows

    return MaskedLMParts(full_logits, logits_as_they_are, False)
