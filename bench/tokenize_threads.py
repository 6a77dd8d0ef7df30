"""The tokenize step over all of BLiMP with TOKENIZERS_PARALLELISM unset, false and true.

    python bench/tokenize_threads.py [--rounds 2] [--n N] [--out-dir DIR]

With the variable unset, the engine makes one call of the Rust tokenizer, which spreads
itself over every core; set (lm-eval's command line sets it to false), the engine splits
the texts over torch's threads (``pll_harness.encoding._encode_in_threads``).  On 2 cores
the ways are equally fast; on an H100 machine's 16, ``pll_bench`` (unset) tokenized all of
BLiMP in 1.93-2.15 s and lm-eval's runs (false) in 0.90-1.27 s (bench/README.md).  Each
measurement is ``PLLScorer.distinct_jobs`` in a fresh process with the packaged pll-demo's
WordPiece tokenizer, the modes alternating; each is printed as soon as it is made.  Writes
``tokenize-threads-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pll_bench

MODES = {"unset": None, "false": "false", "true": "true"}


def child(n: int | None) -> None:
    import torch

    from pll_harness import PLLScorer
    from pll_harness.models import DEMO_MODEL_DIR

    texts = pll_bench.blimp_sentences(pll_bench.PACKAGED_DATA / "blimp")[:n]
    scorer = PLLScorer.from_pretrained(str(DEMO_MODEL_DIR), device="cpu")
    scorer.distinct_jobs([("", text) for text in texts[:50]])
    start = time.perf_counter()
    scorer.distinct_jobs([("", text) for text in texts])
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "threads": torch.get_num_threads()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, help="the first N BLiMP sentences (default: all)")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.n)
        return
    command = [sys.executable, __file__, "--child"] + (["--n", str(args.n)] if args.n else [])
    seconds: dict[str, list[str]] = {mode: [] for mode in MODES}
    threads = "?"
    for _ in range(args.rounds):
        for mode, value in MODES.items():
            env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
            if value is not None:
                env["TOKENIZERS_PARALLELISM"] = value
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode or not lines:
                seconds[mode].append("failed")
                print(mode, "failed:", done.stderr[-500:], flush=True)
                continue
            result = json.loads(lines[-1])
            threads = result["threads"]
            seconds[mode].append(f"{result['seconds']:.2f}")
            print(f"{mode}: {result['seconds']:.2f} s", flush=True)
    machine = pll_bench.machine_name("cpu")
    lines = [
        f"# Tokenize step by TOKENIZERS_PARALLELISM: {machine}, {os.cpu_count()} cores",
        "",
        f"- {args.n or 'all'} BLiMP sentences, pll-demo's tokenizer, torch threads {threads}",
        "- seconds of `PLLScorer.distinct_jobs`, each in a fresh process, modes alternating",
        "",
        "| TOKENIZERS_PARALLELISM | seconds |",
        "| --- | --- |",
        *(f"| {mode} | {', '.join(values)} |" for mode, values in seconds.items()),
    ]
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "tokenize-threads", lines)


if __name__ == "__main__":
    main()
