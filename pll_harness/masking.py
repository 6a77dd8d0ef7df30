"""Masking plans: which positions are hidden when one target token is scored.

A plan is a pure function of the word each position belongs to, so it can be checked by
hand on tiny examples and reused for any tokenizer.  The four metrics follow Kauf & Ivanova
(2023, section 3.1 and appendix G):

- ``original`` (Salazar et al. 2020): mask the target only.
- ``word_l2r``: mask the target and the later tokens of its word, so that the first piece of
  ``so ##uven ##ir`` cannot be read off its own continuation.
- ``whole_word``: mask every token of the target's word.
- ``sentence_l2r``: mask the target and every later position, closing special token
  included, as the paper's reference code does.

Positions marked *protected* (the context of an lm-eval request) are never masked.
"""

from __future__ import annotations

import torch

PLL_METRICS: tuple[str, ...] = ("original", "word_l2r", "whole_word", "sentence_l2r")
DEFAULT_METRIC = "word_l2r"
WORD_LEVEL_METRICS = frozenset({"word_l2r", "whole_word"})

NO_WORD = -1
"""Word id given to special tokens: they belong to no word and are never targets."""


def check_metric(metric: str) -> str:
    """Return ``metric`` if it is known, else raise an error that lists the valid names."""
    if metric not in PLL_METRICS:
        raise ValueError(
            f"Unknown pll_metric {metric!r}. Choose one of: {', '.join(PLL_METRICS)} "
            f"(default {DEFAULT_METRIC!r})."
        )
    return metric


def mask_plan(
    word_ids: torch.Tensor,
    targets: torch.Tensor,
    metric: str,
    protected: torch.Tensor | None = None,
) -> torch.Tensor:
    """Boolean ``[len(targets), len(word_ids)]`` matrix: row i is the mask used to score
    ``targets[i]``.

    ``word_ids`` holds one word index per position (``NO_WORD`` for special tokens);
    ``protected`` marks positions that must stay visible whatever the metric.
    """
    check_metric(metric)
    length = word_ids.shape[0]
    positions = torch.arange(length, device=word_ids.device)
    targets = targets.to(device=word_ids.device, dtype=torch.long)
    is_target = positions[None, :] == targets[:, None]
    if metric == "original":
        plan = is_target
    elif metric == "sentence_l2r":
        plan = positions[None, :] >= targets[:, None]
    else:
        target_words = word_ids[targets]
        same_word = (word_ids[None, :] == target_words[:, None]) & (
            target_words[:, None] != NO_WORD
        )
        if metric == "word_l2r":
            same_word &= positions[None, :] >= targets[:, None]
        plan = same_word | is_target
    if protected is not None:
        plan = plan & ~protected.to(device=plan.device)[None, :]
    return plan
