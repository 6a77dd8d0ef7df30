"""How evenly data-parallel processes share a run's batches, by three ways of dealing them.

    python bench/dealing.py                          # all of BLiMP, an H100's token budget
    python bench/dealing.py --max-batch-tokens 65536

Plans all of BLiMP part by part as a GPU run does (:mod:`pll_harness.parts`) and deals the
batches to N processes: all at once, costliest first (what data-parallel runs did before
they planned part by part); each part as it is planned, costliest first, the loads
carried over (:class:`pll_harness.distributed.CostDealer`, what they do now); and each
batch as it is planned, to the least loaded process.  A run lasts as long as its most
loaded process, so the table gives that process's tokens over an even share: 1.000 is a
perfect split.  Nothing runs; no device is needed.  Writes
``bench/results/dealing-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections.abc import Callable
from pathlib import Path

import pll_bench
from parts_overlap import blimp_as_on_a_gpu

from pll_harness.distributed import CostDealer


def all_at_once(parts: list[list[int]], n: int) -> list[int]:
    costs = [cost for part in parts for cost in part]
    owners = CostDealer(n).deal(costs)
    return [sum(c for c, o in zip(costs, owners, strict=True) if o == p) for p in range(n)]


def part_by_part(parts: list[list[int]], n: int) -> list[int]:
    dealer, loads = CostDealer(n), [0] * n
    for costs in parts:
        for cost, owner in zip(costs, dealer.deal(costs), strict=True):
            loads[owner] += cost
    return loads


def batch_by_batch(parts: list[list[int]], n: int) -> list[int]:
    heap, loads = [(0, p) for p in range(n)], [0] * n
    for cost in (cost for part in parts for cost in part):
        load, process = heapq.heappop(heap)
        loads[process] += cost
        heapq.heappush(heap, (load + cost, process))
    return loads


WAYS: dict[str, Callable[[list[list[int]], int], list[int]]] = {
    "all parts at once, costliest first": all_at_once,
    "each part once planned, costliest first (now)": part_by_part,
    "each batch once planned": batch_by_batch,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-batch-tokens", type=int, default=174_762 * 6)
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--data", type=Path, default=pll_bench.PACKAGED_DATA / "blimp")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args()
    description, texts, _, works = blimp_as_on_a_gpu(args.data, args.max_batch_tokens)
    parts = [[work.cost(batch) for batch in work.batches] for work in works]
    total = sum(map(sum, parts))
    lines = [
        f"# Dealing a run's batches to data-parallel processes, {description}",
        "",
        f"`{' '.join(['python bench/dealing.py', *sys.argv[1:]])}`: all {len(texts)} BLiMP "
        f"sentences, `word_l2r`, {len(parts)} parts, {sum(map(len, parts))} batches, "
        f"{total} tokens. The most loaded process's tokens over an even share:",
        "",
        "| way | " + " | ".join(f"{n} processes" for n in args.processes) + " |",
        "| --- |" + " ---: |" * len(args.processes),
    ]
    for way, deal in WAYS.items():
        cells = [f"{max(deal(parts, n)) / (total / n):.3f}" for n in args.processes]
        lines.append(f"| {way} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "dealing", lines)


if __name__ == "__main__":
    main()
