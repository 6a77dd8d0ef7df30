"""Data parallelism over processes (``accelerate launch``, ``torchrun``), balanced by cost.

lm-eval's evaluator gives each process an equal *count* of requests, but a PLL request
costs one forward pass per scored token, so counts are a poor proxy for time.  Each
process therefore tokenizes only its own requests, the processes pool the tokens (small
flat arrays), every process plans the batches one process would run on all of them, part
by part (array operations, cheap next to tokenizing), deals each part's batches out by
cost as soon as it is planned (the same split on every process, so no coordinator is
needed), scores its batches, and the results are pooled again; each process then
assembles the answers to its own requests.  Because every batch is the one a single
process would have run (batches depend on the content of the requests, never on their
order), the scores equal a single-process run's exactly.

A process whose own step fails (tokenizing, planning, scoring, assembling, writing its
token log) still takes part in the exchange the others wait in next, with its error in
place of its share, so that every process stops with it; a last exchange after the
token log gives every step a next exchange.
"""

from __future__ import annotations

import atexit
import heapq
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from tqdm import tqdm

from pll_harness.encoding import Encodings
from pll_harness.parts import request_digests
from pll_harness.planning import Batch, Batching, Work
from pll_harness.runner import InFlight, PendingScores, TargetScores

if TYPE_CHECKING:
    from pll_harness.scorer import PLLScorer, SentenceScore

logger = logging.getLogger(f"lm_eval.{__name__}")


class CostDealer:
    """Deals a run's batches to processes by cost, part after part, the same way on every
    process (no coordinator is needed).

    Within a part, longest-processing-time-first: the costliest remaining batch goes to the
    least loaded process, ties broken by batch and process index; the loads carry over from
    the parts before.  A part's batches are dealt once it is planned, so a process starts
    its first part's batches before the later parts are planned.  On all of BLiMP at an
    H100's token budget (135 batches), the most loaded of 8 processes gets 1.1% more than
    an even share, against 0.0% when all parts' batches are dealt at once and 8.8% when
    each batch is dealt as it is planned (``bench/dealing.py``)."""

    def __init__(self, n_processes: int) -> None:
        if n_processes < 1:
            raise ValueError(f"n_processes must be at least 1, got {n_processes}")
        self._loads = [(0, process) for process in range(n_processes)]
        """A heap of (load, process)."""

    def deal(self, costs: Sequence[int]) -> list[int]:
        """The process of each batch of the next part, given their ``costs``."""
        owner = [0] * len(costs)
        for index in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
            load, process = heapq.heappop(self._loads)
            owner[index] = process
            heapq.heappush(self._loads, (load + costs[index], process))
        return owner


class ProcessGroup:
    """The few collective operations lm-eval and the scorer need, over torch.distributed.

    Works under ``accelerate launch`` (GPUs, NCCL) and ``torchrun`` (CPUs, gloo; accelerate
    itself reports a CPU group started by torchrun as not distributed), so it reads rank and
    size from torch.distributed rather than from accelerate.
    """

    def __init__(self) -> None:
        import torch.distributed as dist

        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo")
            if not cuda:
                atexit.register(_destroy_process_group)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.device = (
            torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        )

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Concatenate every rank's tensor (0-d tensors become one entry each)."""
        flat = tensor.reshape(1) if tensor.dim() == 0 else tensor
        parts = [torch.empty_like(flat) for _ in range(self.world_size)]
        torch.distributed.all_gather(parts, flat)
        return torch.cat(parts)

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, obj)
        return gathered

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        result = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj=obj, object_gather_list=result, dst=dst)
        return result

    def barrier(self) -> None:
        torch.distributed.barrier()


GLOO_SETTLE_SECONDS = 0.25
"""How long the exit handler leaves the GIL free for gloo's worker threads (see
:func:`_destroy_process_group`)."""


