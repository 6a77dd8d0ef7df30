"""Scoring speed on a CPU that other processes keep busy: torch threads and OpenMP's wait
policy.

torch runs one OpenMP thread per core, and by default those threads spin while they wait
for each other.  When other processes hold the cores, the waiting can dominate.  This
script scores the same sentences with every thread count in ``--threads``, under OpenMP's
default wait policy and under ``OMP_WAIT_POLICY=PASSIVE`` (read once, when OpenMP starts,
so each policy runs in its own process), with ``--busy`` extra processes spinning on the
CPU, and prints milliseconds per sentence and CPU seconds.

    python scripts/bench_busy_cpu.py --model pll-demo --busy 0 1

The numbers depend on whatever else runs on the machine: repeat them, and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(model: str, n_sentences: int, threads: list[int], repeats: int) -> None:
    """Score in this process (its OpenMP wait policy fixed at start-up); print JSON lines."""
    import torch

    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    from tiny_corpus import corpus_sentences

    from pll_harness.scorer import PLLScorer

    texts = corpus_sentences(n_sentences, seed=11)
    scorer = PLLScorer.from_pretrained(model, device="cpu")
    scorer.score(texts[:8])  # warm-up
    for _ in range(repeats):
        for count in threads:
            torch.set_num_threads(count)
            started, cpu = time.perf_counter(), time.process_time()
            scorer.score(texts)
            wall = time.perf_counter() - started
            record = {
                "threads": count,
                "ms_per_sentence": round(1000 * wall / len(texts), 1),
                "cpu_s": round(time.process_time() - cpu, 2),
                "load1": round(os.getloadavg()[0], 1),
            }
            print(json.dumps(record), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="pll-demo")
    parser.add_argument("--sentences", type=int, default=96)
    parser.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count() or 1, 1])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1], help="spinning processes")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.model, args.sentences, args.threads, args.repeats)
        return
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.1f}")
    for busy in args.busy:
        spin = [sys.executable, "-c", "while True: pass"]
        spinners = [subprocess.Popen(spin) for _ in range(busy)]
        try:
            for policy in ("default", "PASSIVE"):
                env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
                if policy != "default":
                    env["OMP_WAIT_POLICY"] = policy
                command = [sys.executable, __file__, "--child", "--model", args.model]
                command += ["--sentences", str(args.sentences), "--repeats", str(args.repeats)]
                command += ["--threads", *map(str, args.threads)]
                done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
                for line in done.stdout.splitlines():
                    if line.startswith("{"):
                        print(json.dumps({"busy": busy, "wait_policy": policy, **json.loads(line)}))
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()


if __name__ == "__main__":
    main()
