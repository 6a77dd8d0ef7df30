"""The batched engine: run planned batches through the model and score their targets.

Each batch (see :mod:`pll_harness.planning`) holds masked copies of one length, so it goes
to the encoder without padding and without an attention mask.  The MLM head, and where
the architecture allows the encoder's last layer (:mod:`pll_harness.heads`), run at the
target positions only; log-softmax runs in float32 whatever the model's dtype.  Results
stay on the device until the run ends, and on CUDA their copy to the host queues behind
its last batch: nothing waits for a batch to finish before the next is sent (the host
plans the next group meanwhile, see :meth:`PLLRunner.run_planned`), nor for one part of a
run before the next (:meth:`PLLRunner.launch`), and progress is read from CUDA events.
Other accelerators copy the results back at once, so their parts run one after another.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pll_harness.allocator import release_free_memory, reuse_freed_blocks
from pll_harness.busy_cpu import BusyCPUWatch
from pll_harness.heads import MaskedLMParts
from pll_harness.metrics import Metric
from pll_harness.planning import Batch, CopyGroup, Work

logger = logging.getLogger(f"lm_eval.{__name__}")

HEAD_CHUNK_ELEMENTS = {"cpu": 1 << 20, "default": 1 << 26}
"""Upper bound on logits per chunk (rows x vocab).  A run holds one chunk's float32 logits,
overwritten in computing the targets' log-probabilities (:func:`target_logprobs`): 4 MB on
the CPU (4 MB chunks of a 4000-word vocabulary ran faster than 2 and 8 MB ones,
bench/README.md), 256 MB on accelerators; logits in bfloat16 or float16 take a float32
buffer besides for their log-softmax."""

HEAD_MIN_ROWS = 32
"""Fewest rows per chunk, whatever the vocabulary: each chunk reads the projection's whole
weight, so with a large vocabulary small chunks are bound by that read.  On the CPU, head
time per target at 768 dimensions (``bench/head_chunks.py``): with 250,002 words (XLM-R)
34 ms in chunks of 4 rows (what HEAD_CHUNK_ELEMENTS alone allows) against 6-8 ms in
chunks of 32-42; with 50,265 (RoBERTa) 2.0-2.2 ms in chunks of 20 against 1.3-1.7.  The
buffer grows accordingly: 32 MB at 250,002 words in float32."""

BATCHES_IN_FLIGHT = 8
"""How many batches the host may send ahead of a GPU: enough to keep it busy while the
next inputs are built, few enough that their pinned input buffers stay small."""


def attention_kernels(device: torch.device) -> contextlib.AbstractContextManager:
    """The scaled-dot-product attention kernels a run may use: on CUDA the
    memory-efficient one, with the plain math as the fallback for shapes it does not take.

    On an H100 (torch 2.11, bf16, random-weight bert-base), ``runner.run`` over all of
    BLiMP, the same planned batches in one process, first and second run: memory-efficient
    8.37 and 8.41 s, eager attention 9.47 and 9.47, cuDNN 10.83 and 9.21 (it builds a graph
    for each new input shape, and every length and batch size of a run is one), flash
    10.12-11.22 (tiles of 128 queries for sequences of about 12 tokens); SDPA's own choice
    was cuDNN's kernel, which also fails from 65,536 rows on (pytorch#181235;
    bench/README.md).  torch before 2.3 has no way to choose, and no cuDNN kernel by
    default."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


@dataclass(frozen=True)
class TargetScores:
    """Per-slot log-probabilities (float32, NaN where not scored) and argmax flags."""

    logprobs: torch.Tensor
    greedy: torch.Tensor


