"""All of BLiMP through the runner on a GPU with each attention kernel, to choose one.

    python bench/attention_gpu.py [--n N] [--dtype bfloat16] [--out-dir DIR]

Tokenizes and plans the sentences once with the random-weight bert-base of
``bench/pll_bench.py`` (built on first use), then for each choice (SDPA's flash,
memory-efficient and cuDNN kernels alone, the runner's own choice, and eager attention)
loads the model afresh and times ``runner.run`` over the same planned batches twice: the
first run pays what a kernel builds per input shape (cuDNN builds a graph for each), the
second shows its steady speed.  A kernel that cannot take the shapes is reported as
failed.  ``runner.attention_kernels`` is what the runner uses; this is how it was chosen
(bench/README.md).  Writes ``attention-gpu-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

import pll_bench

RUNS = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, help="the first N BLiMP sentences (default: all)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from pll_harness import PLLScorer
    from pll_harness import runner as runner_module

    own_choice = runner_module.attention_kernels
    choices = {
        "SDPA, flash only": ("sdpa", lambda device: sdpa_kernel([SDPBackend.FLASH_ATTENTION])),
        "SDPA, memory-efficient only": (
            "sdpa",
            lambda device: sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]),
        ),
        "SDPA, cuDNN only": ("sdpa", lambda device: sdpa_kernel([SDPBackend.CUDNN_ATTENTION])),
        "SDPA, the runner's choice": ("sdpa", own_choice),
        "eager": ("eager", lambda device: contextlib.nullcontext()),
    }
    model, description = pll_bench.resolve_model(pll_bench.parse_args([]))
    texts = pll_bench.blimp_sentences(pll_bench.PACKAGED_DATA / "blimp")[: args.n]

    def synchronize() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    work = None
    rows = []
    for name, (implementation, kernels) in choices.items():
        scorer = PLLScorer.from_pretrained(
            str(model), device=args.device, dtype=args.dtype, attn_implementation=implementation
        )
        if work is None:
            _, jobs = scorer.distinct_jobs([("", text) for text in texts])
            work = scorer.plan_work(jobs.encodings)
        runner_module.attention_kernels = kernels
        seconds = []
        try:
            for _ in range(RUNS):
                synchronize()
                start = time.perf_counter()
                scorer.runner.run(work)
                synchronize()
                seconds.append(f"{time.perf_counter() - start:.2f}")
        except RuntimeError as error:
            seconds = [f"failed: {str(error).splitlines()[0][:80]}"] * RUNS
        finally:
            runner_module.attention_kernels = own_choice
        rows.append(f"| {name} | {' | '.join(seconds)} |")
        print(rows[-1], flush=True)
        del scorer
    lines = [
        f"# Attention kernels: {pll_bench.machine_name(args.device)} ({args.device})",
        "",
        f"- model: {description}; {args.dtype}; torch {torch.__version__}",
        f"- {len(texts)} BLiMP sentences, word_l2r: {len(work.batches)} batches, "
        f"{sum(work.cost(batch) for batch in work.batches)} tokens",
        "- seconds of `runner.run` over the same planned batches, model loaded afresh for each",
        "",
        "| attention | first run s | second run s |",
        "| --- | ---: | ---: |",
        *rows,
    ]
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "attention-gpu", lines, device=args.device)


if __name__ == "__main__":
    main()