def _destroy_process_group() -> None:
    """At exit, the gloo group this package started, and a pause that lets gloo's worker
    threads finish with the last collective.

    A worker thread releases a finished collective's work after the caller has its result,
    and the work's tensors need the GIL to go.  In a process that exits right after its last
    collective (a rank with nothing left to score), the thread could still be waiting for
    the GIL when the interpreter began to finalize; it then ended in the middle of C++
    code and aborted the process (SIGABRT, "terminate called without an active
    exception", a core dump showed ``~AsyncGatherWork`` in ``ProcessGroupGloo::runLoop``;
    pytorch PR 179291), and torchrun failed the whole run: 1 in 20 runs of
    test_two_processes_with_a_cache_that_answers_one_of_them.  Destroying the group
    (local for gloo) does not wait for those threads; sleeping with the GIL released
    does.  An NCCL group is left as it was: its shutdown is unmeasured here."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    time.sleep(GLOO_SETTLE_SECONDS)


class ProcessFailed(RuntimeError):
    """Another process stopped with an error; raised on this one so that it stops too."""


def share_failure(group: ProcessGroup, error: BaseException) -> None:
    """This process's half of the exchange the others wait in, sent when its own step
    failed: they stop with ``error``'s message (:func:`checked`) instead of waiting for
    its share, until the backend's timeout (NCCL across nodes) or for ever.  The caller
    then raises ``error`` itself, also when the exchange fails (the group itself broke: a
    lost peer, a CUDA error), so that the first error is the one reported.  An error whose
    message cannot be made is sent by its type: the exchange must happen."""
    stopped = f"Process {group.rank} stopped: {type(error).__name__}"
    with suppress(Exception):
        stopped += f": {error}"
    try:
        group.all_gather_object(ProcessFailed(stopped))
    except Exception as own:
        logger.warning("Process %d could not tell the others it stopped: %s", group.rank, own)


@contextmanager
def failing_together(group: ProcessGroup | None) -> Iterator[None]:
    """Steps between exchanges: a failure in them is sent once, in the exchange the others
    wait in next.  A failure another process sent (:class:`ProcessFailed`) is known to all
    already.  Without a group (one process) there is nobody to tell."""
    try:
        yield
    except ProcessFailed:
        raise
    except Exception as error:
        if group is not None:
            share_failure(group, error)
        raise


def checked(parts: list[Any]) -> list[Any]:
    """The parts of an exchange, or the first failure one of them reports."""
    for part in parts:
        if isinstance(part, ProcessFailed):
            raise part
    return parts


def launched_with_several_processes() -> bool:
    """True under ``accelerate launch``/``torchrun`` with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def scored_slots(partial: Sequence[TargetScores]) -> list[tuple[torch.Tensor, ...]]:
    """What a process sends of its results (:func:`pool_target_scores`): for each work, the
    slots it holds a number for (int32 where they fit) and their log-probabilities and
    argmax flags.  A NaN the model itself produced is not sent either, so it stays NaN on
    every process and assembling reports it, as one process's run would."""
    sent = []
    for scores in partial:
        index = torch.int32 if scores.logprobs.shape[0] < 1 << 31 else torch.int64
        slots = torch.nonzero(~torch.isnan(scores.logprobs)).flatten().to(index)
        sent.append((slots, scores.logprobs[slots], scores.greedy[slots]))
    return sent


def pool_target_scores(partial: Sequence[TargetScores], group: ProcessGroup) -> list[TargetScores]:
    """Give every process all scores, when each scored some batches of the same works (one
    :class:`TargetScores` per work, in one exchange).

    Unscored slots are NaN (see ``PLLRunner.run``).  Each process sends only the slots it
    scored and their results (:func:`scored_slots`), a message that shrinks with the
    number of processes, and each writes every process's into place by index: every slot
    once, where sending whole NaN-padded arrays made every process read every other's
    whole array after the last batch.
    """
    pooled = [TargetScores(scores.logprobs.clone(), scores.greedy.clone()) for scores in partial]
    for sent in checked(group.all_gather_object(scored_slots(partial))):
        for scores, (slots, logprobs, greedy) in zip(pooled, sent, strict=True):
            scores.logprobs[slots] = logprobs
            scores.greedy[slots] = greedy
    return pooled


class DealtPart(NamedTuple):
    """One part of a shared run, planned on everyone's requests and dealt: this process's
    ``own`` batches of ``work``, and ``first``, the index of its first request among the
    part's pooled requests."""

    work: Work
    own: list[Batch]
    first: int


def dealt_parts(
    scorer: PLLScorer, shares: list[tuple[Encodings, tuple[int, ...]]], group: ProcessGroup
) -> Iterator[DealtPart]:
    """Each part of a shared run in turn, planned on every process's ``shares`` (their
    tokens and where each part starts in them) and dealt (:class:`CostDealer`)."""
    dealer = CostDealer(group.world_size)
    for part in range(len(shares[0][1]) - 1):
        pooled = [
            encodings.select(np.arange(*bounds[part : part + 2])) for encodings, bounds in shares
        ]
        work = scorer.plan_work(Encodings.concatenate(pooled))
        costs = [work.cost(batch) for batch in work.batches]
        owners = dealer.deal(costs)
        own = [
            batch for batch, owner in zip(work.batches, owners, strict=True) if owner == group.rank
        ]
        yield DealtPart(work, own, sum(len(share) for share in pooled[: group.rank]))