class PLLRunner:
    """Scores planned batches with one model."""

    def __init__(
        self,
        parts: MaskedLMParts,
        mask_token_id: int,
        device: torch.device | str,
        vocab_size: int,
    ) -> None:
        self.parts = parts
        self.vocab_size = vocab_size
        self.mask_token_id = mask_token_id
        self.device = torch.device(device)
        self.cpu = self.device.type == "cpu"
        self.token_cap: int | None = None
        """Most tokens one forward pass may take, once one has run out of device memory:
        every later batch, of this run and of later ones, is cut to fit (see
        :meth:`_score_within_memory`)."""
        self.busy_cpu = BusyCPUWatch() if self.cpu else None
        """Whether other work takes the cores under the scoring (once per process)."""
        if self.cpu:
            reuse_freed_blocks()

    def run(
        self,
        work: Work,
        batches: Sequence[Batch] | None = None,
        on_batch_done: Callable[[int], None] | None = None,
    ) -> TargetScores:
        """Score the targets of ``batches`` (default: all of ``work``'s); slots of targets in
        no given batch stay NaN, so partial results can be pooled and a target that nobody
        scored cannot pass for a number.  ``on_batch_done(k)`` fires when the k-th batch has
        finished on the device."""
        return self.run_planned(work.metric, work.n_slots, work.planned(batches), on_batch_done)

    def run_planned(
        self,
        metric: Metric,
        n_slots: int,
        batches: Iterable[tuple[CopyGroup, Batch]],
        on_batch_done: Callable[[int], None] | None = None,
    ) -> TargetScores:
        """:meth:`run` over batches that may still be being planned: each is taken from
        ``batches`` only once the one before has been sent (see
        :class:`pll_harness.planning.WorkPlanner`)."""
        in_flight = InFlight(self.device)
        pending = self.launch(metric, n_slots, batches, in_flight, on_batch_done)
        in_flight.finish()
        return pending.wait()

    @torch.inference_mode()
    def launch(
        self,
        metric: Metric,
        n_slots: int,
        batches: Iterable[tuple[CopyGroup, Batch]],
        in_flight: InFlight,
        on_batch_done: Callable[[int], None] | None = None,
    ) -> PendingScores:
        """:meth:`run_planned` without waiting for the end of the run: on CUDA it returns
        once the last batch, and the copy of the results to the host behind it, are queued.
        A run in parts launches one part after another into the same ``in_flight``, so the
        device goes from one part to the next without draining its queue in between, and
        at most BATCHES_IN_FLIGHT batches are queued across the parts' ends.

        On the CPU, the memory that the batches of one length leave free is given back
        when the length changes and when the run ends (see :mod:`pll_harness.allocator`)."""
        scores = TargetScores(
            torch.full((n_slots,), torch.nan, device=self.device),
            torch.zeros(n_slots, dtype=torch.bool, device=self.device),
        )
        buffers = _ChunkBuffers()
        length = None
        if self.busy_cpu is not None:
            self.busy_cpu.resume()
        try:
            with attention_kernels(self.device):
                for position, (group, batch) in enumerate(batches):
                    previous, length = length, group.length
                    if self.cpu and length != previous:
                        release_free_memory()
                    self._score_within_memory(metric, group, batch, scores, buffers)
                    in_flight.launched(position, on_batch_done)
                    if self.busy_cpu is not None:
                        self.busy_cpu.check()
            return self._copied_back(scores)
        finally:
            del buffers  # so that the release below returns them too
            if self.cpu:
                release_free_memory()

    def _copied_back(self, scores: TargetScores) -> PendingScores:
        """Queue the copy of ``scores`` to the host behind the batches: into pinned memory
        on CUDA, where a copy to pageable memory would wait for the device; elsewhere the
        copy is made at once."""
        if self.device.type != "cuda":
            return PendingScores(TargetScores(scores.logprobs.cpu(), scores.greedy.cpu()))
        host = TargetScores(
            torch.empty(scores.logprobs.shape, dtype=scores.logprobs.dtype, pin_memory=True),
            torch.empty(scores.greedy.shape, dtype=torch.bool, pin_memory=True),
        )
        host.logprobs.copy_(scores.logprobs, non_blocking=True)
        host.greedy.copy_(scores.greedy, non_blocking=True)
        device = scores.logprobs.device  # with its index, even where self.device has none
        copied = torch.cuda.Event(blocking=True)
        copied.record(torch.cuda.current_stream(device))

        def arrived() -> None:
            # On this device: in a thread of its own the current device is the first GPU,
            # on which the wait would otherwise open a CUDA context (half a GB on an H100).
            with torch.cuda.device(device):
                copied.synchronize()

        return PendingScores(host, arrived)

    def _score_within_memory(
        self,
        metric: Metric,
        group: CopyGroup,
        batch: Batch,
        scores: TargetScores,
        buffers: _ChunkBuffers,
    ) -> None:
        """Score ``batch`` in parts of at most ``token_cap`` tokens.  A part that runs out
        of device memory is halved and tried again, and the cap falls to half of it for the
        rest of the runner's life: the token budget is an estimate
        (:func:`pll_harness.scorer.default_batch_tokens`), and other processes can take
        memory after it was measured.  A single copy that does not fit is an error.

        Cut batches round differently from the planned ones (float rounding only), so a
        run that had to cut is no longer bit-identical to one that did not, across
        data-parallel processes included."""
        length = group.length
        parts = deque(self._cut(batch, length))
        while parts:
            part = parts.popleft()
            copies = part.stop - part.first
            pieces = self._cut(part, length)
            if len(pieces) > 1:  # cut under a larger cap, before a later part ran out of memory
                parts.extendleft(reversed(pieces))
                continue
            try:
                self._score_batch(metric, group, part, scores, buffers)
                continue
            except torch.cuda.OutOfMemoryError:  # this name from torch 1.13 on, as the pins allow
                if copies == 1:
                    raise
            # Past the handler, the error and the failed part's tensors are freed; results
            # are written only once a whole part is through, so it left nothing behind.
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self.token_cap = copies // 2 * length
            logger.warning(
                "A batch of %d copies x %d tokens ran out of memory on %s; scoring on in "
                "batches of at most %d tokens (set max_batch_tokens to choose the size).",
                copies,
                length,
                self.device,
                self.token_cap,
            )
            parts.extendleft(reversed(self._cut(part, length)))

    def _cut(self, batch: Batch, length: int) -> list[Batch]:
        """``batch`` in as few parts of near-equal copies as ``token_cap`` allows."""
        copies = batch.stop - batch.first
        if self.token_cap is None or copies * length <= self.token_cap:
            return [batch]
        pieces = -(-copies // max(1, self.token_cap // length))
        bounds = [batch.first + copies * k // pieces for k in range(pieces + 1)]
        return [Batch(batch.group, a, b) for a, b in itertools.pairwise(bounds)]

    def _score_batch(
        self,
        metric: Metric,
        group: CopyGroup,
        batch: Batch,
        scores: TargetScores,
        buffers: _ChunkBuffers,
    ) -> None:
        """Score ``batch`` into ``scores``' slots, on the device (nothing waits for it)."""
        inputs = group.inputs(metric, batch.first, batch.stop, self.mask_token_id)
        index = np.stack([inputs.rows, inputs.positions, inputs.tokens, inputs.slots])
        input_ids = self._to_device(inputs.input_ids)
        rows, positions, tokens, slots = self._to_device(index)
        hidden = self.parts.states(input_ids, rows, positions)
        lp, top = self._head_scores(hidden, tokens, buffers)
        scores.logprobs[slots] = lp
        scores.greedy[slots] = top

    def _to_device(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))
        if self.device.type == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def _head_scores(
        self, target_hidden: torch.Tensor, target_tokens: torch.Tensor, buffers: _ChunkBuffers
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Head, float32 log-probability of the target and whether it is the argmax, in row
        chunks so that large vocabularies stay within HEAD_CHUNK_ELEMENTS (but no fewer than
        HEAD_MIN_ROWS rows a chunk)."""
        budget = HEAD_CHUNK_ELEMENTS.get(target_hidden.device.type, HEAD_CHUNK_ELEMENTS["default"])
        chunk = max(HEAD_MIN_ROWS, budget // self.vocab_size)
        n_rows = target_hidden.shape[0]
        logprobs = torch.empty(n_rows, device=target_hidden.device)
        greedy = torch.empty(n_rows, dtype=torch.bool, device=target_hidden.device)
        for start in range(0, n_rows, chunk):
            stop = min(start + chunk, n_rows)
            rows = target_hidden[start:stop]
            out = buffers.take("logits", rows, self.vocab_size) if self.parts.split else None
            logits = self.parts.head(rows, out)
            picked, top = target_logprobs(logits, target_tokens[start:stop, None], buffers)
            logprobs[start:stop] = picked
            greedy[start:stop] = top
        return logprobs, greedy


def target_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, buffers: _ChunkBuffers
) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 log-probability of each row's target (``targets`` [rows, 1]) and whether
    its logit is the row's largest (an exact tie counts), compared on the logits in every
    way so that a device or dtype cannot turn a near-tie into a tie; ``logits``, which
    nothing reads afterwards, are overwritten when float32.

    For a small model these passes over the vocabulary are most of the time
    (bench/README.md).  Float32 logits on the CPU take ``x_t - m - log(sum(exp(x - m)))``,
    ``m`` the row's maximum, which the greedy flag needs anyway, the subtraction and the
    exponential in place: 375 us a chunk of 262 x 4,000 logits against 441 for torch's
    log-softmax and its maximum (2 threads).  Elsewhere, where bfloat16 or float16 logits
    would need a float32 copy for the subtraction and a device's launches cost more than
    its passes, the log-softmax is written in float32 (over float32 logits, after their
    maximum and the target's logit are read)."""
    top = logits.amax(-1, keepdim=True)
    own = logits.gather(1, targets)
    greedy = (own >= top).squeeze(1)
    if logits.device.type == "cpu" and logits.dtype == torch.float32:
        total = logits.sub_(top).exp_().sum(-1)
        return (own - top).squeeze(1) - total.log_(), greedy
    lsm = torch.log_softmax(logits, -1, dtype=torch.float32, out=_float32_out(logits, buffers))
    return lsm.gather(1, targets).squeeze(1), greedy


def _float32_out(logits: torch.Tensor, buffers: _ChunkBuffers) -> torch.Tensor:
    """Where the float32 log-softmax of ``logits`` goes: over float32 logits themselves,
    which nothing reads afterwards, so a chunk needs one buffer rather than two (bench/README.md);
    else into a float32 buffer."""
    if logits.dtype == torch.float32:
        return logits
    return buffers.take("logprobs", logits, logits.shape[1], torch.float32)


class _ChunkBuffers:
    """The head's logits (and their float32 log-softmax where the logits are not float32),
    kept for the whole run and reused by every chunk.

    For a small model the head's passes over the vocabulary are much of the work, and
    fresh tensors for every chunk cost more than its arithmetic when each large block was
    a new mapping; with the heap reuse of :mod:`pll_harness.allocator` they still made
    all of BLiMP on the nano model 38% slower (bench/README.md).  A buffer grows to the
    largest chunk asked for and is freed with the run.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def take(
        self, name: str, like: torch.Tensor, width: int, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """A ``[rows of like x width]`` view of buffer ``name``, in ``dtype`` (default:
        ``like``'s) on ``like``'s device."""
        rows, dtype = like.shape[0], dtype or like.dtype
        buffer = self._buffers.get(name)
        if (
            buffer is None
            or buffer.shape[0] < rows
            or buffer.shape[1] != width
            or buffer.dtype != dtype
        ):
            buffer = torch.empty(rows, width, dtype=dtype, device=like.device)
            self._buffers[name] = buffer
        return buffer[:rows]


class PendingScores:
    """A run's results on their way to the host (see :meth:`PLLRunner.launch`):
    :meth:`wait` returns them once there, and may be called from any thread (a run in
    parts assembles one part while the device runs the next)."""

    def __init__(self, scores: TargetScores, arrived: Callable[[], Any] | None = None) -> None:
        self._scores, self._arrived = scores, arrived

    def wait(self) -> TargetScores:
        if self._arrived is not None:
            self._arrived()
        return self._scores


class InFlight:
    """The batches sent to the device and not yet reported finished, for one scoring call
    (all of its parts), and only the thread that launches them uses it.  On CUDA a batch
    is finished when its event has passed, which the host checks without waiting; it
    waits only when more than BATCHES_IN_FLIGHT are queued, asleep rather than spinning
    (blocking events), so that the threads preparing and assembling parts have the
    cores.  Elsewhere work is synchronous and a batch is reported when it returns."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.pending: deque[tuple[torch.cuda.Event, int, Callable[[int], None] | None]] = deque()

    def launched(self, position: int, callback: Callable[[int], None] | None) -> None:
        """Batch ``position`` of a run is queued; ``callback(position)`` once it is done."""
        if not self.cuda:
            if callback is not None:
                callback(position)
            return
        event = torch.cuda.Event(blocking=True)
        event.record(torch.cuda.current_stream(self.device))
        self.pending.append((event, position, callback))
        while self.pending and (
            self.pending[0][0].query() or len(self.pending) > BATCHES_IN_FLIGHT
        ):
            self._settle()

    def finish(self) -> None:
        """Wait for every batch launched, reporting each."""
        while self.pending:
            self._settle()

    def _settle(self) -> None:
        event, position, callback = self.pending.popleft()
        event.synchronize()
        if callback is not None:
            callback(position)
