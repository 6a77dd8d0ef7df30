"""How much host time is left on an accelerator's critical path, measured on a CPU with a
stand-in device: preparing the next part ahead (in a thread) against in turn, or rank 0's
share of a data-parallel run.

    python bench/parts_overlap.py                          # all of BLiMP, 8.4 s of device
    python bench/parts_overlap.py --device-seconds 4 --repeats 3
    python bench/parts_overlap.py --processes 8            # rank 0 of 8 data-parallel ones

The stand-in (:class:`StandInDevice`) keeps the host's own work of every batch (building
its masked copies) and runs the batches in a thread of its own that waits, GIL released,
``--device-seconds`` over all the tokens the run feeds the model, each batch its share
(8.4 s is what the H100 took for all of BLiMP in bf16 with bert-base shapes,
bench/README.md).  It writes log-probabilities of 0, so only the time means anything.
What a run takes beyond the device's seconds is host time that the device waited for:
tokenizing, planning and assembling that nothing overlapped.  The two ways alternate in
one process, ``--repeats`` times each.  With ``--processes N``, the run is rank 0's
share of a data-parallel one (``distributed.score_shared``) among N processes that the
stand-in exchange (:class:`StandInGroup`) plays: the others' tokens are made before the
timing, and their scores come back as zeros (the time the stand-in takes to make them is
left out); that run has one way, as ``score_shared`` prepares nothing ahead.  Writes
``parts-overlap-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pll_bench
import torch

from pll_harness import PLLScorer
from pll_harness.distributed import score_shared
from pll_harness.parts import PARTS_FROM, request_digests
from pll_harness.planning import Work
from pll_harness.runner import BATCHES_IN_FLIGHT, PendingScores, TargetScores


class StandInDevice:
    """A device that runs one batch after another in a thread of its own, each for its
    share of the device's seconds, while the host goes on: launching a batch waits only
    when BATCHES_IN_FLIGHT are queued, and a run's results reach the host once the device
    has passed its last batch, as the runner's do on CUDA (``pll_harness.runner``)."""

    def __init__(self, seconds_per_token: float) -> None:
        self.seconds_per_token = seconds_per_token
        self.busy = 0.0
        """Seconds of the batches sent since the last :meth:`reset`."""
        self.first: float | None = None
        """When the first of them was sent (``time.perf_counter()``)."""
        self.queue: queue.Queue[float | threading.Event] = queue.Queue(maxsize=BATCHES_IN_FLIGHT)
        threading.Thread(target=self._work, daemon=True, name="stand-in-device").start()

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if isinstance(item, threading.Event):
                item.set()  # a part's results, copied back behind its last batch
            else:
                time.sleep(item)
            self.queue.task_done()

    def install(self, scorer: PLLScorer) -> None:
        """Run ``scorer``'s batches here: the host still builds each batch's masked copies;
        the model's place is taken by the wait, and every log-probability is 0."""
        runner = scorer.runner

        def score_batch(metric, group, batch, scores, buffers) -> None:
            inputs = group.inputs(metric, batch.first, batch.stop, runner.mask_token_id)
            seconds = inputs.input_ids.size * self.seconds_per_token
            if self.first is None:
                self.first = time.perf_counter()
            self.busy += seconds
            self.queue.put(seconds)
            scores.logprobs[inputs.slots] = 0.0

        def copied_back(scores: TargetScores) -> PendingScores:
            arrived = threading.Event()
            self.queue.put(arrived)
            return PendingScores(scores, arrived.wait)

        runner._score_batch = score_batch
        runner._copied_back = copied_back

    def reset(self) -> None:
        self.busy, self.first = 0.0, None


