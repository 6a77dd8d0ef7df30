"""Time the engine's host steps with Python's cyclic collector paused, as the scorer runs
them, and left running.

    python bench/host_steps.py                    # all of BLiMP on the nano model
    python bench/host_steps.py --repeats 5

The steps are those of ``PLLScorer.score``, each over all requests at once rather than
part by part (:mod:`pll_harness.parts`): tokenize (``distinct_jobs``), plan
(``plan_work``) and assemble; the model runs once, untimed, for the results that
assembling needs.  The two ways alternate in one process, ``--repeats`` times each, and
the table gives every time and the best.  "Running" ignores the scorer's pause requests
(:mod:`pll_harness.collector`).  Writes ``bench/results/host-steps-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pll_bench

import pll_harness.collector as collector
from pll_harness import PLLScorer


class _Running:
    """Stands in for the gc module inside pll_harness.collector: pausing does nothing."""

    isenabled = staticmethod(gc.isenabled)
    enable = staticmethod(gc.enable)

    @staticmethod
    def disable() -> None:
        pass


def seconds(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(pll_bench.ARCHITECTURES), default="nano")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-batch-tokens", type=int, default=65536)
    parser.add_argument("--data", type=Path, default=pll_bench.PACKAGED_DATA / "blimp")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args()
    args.model, args.shared = None, pll_bench.REPO_ROOT.parent / "shared"
    model, description = pll_bench.resolve_model(args)
    texts = pll_bench.blimp_sentences(args.data)
    requests = [("", text) for text in texts]
    scorer = PLLScorer.from_pretrained(
        str(model), pll_metric="word_l2r", max_batch_tokens=args.max_batch_tokens
    )
    _, jobs = scorer.distinct_jobs(requests)
    work = scorer.plan_work(jobs.encodings)
    results = scorer.runner.run(work)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for way, stand_in in (("paused", gc), ("running", _Running)):
            collector.gc = stand_in
            try:
                for step, call in (
                    ("tokenize", lambda: scorer.distinct_jobs(requests)),
                    ("plan", lambda: scorer.plan_work(jobs.encodings)),
                    ("assemble", lambda: scorer.assemble(jobs, work, results)),
                ):
                    times.setdefault((step, way), []).append(seconds(call))
            finally:
                collector.gc = gc
    lines = [
        f"# Host steps with the collector paused and running, {description}",
        "",
        f"`{' '.join(['python bench/host_steps.py', *sys.argv[1:]])}`: all {len(texts)} BLiMP "
        f"sentences, `word_l2r`, {args.repeats} alternating runs of each way in one process.",
        "",
        "| step | collector | seconds | best |",
        "| --- | --- | --- | ---: |",
    ]
    for (step, way), runs in times.items():
        listed = ", ".join(f"{run:.2f}" for run in runs)
        lines.append(f"| {step} | {way} | {listed} | {min(runs):.2f} |")
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "host-steps", lines)


if __name__ == "__main__":
    main()
