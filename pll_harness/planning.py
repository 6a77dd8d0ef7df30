"""Plan the scoring of many texts at once: sequences, masked copies and batches.

From the tokens of every distinct text (:class:`~pll_harness.encoding.Encodings`) the
planner builds, with array operations over all texts rather than a loop per text:

1. *sequences*: each text becomes one model input, special tokens added, or several
   windows when it is longer than the model accepts (:mod:`pll_harness.windows`);
2. *groups*: sequences of one length, sorted by content; identical sequences are kept once
   and their twins' results are copied at the end;
3. *copies*: one masked copy per distinct mask (:mod:`pll_harness.masking` via the metric
   registry); tokens that are not scored (lm-eval's context, the tokens in which two
   sentences of a pair differ) always stay visible; targets that need the same mask share
   one copy (all pieces of a word under ``whole_word``);
4. *batches*: contiguous runs of one group's copies.  Every batch holds sequences of one
   length only, so no padding and no attention mask are needed, and short sentences do
   not pay for a padding mask in the attention kernel.

Every scored token has a *slot* in one flat result array; text ``i`` owns slots
``slot_offsets[i]:slot_offsets[i + 1]``.  Groups and batches depend only on the content
of the texts, never on their order, so processes that each score some batches of the same
pooled texts reproduce one process's numbers exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pll_harness.encoding import Encodings, SpecialTokens
from pll_harness.masking import NO_WORD
from pll_harness.metrics import Metric
from pll_harness.windows import plan_windows

MAX_BATCH_ROWS = (1 << 16) - 1
"""Most copies in one forward pass.  CUDA kernels put the batch on a grid dimension of at
most 65,535 blocks, and cuDNN's attention fails from 65,536 on (pytorch#181235); on a large
GPU the token budget (:func:`pll_harness.scorer.default_batch_tokens`) allows 174,762
copies of a six-token sentence.  65,535 short copies still fill an H100."""

PLAN_CHUNK_ELEMENTS = 1 << 24
"""Mask elements (targets x length) worked on at once while planning, to bound memory on
long inputs: a 512-token window has 512 targets, i.e. 262,144 elements per sequence."""


@dataclass(frozen=True)
class Batching:
    """How copies are packed: at most ``max_batch_tokens`` tokens and MAX_BATCH_ROWS copies
    per forward pass, and, when ``batch_size`` is set, the copies of at most that many
    sequences (lm-eval's ``batch_size`` counts requests; a sequence's copies are what one
    request costs)."""

    max_batch_tokens: int
    batch_size: int | None = None

    def rows_for(self, length: int) -> int:
        return max(1, min(self.max_batch_tokens // max(length, 1), MAX_BATCH_ROWS))


@dataclass(frozen=True)
class CopyGroup:
    """The distinct sequences of one length and the masked copies made of them.

    Copy ``c`` masks sequence ``copy_sequence[c]`` as the metric does for a target at
    ``copy_target[c]``, except where the sequence is ``visible`` (tokens that are not
    scored); target ``t`` sits at ``target_position[t]`` of copy ``target_copy[t]``
    (non-decreasing) and its result goes to slot ``target_slot[t]``.
    """

    length: int
    input_ids: np.ndarray
    word_ids: np.ndarray
    visible: np.ndarray
    copy_sequence: np.ndarray
    copy_target: np.ndarray
    target_copy: np.ndarray
    target_position: np.ndarray
    target_slot: np.ndarray

    @property
    def n_copies(self) -> int:
        return int(self.copy_sequence.shape[0])

    def target_range(self, first: int, stop: int) -> tuple[int, int]:
        """The targets of copies ``first:stop``: ``target_*[start:stop]``."""
        start, end = np.searchsorted(self.target_copy, (first, stop))
        return int(start), int(end)

    def inputs(self, metric: Metric, first: int, stop: int, mask_token_id: int) -> BatchInputs:
        """The masked copies ``first:stop``, built when they run so that the copies of a
        whole benchmark never sit in memory at once."""
        sequences = self.copy_sequence[first:stop]
        hidden = copy_masks(
            metric, self.word_ids[sequences], self.copy_target[first:stop], self.visible[sequences]
        )
        ids = self.input_ids[sequences]
        start, end = self.target_range(first, stop)
        rows = self.target_copy[start:end] - first
        positions = self.target_position[start:end]
        return BatchInputs(
            input_ids=np.where(hidden, mask_token_id, ids),
            rows=rows,
            positions=positions,
            tokens=ids[rows, positions],
            slots=self.target_slot[start:end],
        )


class Batch(NamedTuple):
    """Copies ``first`` to ``stop`` (exclusive) of group ``group``: one forward pass."""

    group: int
    first: int
    stop: int


@dataclass(frozen=True)
class BatchInputs:
    """What the runner feeds the model for one batch: the masked copies, and for each
    target its row, its position, its true token and its result slot."""

    input_ids: np.ndarray
    rows: np.ndarray
    positions: np.ndarray
    tokens: np.ndarray
    slots: np.ndarray


@dataclass(frozen=True)
class Work:
    """Everything one scoring run does.

    ``slot_source[s]`` is the slot whose result answers slot ``s``: itself, or the twin
    of a duplicate sequence.  ``truncated`` counts texts whose context was cut on the left,
    that is whose first tokens no window shows: so that the whole continuation fits, or
    before a continuation scored in windows, whose first window shows only the end of it.
    """

    metric: Metric
    groups: tuple[CopyGroup, ...]
    batches: tuple[Batch, ...]
    slot_offsets: np.ndarray
    slot_source: np.ndarray
    truncated: int

    @property
    def n_slots(self) -> int:
        return int(self.slot_offsets[-1])

    def cost(self, batch: Batch) -> int:
        """Tokens the forward pass processes: what its time is roughly proportional to."""
        return (batch.stop - batch.first) * self.groups[batch.group].length

    def planned(self, batches: Iterable[Batch] | None = None) -> Iterator[tuple[CopyGroup, Batch]]:
        """``batches`` (None: all; none is none) with their groups, as the runner takes
        them."""
        batches = self.batches if batches is None else batches
        return ((self.groups[batch.group], batch) for batch in batches)

    def inputs(self, batch: Batch, mask_token_id: int) -> BatchInputs:
        """The masked copies of ``batch`` (see :meth:`CopyGroup.inputs`)."""
        group = self.groups[batch.group]
        return group.inputs(self.metric, batch.first, batch.stop, mask_token_id)


def copy_masks(
    metric: Metric, words: np.ndarray, targets: np.ndarray, visible: np.ndarray
) -> np.ndarray:
    """The metric's plan for each row's target, with the row's ``visible`` positions (its
    tokens that are not scored) kept visible whatever the metric."""
    return metric.plan(words, targets) & ~visible


@dataclass(frozen=True)
class _Sequences:
    """One row per model input: tokens ``start:stop`` of text ``text``, scoring its scored
    tokens in ``target_start:target_stop``."""

    text: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    target_start: np.ndarray
    target_stop: np.ndarray


def plan_work(
    encodings: Encodings,
    specials: SpecialTokens,
    capacity: int,
    metric: Metric,
    batching: Batching,
) -> Work:
    """Plan the scoring of every text's scored tokens within ``capacity`` text tokens per
    model input (the special tokens come on top)."""
    return WorkPlanner(encodings, specials, capacity, metric, batching).work()


class WorkPlanner:
    """Plans a :class:`Work` one group at a time, as its batches are asked for.

    Iterating gives ``(group, batch)`` for every batch in the order of :attr:`Work.batches`,
    and each group is planned only when its first batch is reached.  The runner keeps
    batches queued on a GPU, so the host plans a group while the device still runs the
    ones before: on all of BLiMP planning is 0.3-0.5 s of host time that would otherwise
    come before the first batch (bench/README.md).  What is known before any group is
    there at once: the slots, the windows and each group's length.  The groups, batches and
    slot sources are those of a plan made all at once, whatever the pace of iteration.
    """

    def __init__(
        self,
        encodings: Encodings,
        specials: SpecialTokens,
        capacity: int,
        metric: Metric,
        batching: Batching,
    ) -> None:
        self.metric, self.batching = metric, batching
        self._encodings, self._specials = encodings, specials
        self.slot_offsets = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum(encodings.n_targets, out=self.slot_offsets[1:])
        self._token_slots = np.cumsum(encodings.scored, dtype=np.int64) - 1
        self.sequences, self.truncated = _sequences(encodings, capacity)
        self.slot_source = np.arange(self.slot_offsets[-1], dtype=np.int64)
        ascending, inverse = np.unique(
            self.sequences.stop - self.sequences.start, return_inverse=True
        )
        self.lengths = ascending[::-1]
        """Text tokens of each group's sequences, longest first: group ``g`` holds
        ``lengths[g]``."""
        self.sequence_group = len(ascending) - 1 - inverse
        """The group of each sequence."""
        self.groups: list[CopyGroup] = []
        self.batches: list[Batch] = []
        """The batches of every group planned so far (all of a group's at once)."""
        self._pending = self._plan()

    @property
    def n_slots(self) -> int:
        return int(self.slot_offsets[-1])

    def __iter__(self) -> Iterator[tuple[CopyGroup, Batch]]:
        """The batches not handed out yet, planning groups as they are reached (one pass)."""
        return self._pending

    def _plan(self) -> Iterator[tuple[CopyGroup, Batch]]:
        for index, n in enumerate(self.lengths.tolist()):
            group = _group(
                self._encodings,
                self._token_slots,
                self.sequences,
                np.flatnonzero(self.sequence_group == index),
                n,
                self._specials,
                self.metric,
                self.slot_source,
            )
            batches = [Batch(index, *span) for span in _batch_spans(group, self.batching)]
            self.groups.append(group)
            self.batches.extend(batches)
            for batch in batches:
                yield group, batch

    def work(self) -> Work:
        """The whole plan, the groups not reached yet planned now."""
        for _ in self._pending:
            pass
        if len(self.groups) < len(self.lengths):
            raise RuntimeError(
                f"Planning stopped after {len(self.groups)} of {len(self.lengths)} groups (it "
                "was interrupted): plan again with a new WorkPlanner."
            )
        return Work(
            metric=self.metric,
            groups=tuple(self.groups),
            batches=tuple(self.batches),
            slot_offsets=self.slot_offsets,
            slot_source=self.slot_source,
            truncated=self.truncated,
        )


def _sequences(encodings: Encodings, capacity: int) -> tuple[_Sequences, int]:
    """Texts that fit are one sequence each (array operations); longer ones are cut into
    windows around their scored tokens (a loop, but only over the few texts that need it)."""
    lengths = encodings.lengths
    scored = encodings.n_targets > 0
    fits = np.flatnonzero(scored & (lengths <= capacity))
    columns = [(fits, np.zeros_like(fits), lengths[fits], np.zeros_like(fits), lengths[fits])]
    truncated = 0
    for text in np.flatnonzero(scored & (lengths > capacity)).tolist():
        flags = encodings.scored[encodings.offsets[text] : encodings.offsets[text + 1]]
        windows = plan_windows(int(lengths[text]), int(np.argmax(flags)), capacity)
        truncated += windows[0].start > 0
        columns.append(
            tuple(
                np.array(values, dtype=np.int64)
                for values in zip(
                    *((text, w.start, w.end, w.target_start, w.target_end) for w in windows),
                    strict=True,
                )
            )
        )
    text, start, stop, target_start, target_stop = (
        np.concatenate(parts).astype(np.int64, copy=False) for parts in zip(*columns, strict=True)
    )
    return _Sequences(text, start, stop, target_start, target_stop), truncated


def _group(
    encodings: Encodings,
    token_slots: np.ndarray,
    sequences: _Sequences,
    members: np.ndarray,
    n: int,
    specials: SpecialTokens,
    metric: Metric,
    slot_source: np.ndarray,
) -> CopyGroup:
    """The copies of the sequences ``members``, which all hold ``n`` text tokens.

    Identical sequences are kept once; ``slot_source`` is updated so that the slots of the
    dropped ones read the results of the one that was kept."""
    start = sequences.start[members]
    flat = (encodings.offsets[sequences.text[members]] + start)[:, None] + np.arange(n)[None, :]
    ids, words, scored = encodings.ids[flat], encodings.word_ids[flat], encodings.scored[flat]
    position = np.arange(n)[None, :] + start[:, None]
    targets = (
        scored
        & (position >= sequences.target_start[members][:, None])
        & (position < sequences.target_stop[members][:, None])
    )
    slots = np.where(targets, token_slots[flat], -1)

    order = np.lexsort((*targets.T[::-1], *scored.T[::-1], *words.T[::-1], *ids.T[::-1]))
    ids, words, scored, targets, slots = (a[order] for a in (ids, words, scored, targets, slots))
    repeated = np.zeros(len(order), dtype=bool)
    repeated[1:] = (
        (ids[1:] == ids[:-1]).all(axis=1)
        & (words[1:] == words[:-1]).all(axis=1)
        & (scored[1:] == scored[:-1]).all(axis=1)
        & (targets[1:] == targets[:-1]).all(axis=1)
    )
    if repeated.any():
        kept = np.maximum.accumulate(np.where(repeated, 0, np.arange(len(order))))
        rows, columns = np.nonzero(targets[repeated])
        twins = np.flatnonzero(repeated)[rows]
        slot_source[slots[twins, columns]] = slots[kept[twins], columns]
        keep = ~repeated
        ids, words, scored, targets, slots = (a[keep] for a in (ids, words, scored, targets, slots))

    prefix, suffix = len(specials.prefix), len(specials.suffix)
    count = ids.shape[0]

    def framed(body: np.ndarray, before: object, after: object) -> np.ndarray:
        """``body`` with the special tokens' columns around it."""
        return np.concatenate(
            [
                np.broadcast_to(np.asarray(before, dtype=body.dtype), (count, prefix)),
                body,
                np.broadcast_to(np.asarray(after, dtype=body.dtype), (count, suffix)),
            ],
            axis=1,
        )

    input_ids = framed(ids, specials.prefix, specials.suffix)
    word_ids = framed(words, NO_WORD, NO_WORD)
    visible = framed(~scored, False, False)
    target_sequence, column = np.nonzero(targets)
    target_position = prefix + column
    new_copy = _new_copies(metric, word_ids, visible, target_sequence, target_position)
    return CopyGroup(
        length=n + prefix + suffix,
        input_ids=input_ids,
        word_ids=word_ids,
        visible=visible,
        copy_sequence=target_sequence[new_copy],
        copy_target=target_position[new_copy],
        target_copy=np.cumsum(new_copy) - 1,
        target_position=target_position,
        target_slot=slots[target_sequence, column],
    )


def _new_copies(
    metric: Metric,
    word_ids: np.ndarray,
    visible: np.ndarray,
    target_sequence: np.ndarray,
    target_position: np.ndarray,
) -> np.ndarray:
    """True for each target that needs a copy of its own: its mask differs from the
    previous target's or belongs to another sequence.  Identical masks of one sequence
    are neighbours for every metric (a word's tokens are contiguous), so comparing
    neighbours finds them all.  Worked in chunks, to bound memory on long inputs; the last
    mask of a chunk is compared with the first of the next."""
    n_targets = target_sequence.shape[0]
    new = np.ones(n_targets, dtype=bool)
    per_chunk = max(1, PLAN_CHUNK_ELEMENTS // word_ids.shape[1])
    previous_mask, previous_sequence = None, -1
    for start in range(0, n_targets, per_chunk):
        stop = min(start + per_chunk, n_targets)
        sequences = target_sequence[start:stop]
        masks = copy_masks(
            metric, word_ids[sequences], target_position[start:stop], visible[sequences]
        )
        same = np.zeros(stop - start, dtype=bool)
        same[1:] = (sequences[1:] == sequences[:-1]) & (masks[1:] == masks[:-1]).all(axis=1)
        if sequences[0] == previous_sequence:
            same[0] = bool((masks[0] == previous_mask).all())
        new[start:stop] = ~same
        previous_mask, previous_sequence = masks[-1], sequences[-1]
    return new


def _batch_spans(group: CopyGroup, batching: Batching) -> list[tuple[int, int]]:
    """Copy ranges of at most ``rows_for(length)`` copies and, with a ``batch_size``, of
    at most that many sequences."""
    rows = batching.rows_for(group.length)
    if batching.batch_size:
        block = group.copy_sequence // batching.batch_size
        edges = np.flatnonzero(np.diff(block)) + 1
        bounds = [0, *edges.tolist(), group.n_copies]
    else:
        bounds = [0, group.n_copies]
    return [
        (first, min(first + rows, stop))
        for start, stop in itertools.pairwise(bounds)
        for first in range(start, stop, rows)
    ]