class StandInGroup:
    """Rank 0 of ``n`` data-parallel processes, whose exchanges answer as the others would:
    their tokens, made from ``requests`` before the timing, then their scores (zeros for
    every target rank 0 did not score, dealt among them), then nothing.  The time it takes
    to make their scores is kept in :attr:`seconds`, for the caller to leave out."""

    rank = 0

    def __init__(self, scorer: PLLScorer, requests: list[tuple[str, str]], n: int) -> None:
        self.world_size = n
        self.device = scorer.runner.device
        self.mine = requests[::n]
        self.others = []
        for rank in range(1, n):
            share = requests[rank::n]
            _, jobs = scorer.distinct_jobs(share, parts=True)
            self.others.append((jobs.encodings, jobs.bounds, np.unique(request_digests(share))))
        _, jobs = scorer.distinct_jobs(requests, parts=True)
        self.slots = [
            int(jobs.part(k).encodings.n_targets.sum()) for k in range(len(jobs.bounds) - 1)
        ]
        """Each part's slots: the size of its results."""
        self.calls, self.seconds = 0, 0.0

    def all_gather_object(self, obj: object) -> list[object]:
        self.calls += 1
        if self.calls % 3 == 1:
            return [obj, *self.others]
        if self.calls % 3 == 2:
            start = time.perf_counter()
            others = self._scores(obj)
            self.seconds += time.perf_counter() - start
            return [obj, *others]
        return [obj] * self.world_size

    def _scores(self, sent: list[tuple[torch.Tensor, ...]]) -> list[list[tuple]]:
        """The other processes' exchange of scores, given rank 0's: whole NaN-padded arrays
        (revisions before 2026-11-26's second session), or the slots each scored."""
        n = self.world_size - 1
        if len(sent[0]) == 2:
            filled = [(torch.zeros_like(logprobs), greedy) for logprobs, greedy in sent]
            return [filled] * n
        others: list[list[tuple]] = [[] for _ in range(n)]
        for size, (slots, _, _) in zip(self.slots, sent, strict=True):
            left = np.setdiff1d(np.arange(size, dtype=np.int32), slots.numpy())
            for other, dealt in zip(others, np.array_split(left, n), strict=True):
                index = torch.from_numpy(dealt)
                other.append((index, torch.zeros(len(dealt)), torch.zeros(len(dealt), dtype=bool)))
        return others


def blimp_as_on_a_gpu(
    data: Path, max_batch_tokens: int
) -> tuple[str, list[str], PLLScorer, list[Work]]:
    """The nano model's description, every BLiMP sentence of ``data``, a ``word_l2r``
    scorer split into parts as on a GPU (``prepare_ahead`` left to the caller), and each
    part's plan."""
    args = argparse.Namespace(model=None, shared=pll_bench.REPO_ROOT.parent / "shared")
    args.arch = "nano"
    model, description = pll_bench.resolve_model(args)
    texts = pll_bench.blimp_sentences(data)
    scorer = PLLScorer.from_pretrained(
        str(model), pll_metric="word_l2r", max_batch_tokens=max_batch_tokens
    )
    scorer.parts_from = PARTS_FROM
    _, jobs = scorer.distinct_jobs([("", text) for text in texts])
    works = [scorer.plan_work(jobs.part(k).encodings) for k in range(len(jobs.bounds) - 1)]
    return description, texts, scorer, works


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-seconds", type=float, default=8.4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--max-batch-tokens", type=int, default=174_762 * 6)
    parser.add_argument("--data", type=Path, default=pll_bench.PACKAGED_DATA / "blimp")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args()
    description, texts, scorer, works = blimp_as_on_a_gpu(args.data, args.max_batch_tokens)
    tokens = sum(work.cost(batch) for work in works for batch in work.batches)
    device = StandInDevice(args.device_seconds / tokens)
    device.install(scorer)
    scorer.score(texts[:50])
    requests = [("", text) for text in texts]
    group = StandInGroup(scorer, requests, args.processes) if args.processes > 1 else None
    # score_shared plans and launches part after part whatever prepare_ahead says
    ways = ["in turn", "prepared ahead"] if group is None else ["shared, in turn"]
    runs: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
    for _ in range(args.repeats):
        for way, timed in runs.items():
            scorer.prepare_ahead = way == "prepared ahead"
            device.reset()
            stand_in = group.seconds if group is not None else 0.0
            start = time.perf_counter()
            if group is None:
                scorer.score(texts)
            else:
                score_shared(scorer, group.mine, group, disable_tqdm=True)
            seconds = time.perf_counter() - start
            if group is not None:
                seconds -= group.seconds - stand_in
            assert device.first is not None
            timed.append((seconds, device.first - start, seconds - device.busy))
            print(f"{way}: {seconds:.2f} s, of which the device was busy {device.busy:.2f}")
    share = "" if group is None else f", rank 0's share of {args.processes} processes'"
    lines = [
        f"# Host time on a device's critical path, a stand-in device, {description}",
        "",
        f"`{' '.join(['python bench/parts_overlap.py', *sys.argv[1:]])}`: all {len(texts)} "
        f"BLiMP sentences{share}, `word_l2r`, the {tokens} tokens of all fed to a stand-in "
        f"device that takes {args.device_seconds} s for them; {args.repeats} alternating "
        f"runs of each way in one process. The device was busy {device.busy:.2f} s a run.",
        "",
        "| way | seconds of the run | before the first batch | host time the device waited for |",
        "| --- | --- | --- | --- |",
    ]
    for way, timed in runs.items():
        columns = [", ".join(f"{run[k]:.2f}" for run in timed) for k in range(3)]
        lines.append(f"| {way} | {' | '.join(columns)} |")
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "parts-overlap", lines)


if __name__ == "__main__":
    main()