def score_shared(
    scorer: PLLScorer,
    requests: Sequence[tuple[str, str]],
    group: ProcessGroup,
    description: str = "Scoring",
    disable_tqdm: bool = False,
    then: Callable[[list[SentenceScore]], None] | None = None,
) -> list[SentenceScore]:
    """Score this process's ``requests`` as its share of one run over every process's
    requests (see the module docstring); every process must call this together.

    A run that one process would split into parts (:mod:`pll_harness.parts`), judged by
    every process's requests together, is pooled and planned part by part as that process
    plans it, and each part's batches are launched once it is planned and dealt: on a GPU
    the next part is planned while the device runs the batches queued before.  Planning
    the later parts in a thread instead did not shorten a stand-in device's wait for rank
    0 of 4 or of 8 (``bench/parts_overlap.py --processes``; bench/README.md): the thread
    only competed for the GIL.  The progress bar counts rank 0's batches of the parts
    dealt so far, so its total grows until the last part is dealt.

    ``then`` runs on this process's scores before the last exchange (the token log), so
    that its failure stops the others too rather than leaving them in lm-eval's next
    collective."""
    from pll_harness.scorer import Jobs

    with failing_together(group):
        started = time.perf_counter()
        requests = list(requests)
        keys, jobs = scorer.distinct_jobs(requests, parts=True)
        tokenized = time.perf_counter()
        digests = np.unique(request_digests(requests))
        gathered = checked(group.all_gather_object((jobs.encodings, jobs.bounds, digests)))
        exchanged = time.perf_counter()
        # split as one process given every process's requests would: on the number of
        # distinct ones (PLLScorer.splits), whatever lm-eval padded the shares with
        split = scorer.splits(np.unique(np.concatenate([d for _, _, d in gathered])).shape[0])
        if not split:
            jobs = Jobs(jobs.texts, jobs.encodings)
        shares = [
            (encodings, bounds if split else (0, len(encodings)))
            for encodings, bounds, _ in gathered
        ]
        with tqdm(
            total=0,
            desc=f"{description} (rank 0's batches)",
            unit="batch",
            disable=disable_tqdm or group.rank != 0,
        ) as bar:
            # the parts queue back to back on the device (PLLRunner.launch)
            in_flight = InFlight(scorer.runner.device)
            launched: list[tuple[DealtPart, PendingScores]] = []
            for part in dealt_parts(scorer, shares, group):
                bar.total += len(part.own)
                runs = part.work.planned(part.own)
                on_done = lambda _: bar.update()  # noqa: E731
                pending = scorer.runner.launch(
                    part.work.metric, part.work.n_slots, runs, in_flight, on_done
                )
                launched.append((part, pending))
            in_flight.finish()
            partial = [pending.wait() for _, pending in launched]
        scored = time.perf_counter()
        pooled = pool_target_scores(partial, group)
        scores = [
            score
            for index, ((part, _), results) in enumerate(zip(launched, pooled, strict=True))
            for score in scorer.assemble(jobs.part(index), part.work, results, part.first)
        ]
        logger.info(
            "Rank %d scored %d of %d batches (cost %d of %d); it tokenized its %d distinct "
            "requests in %.2f s, pooled the tokens in %.2f s, planned and scored in %.2f s, "
            "pooled the scores and assembled in %.2f s.",
            group.rank,
            sum(len(part.own) for part, _ in launched),
            sum(len(part.work.batches) for part, _ in launched),
            sum(part.work.cost(batch) for part, _ in launched for batch in part.own),
            sum(part.work.cost(batch) for part, _ in launched for batch in part.work.batches),
            digests.shape[0],
            tokenized - started,
            exchanged - tokenized,
            scored - exchanged,
            time.perf_counter() - scored,
        )
        scorer.report_unscored(scores)
        mine_in_order = [scores[key] for key in keys]
        if then is not None:
            then(mine_in_order)
        checked(group.all_gather_object(None))
    return mine_in_order


def common_batching(batching: Batching, group: ProcessGroup) -> Batching:
    """The smallest token budget of all processes, for every process.

    Every process must pack the pooled requests into the same batches, but a budget derived
    from free GPU memory can differ by a few tokens from one device to the next.
    """
    budget = min(checked(group.all_gather_object(batching.max_batch_tokens)))
    return Batching(budget, batching.batch_size)
