"""Split a masked LM into what scoring needs: the encoder's output at the target positions
through the MLM head's transform, and the head's projection onto the vocabulary.

Scoring needs logits at the target positions only.  Running the encoder on all copies and
the head on the gathered target rows avoids the ``[copies x seq x vocab]`` logits tensor,
which dominates time and memory for large vocabularies.  Where the architecture's spec
has a :class:`~pll_harness.architectures.LastLayer`, the encoder's last layer also runs at
the targets only.  Each supported architecture's own modules are called (see
:mod:`pll_harness.architectures`), so the numbers are those of ``model(...).logits`` up
to float rounding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from pll_harness.architectures import ARCHITECTURES, Head, LastLayer, architecture_of

logger = logging.getLogger(f"lm_eval.{__name__}")

TargetStates = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``states(input_ids, rows, positions)``: what the head projects onto the vocabulary at
``(rows, positions)`` of ``input_ids`` [copies, length], which hold no padding: the
encoder's output there, through the head's transform.  ``rows`` are non-decreasing and
name every copy, as in the runner's batches, where each copy is made for a target (see
:class:`pll_harness.architectures.LastLayer`)."""
LogitsHead = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]
"""``head(states, out)``: the logits of the rows of ``states``, written into ``out``
where the head can (see :meth:`pll_harness.architectures.Head.project`)."""


@dataclass(frozen=True)
class MaskedLMParts:
    """``states(input_ids, rows, positions) -> rows to project`` and ``head(rows, out)
    -> logits``: the runner calls ``states`` once per batch and ``head`` on chunks of its
    rows, so that everything but the vocabulary-wide projection runs on all of a batch's
    targets at once.

    ``split`` is False for the fallback, whose "hidden states" are already full logits
    (its head returns them as they are and leaves ``out`` alone).
    """

    states: TargetStates
    head: LogitsHead
    split: bool


class _LastLayerReached(Exception):
    """Ends the base model's forward where the last layer would start."""


def _last_layer_input(last: LastLayer, forward: Callable[[], object]) -> torch.Tensor:
    """The hidden states that ``forward()`` feeds the last layer, without running it: the
    model's own code computes everything before it (embeddings, their projection, earlier
    layers), so no architecture's preamble is re-implemented here.  The last layer is the
    ``last.calls``-th call of ``last.module`` (ALBERT runs one module for several layers)."""
    captured: list[torch.Tensor] = []
    calls = 0

    def stop(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        nonlocal calls
        calls += 1
        if calls < last.calls:
            return
        captured.append(args[0] if args else kwargs["hidden_states"])
        raise _LastLayerReached

    handle = last.module.register_forward_pre_hook(stop, with_kwargs=True)
    try:
        forward()
    except _LastLayerReached:
        pass
    finally:
        handle.remove()
    if not captured:
        raise RuntimeError(
            "The model's forward never reached the encoder layer that was its last when "
            "the scorer was built; build the scorer again after changing the model's layers."
        )
    return captured[0]


def _target_states(base: torch.nn.Module, last: LastLayer | None, head: Head) -> TargetStates:
    if last is None:

        def all_positions(input_ids: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
            return head.transform(
                base(input_ids=input_ids, attention_mask=None)[0][rows, positions]
            )

        return all_positions

    def targets_only(input_ids: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        hidden = _last_layer_input(last, lambda: base(input_ids=input_ids, attention_mask=None))
        return head.transform(last.at_targets(hidden, rows, positions))

    return targets_only


def split_masked_lm(model: torch.nn.Module) -> MaskedLMParts:
    """Target states and head of a supported architecture, or a full-logits fallback.

    The head's projection is read rather than called (see
    :class:`pll_harness.architectures.Head`), so a projection that accelerate offloaded
    (``device_map`` with ``"cpu"`` or ``"disk"``: its weight or bias stays on the meta
    device outside the module's own forward) takes the fallback too."""
    spec = architecture_of(model)
    if spec is None:
        logger.warning(
            "%s is not one of the architectures whose MLM head pll_harness applies at target "
            "positions only (%s); falling back to full logits, which is slower and uses more "
            "memory. Scores are unaffected.",
            type(model).__name__,
            ", ".join(ARCHITECTURES),
        )
        return _full_logits(model)
    head = spec.head(model)
    if any(tensor is not None and tensor.is_meta for tensor in head.projection()):
        logger.warning(
            "The MLM head of %s is offloaded (device_map); computing full logits, which is "
            "slower. Scores are unaffected.",
            type(model).__name__,
        )
        return _full_logits(model)
    states = _target_states(model.base_model, spec.last_layer(model), head)
    return MaskedLMParts(states, head.project, True)


def _full_logits(model: torch.nn.Module) -> MaskedLMParts:
    """The model's own forward, its logits gathered at the targets."""

    def full_logits(input_ids: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        return model(input_ids=input_ids, attention_mask=None).logits[rows, positions]

    def logits_as_they_are(rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return rows

    return MaskedLMParts(full_logits, logits_as_they_are, False)
