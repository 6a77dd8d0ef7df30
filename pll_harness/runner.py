"""The batched engine: pack masked copies into batches and score their targets.

A *copy plan* holds one token sequence, the distinct masked versions of it that a metric
needs, and which target each version scores.  The runner sorts sequences by length so that
batches carry little padding, fills each batch up to a token budget, runs the encoder once
per batch, and applies the MLM head only to the rows of the hidden states that sit at
target positions.  Log-softmax runs in float32 whatever the model's dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from pll_harness.allocator import pin_mmap_threshold
from pll_harness.heads import MaskedLMParts
from pll_harness.masking import mask_plan

HEAD_CHUNK_ELEMENTS = {"cpu": 1 << 21, "default": 1 << 26}
"""Upper bound on logits held at once (rows x vocab): 8 MB in float32 on the CPU, where
bigger chunks gain no speed but add to peak memory; 256 MB on accelerators."""


@dataclass(frozen=True)
class CopyPlan:
    """Masked copies of one sequence.

    ``masks[c]`` marks the positions replaced by the mask token in copy ``c``; target ``t``
    sits at ``target_positions[t]`` and is read from copy ``target_copies[t]``.
    """

    input_ids: torch.Tensor
    masks: torch.Tensor
    target_positions: torch.Tensor
    target_copies: torch.Tensor

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_copies(self) -> int:
        return int(self.masks.shape[0])


def build_copy_plan(
    input_ids: torch.Tensor,
    word_ids: torch.Tensor,
    targets: torch.Tensor,
    metric: str,
    protected: torch.Tensor | None = None,
) -> CopyPlan:
    """Plan the copies for ``targets``; targets that need the same mask share one copy
    (all pieces of a word under ``whole_word``), which saves forward passes."""
    plan = mask_plan(word_ids, targets, metric, protected)
    if plan.shape[0] == 0:
        return CopyPlan(input_ids, plan, targets, targets.new_zeros(0))
    masks, copies = torch.unique(plan, dim=0, return_inverse=True)
    return CopyPlan(input_ids, masks, targets, copies)


@dataclass(frozen=True)
class TargetScores:
    """Per-target log-probabilities (float32) and whether each target was the argmax."""

    logprobs: torch.Tensor
    greedy: torch.Tensor


@dataclass(frozen=True)
class Batching:
    """How copies are packed: at most ``max_batch_tokens`` padded tokens per forward pass,
    and, when ``batch_size`` is set, the copies of at most that many sequences (lm-eval's
    ``batch_size`` counts requests; a sequence's copies are what one request costs)."""

    max_batch_tokens: int
    batch_size: int | None = None

    def rows_for(self, length: int) -> int:
        return max(1, self.max_batch_tokens // max(length, 1))


@dataclass(frozen=True)
class Segment:
    """Copies ``first`` to ``stop`` (exclusive) of plan ``plan``."""

    plan: int
    first: int
    stop: int


Batch = tuple[Segment, ...]
"""The copies one forward pass scores."""


def plan_batches(plans: Sequence[CopyPlan], batching: Batching) -> list[Batch]:
    """Pack the copies of ``plans`` into batches, longest sequences first (an out-of-memory
    error shows at once), each filled up to the row limit its longest sequence allows; a
    sequence with more copies than that is split over several batches.

    Plans are ordered by their content, not by their position in ``plans``, so the same set
    of plans gives the same batches in any order.  Float32 results depend slightly on what
    else shares a batch (padding width, matrix shapes); with content-ordered batches a
    data-parallel run, which deals whole batches out to processes, reproduces a
    single-process run exactly.
    """
    order = sorted(
        (i for i in range(len(plans)) if plans[i].n_copies > 0),
        key=lambda i: (
            -plans[i].length,
            plans[i].input_ids.tolist(),
            plans[i].target_positions.tolist(),
        ),
    )
    batches: list[Batch] = []
    current: list[Segment] = []
    room = 0
    for index in order:
        plan = plans[index]
        if batching.batch_size and len(current) >= batching.batch_size:
            room = 0
        first = 0
        while first < plan.n_copies:
            if room == 0:
                if current:
                    batches.append(tuple(current))
                current, room = [], batching.rows_for(plan.length)
            take = min(room, plan.n_copies - first)
            current.append(Segment(index, first, first + take))
            room -= take
            first += take
    if current:
        batches.append(tuple(current))
    return batches


def batch_cost(plans: Sequence[CopyPlan], batch: Batch) -> int:
    """Padded tokens the forward pass processes: what its time is roughly proportional to."""
    rows = sum(segment.stop - segment.first for segment in batch)
    return rows * max(plans[segment.plan].length for segment in batch)


class PLLRunner:
    """Scores copy plans with one model."""

    def __init__(
        self,
        parts: MaskedLMParts,
        mask_token_id: int,
        pad_token_id: int,
        device: torch.device | str,
        batching: Batching,
        vocab_size: int,
    ) -> None:
        self.parts = parts
        self.vocab_size = vocab_size
        self.mask_token_id = mask_token_id
        self.pad_token_id = pad_token_id
        self.device = torch.device(device)
        self.batching = batching
        if self.device.type == "cpu":
            pin_mmap_threshold()

    def run(
        self,
        plans: Sequence[CopyPlan],
        batches: Sequence[Batch] | None = None,
        on_batch_done: Callable[[Batch], None] | None = None,
    ) -> list[TargetScores]:
        """Score the targets in ``batches`` (default: all, as ``plan_batches`` packs them);
        targets in no given batch stay NaN, so partial results can be pooled and a target
        that nobody scored cannot pass for a number."""
        if batches is None:
            batches = plan_batches(plans, self.batching)
        logprobs = [torch.full((p.target_positions.shape[0],), torch.nan) for p in plans]
        greedy = [torch.zeros(p.target_positions.shape[0], dtype=torch.bool) for p in plans]
        for batch in batches:
            self._score_batch(plans, batch, logprobs, greedy)
            if on_batch_done is not None:
                on_batch_done(batch)
        return [TargetScores(lp, g) for lp, g in zip(logprobs, greedy, strict=True)]

    @torch.inference_mode()
    def _score_batch(
        self,
        plans: Sequence[CopyPlan],
        batch: Batch,
        logprobs: list[torch.Tensor],
        greedy: list[torch.Tensor],
    ) -> None:
        n_rows = sum(s.stop - s.first for s in batch)
        width = max(plans[s.plan].length for s in batch)
        input_ids = torch.full((n_rows, width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((n_rows, width), dtype=torch.long)
        rows, positions, tokens, owners = [], [], [], []
        row = 0
        for segment in batch:
            plan = plans[segment.plan]
            count = segment.stop - segment.first
            copies = torch.where(
                plan.masks[segment.first : segment.stop], self.mask_token_id, plan.input_ids
            )
            input_ids[row : row + count, : plan.length] = copies
            attention[row : row + count, : plan.length] = 1
            selected = (plan.target_copies >= segment.first) & (plan.target_copies < segment.stop)
            picked = selected.nonzero().squeeze(1)
            rows.append(plan.target_copies[picked] - segment.first + row)
            positions.append(plan.target_positions[picked])
            tokens.append(plan.input_ids[plan.target_positions[picked]])
            owners.append((segment.plan, picked))
            row += count
        hidden = self.parts.encoder(
            input_ids.to(self.device, non_blocking=True),
            attention.to(self.device, non_blocking=True),
        )
        row_index = torch.cat(rows).to(hidden.device)
        position_index = torch.cat(positions).to(hidden.device)
        target_tokens = torch.cat(tokens).to(hidden.device)
        target_hidden = hidden[row_index, position_index]
        lp, top = self._head_scores(target_hidden, target_tokens)
        start = 0
        for plan_index, picked in owners:
            stop = start + picked.shape[0]
            logprobs[plan_index][picked] = lp[start:stop]
            greedy[plan_index][picked] = top[start:stop]
            start = stop

    def _head_scores(
        self, target_hidden: torch.Tensor, target_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Head, float32 log-probability of the target and argmax over the vocabulary, in
        row chunks so that large vocabularies stay within HEAD_CHUNK_ELEMENTS.

        ``logit[target] - logsumexp(logits)`` equals log-softmax at the target without a
        second ``[rows x vocab]`` tensor."""
        budget = HEAD_CHUNK_ELEMENTS.get(target_hidden.device.type, HEAD_CHUNK_ELEMENTS["default"])
        chunk = max(1, budget // self.vocab_size)
        lp_chunks, top_chunks = [], []
        for start in range(0, target_hidden.shape[0], chunk):
            logits = self.parts.head(target_hidden[start : start + chunk]).float()
            tokens = target_tokens[start : start + chunk]
            picked = logits.gather(1, tokens[:, None]).squeeze(1)
            lp_chunks.append((picked - torch.logsumexp(logits, -1)).cpu())
            top_chunks.append((logits.argmax(-1) == tokens).cpu())
        return torch.cat(lp_chunks), torch.cat(top_chunks)
