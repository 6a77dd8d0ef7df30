"""Time the MLM head per target row for vocabulary sizes and chunk row counts.

    python bench/head_chunks.py

Each chunk does what the runner does with it for a float32 model (``pll_harness.runner``):
the projection into a logits buffer (``addmm(out=)``), the log-softmax written over that
buffer, and its row maximum.  Every chunk reads the projection's whole ``vocab x width``
weight, so with a large vocabulary a chunk of few rows is bound by that read: the table
shows the time per row falling as chunks grow, which is what ``HEAD_MIN_ROWS`` rests on.
"""

from __future__ import annotations

import argparse

import pll_bench
import torch

from pll_harness.allocator import reuse_freed_blocks

CASES = [
    ("nano", 8, 4000, [32, 262]),
    ("bert-base-cased", 768, 28996, [32, 36, 64]),
    ("roberta-base", 768, 50265, [20, 32, 42, 64]),
    ("deberta-v3-base", 768, 128100, [8, 16, 32, 64]),
    ("xlm-roberta-base", 768, 250002, [4, 16, 32, 42, 64]),
]


def per_chunk_seconds(rows: int, weight: torch.Tensor, bias: torch.Tensor) -> float:
    hidden = torch.randn(rows, weight.shape[1])
    logits = torch.empty(rows, weight.shape[0])

    def chunk() -> None:
        torch.addmm(bias, hidden, weight.t(), out=logits)
        torch.log_softmax(logits, -1, out=logits)
        logits.amax(-1)

    return pll_bench.seconds_per_call(chunk, repeats=5)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    reuse_freed_blocks()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32")
    print("| vocabulary of | width | words | rows a chunk | ms a chunk | ms a row |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, width, words, row_counts in CASES:
        weight, bias = torch.randn(words, width), torch.randn(words)
        for rows in row_counts:
            seconds = per_chunk_seconds(rows, weight, bias)
            print(
                f"| {name} | {width} | {words} | {rows} | {seconds * 1e3:.1f} | "
                f"{seconds / rows * 1e3:.2f} |"
            )


if __name__ == "__main__":
    main()
