r"""Wall time of one process against N data-parallel processes on the same lm-eval workload.

Runs ``lm_eval --model pll-mlm`` once as a single process and once under
``accelerate launch --multi_gpu`` (--gpu) or ``torchrun`` (CPU, gloo) with N processes, on
the same tasks,
then prints both wall times, the speed-up, the scaling efficiency (speed-up / N), how
evenly the cost-balanced shards finished (from each rank's log line), and the largest
difference between the two runs' per-request log-probabilities.  On CPU, where each of the
N processes gets cores / N threads, it also runs one process with that many threads: MKL's
float32 GEMMs round differently with the thread count, and the data-parallel scores are
meant to equal a single process's with the same threads exactly.

    python scripts/bench_data_parallel.py --model tests/fixtures/models/tiny-bert-wordpiece \
        --tasks blimp_pll --limit 30 --processes 2

Wall time includes start-up (loading lm-eval, the model and the tasks), which the
processes do in parallel but which does not shrink with N; each rank's log line shows the
parts that do: tokenizing its own requests, and planning and scoring, where it scores only
its share of the batches (every rank plans every part on everyone's tokens, part by part as
it scores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANK_LINE = re.compile(
    r"Rank (?P<rank>\d+) scored (?P<batches>\d+) of (?P<all_batches>\d+) batches "
    r"\(cost (?P<cost>\d+) of (?P<all_cost>\d+)\); it tokenized its (?P<own_requests>\d+) "
    r"distinct requests in (?P<tokenize_s>[\d.]+) s, pooled the tokens in "
    r"(?P<pool_tokens_s>[\d.]+) s, "
    r"planned and scored in (?P<plan_and_score_s>[\d.]+) s, pooled the scores and assembled "
    r"in (?P<pool_scores_and_assemble_s>[\d.]+) s"
)
"""The line each rank logs at the end of ``distributed.score_shared``."""


def rank_lines(log: str) -> list[dict[str, int | float]]:
    """Each rank's figures from its log line, the seconds as floats."""
    return [
        {key: float(value) if key.endswith("_s") else int(value) for key, value in fields.items()}
        for fields in (match.groupdict() for match in RANK_LINE.finditer(log))
    ]


def run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
    return elapsed, result.stderr + result.stdout


def sample_scores(out: Path) -> dict[tuple[str, int], list[float]]:
    scores = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            scores[(task, sample["doc_id"])] = [float(r[0][0]) for r in sample["resps"]]
    return scores


def max_abs_diff(
    one: dict[tuple[str, int], list[float]], other: dict[tuple[str, int], list[float]]
) -> float:
    if one.keys() != other.keys():
        sys.exit("the runs scored different requests")
    return max(abs(a - b) for key in one for a, b in zip(one[key], other[key], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tests/fixtures/models/tiny-bert-wordpiece")
    parser.add_argument("--metric", default="word_l2r")
    parser.add_argument("--tasks", default="blimp_pll")
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--gpu", action="store_true", help="one GPU per process")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    cores = os.cpu_count() or 1
    bin_dir = Path(sys.executable).parent
    common = [
        "--model", "pll-mlm",
        "--model_args", f"pretrained={args.model},pll_metric={args.metric}",
        "--tasks", args.tasks, "--limit", str(args.limit), "--batch_size", "auto",
        "--log_samples", "--device", "cuda" if args.gpu else "cpu",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        one_out, many_out = Path(tmp, "one"), Path(tmp, "many")
        single_time, _ = run(
            [str(bin_dir / "lm_eval"), *common, "--output_path", str(one_out)],
            {**env, "OMP_NUM_THREADS": str(cores)},
        )
        if args.gpu:
            launcher = [str(bin_dir / "accelerate"), "launch", "--multi_gpu", "--num_processes",
                        str(args.processes), "--num_machines", "1", "--mixed_precision", "no",
                        "--dynamo_backend", "no"]  # fmt: skip
        else:
            launcher = [str(bin_dir / "torchrun"), "--nproc_per_node", str(args.processes),
                        "--master_addr", "127.0.0.1", "--master_port", "29544"]  # fmt: skip
        threads = max(1, cores // args.processes) if not args.gpu else cores
        many_time, log = run(
            [*launcher, "-m", "lm_eval", *common, "--output_path", str(many_out)],
            {**env, "OMP_NUM_THREADS": str(threads)},
        )
        one, many = sample_scores(one_out), sample_scores(many_out)
        same_threads = None
        if threads != cores:
            # MKL's float32 GEMMs round differently with another thread count, so the
            # exact comparison is against one process with each data-parallel process's
            # threads.
            same_out = Path(tmp, "same-threads")
            run(
                [str(bin_dir / "lm_eval"), *common, "--output_path", str(same_out)],
                {**env, "OMP_NUM_THREADS": str(threads)},
            )
            same_threads = max_abs_diff(sample_scores(same_out), many)
    max_diff = max_abs_diff(one, many)
    ranks = rank_lines(log)
    speedup = single_time / many_time
    result = {
        "model": args.model,
        "metric": args.metric,
        "tasks": args.tasks,
        "limit": args.limit,
        "processes": args.processes,
        "device": "cuda" if args.gpu else f"cpu ({cores} cores)",
        "requests": sum(len(v) for v in one.values()),
        "single_process_s": round(single_time, 2),
        "data_parallel_s": round(many_time, 2),
        "speedup": round(speedup, 3),
        "scaling_efficiency": round(speedup / args.processes, 3),
        "ranks": ranks,
        "max_abs_logprob_diff": max_diff,
        "threads_per_process": threads,
        "max_abs_logprob_diff_single_process_same_threads": same_threads,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
