r"""Which host steps of a GPU run hold the interpreter lock for long at a stretch, measured on
a CPU: while they run, a thread that sleeps a millisecond at a time records how late it
wakes, and where the steps were when it did.

    python bench/lock_stalls.py                       # all of BLiMP, bert-base's tokenizer
    python bench/lock_stalls.py --threshold-ms 5 --n 20000

On a GPU, ``score()`` launches the model's kernels from one thread while another prepares
the later parts (:mod:`pll_harness.parts`) and a third assembles the finished ones; a
launching thread kept from the lock lets the device run out of queued work (bench/README.md,
"Results on an H100 (2026-11-26, second session)").  Here the main thread runs each part's
host steps one after another, as the threads would: tokenize (``_jobs``), plan every group
while building each batch's inputs (what the launching thread does besides launching), and
assemble (with zero results; no model runs).  A late wake-up is a stretch in which the lock
was not released; it is attributed to the step then running, and placed at the innermost
lines of ``pll_harness`` (or this script) where the main thread was when the ticker woke.
Run it at two revisions to compare them.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pll_bench
import torch

from pll_harness import PLLScorer
from pll_harness.runner import TargetScores

TICK = 0.001
"""How long the ticker sleeps each time, in seconds."""


class Ticker:
    """A thread that sleeps TICK at a time and records each wake-up later than
    ``threshold`` seconds, with the step then running and where ``watched`` (a thread id)
    was."""

    def __init__(self, watched: int, threshold: float) -> None:
        self.watched, self.threshold = watched, threshold
        self.step = "before"
        self.stalls: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="lock-ticker", daemon=True)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _tick(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            time.sleep(TICK)
            late = time.perf_counter() - start - TICK
            if late > self.threshold:
                self.stalls.append((late, self.step, self._where()))

    def _where(self) -> str:
        frame = sys._current_frames().get(self.watched)
        lines = []
        while frame is not None and len(lines) < 3:
            name = frame.f_code.co_filename
            if "pll_harness" in name or name == __file__:
                lines.append(f"{Path(name).name}:{frame.f_lineno}")
            frame = frame.f_back
        return " < ".join(lines) or "elsewhere"


def host_steps(scorer: PLLScorer, texts: list[str], ticker: Ticker) -> float:
    """Each part's host steps in turn, labelling the ticker's stalls; the seconds they took."""
    start = time.perf_counter()
    requests = [("", text) for text in texts]
    kept: list[list[Any]] = []
    ticker.step = "split into parts"
    _, pairs, bounds = scorer._distinct(requests, True)
    for part, (first, stop) in enumerate(itertools.pairwise(bounds)):
        ticker.step = f"part {part}: tokenize"
        jobs = scorer._jobs(pairs[first:stop])
        ticker.step = f"part {part}: plan and build inputs"
        planner = scorer.planner(jobs.encodings)
        for group, batch in planner:
            group.inputs(scorer._metric, batch.first, batch.stop, scorer.runner.mask_token_id)
        work = planner.work()
        results = TargetScores(
            torch.zeros(work.n_slots), torch.zeros(work.n_slots, dtype=torch.bool)
        )
        ticker.step = f"part {part}: assemble"
        kept.append(scorer.assemble(jobs, work, results))  # as a run keeps them
    ticker.step = "after"
    return time.perf_counter() - start


def markdown(report: dict[str, Any]) -> str:
    by_step: dict[str, list[float]] = defaultdict(list)
    for late, step, _ in report["stalls"]:
        by_step[step].append(late)
    lines = [
        f"# Interpreter-lock stalls of the host steps: {report['machine']}",
        "",
        f"- {report['sentences']} sentences, {report['model']}; steps took "
        f"{report['seconds']:.2f} s; a stall: the ticker woke more than "
        f"{report['threshold_ms']:g} ms late",
        "",
        "| step | stalls | total s | longest ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    for step, lates in by_step.items():
        lines.append(f"| {step} | {len(lates)} | {sum(lates):.3f} | {1000 * max(lates):.0f} |")
    lines += [
        "",
        "Longest stalls:",
        "",
        "| ms | step | where the steps were |",
        "| ---: | --- | --- |",
    ]
    for late, step, where in sorted(report["stalls"], reverse=True)[:10]:
        lines.append(f"| {1000 * late:.0f} | {step} | `{where}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(pll_bench.ARCHITECTURES), default="bert-base")
    parser.add_argument("--n", type=int, help="a sample of this many sentences (default: all)")
    parser.add_argument("--threshold-ms", type=float, default=10.0)
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    bench_args = pll_bench.parse_args(["--arch", args.arch])
    model, description = pll_bench.resolve_model(bench_args)
    texts = pll_bench.benchmark_sentences(bench_args.data, args.n)
    scorer = PLLScorer.from_pretrained(str(model), pll_metric="word_l2r", device="cpu")
    with Ticker(threading.get_ident(), args.threshold_ms / 1000) as ticker:
        seconds = host_steps(scorer, texts, ticker)
    report = {
        "machine": pll_bench.machine_name("cpu"),
        "model": description,
        "sentences": len(texts),
        "seconds": seconds,
        "threshold_ms": args.threshold_ms,
        "stalls": ticker.stalls,
    }
    text = markdown(report)
    print(text)
    pll_bench.write_lines(args.out_dir, "lock-stalls", [text.rstrip("\n")])


if __name__ == "__main__":
    main()
