"""Time lm-eval's task index with the start-up hook's kept includes against lm-eval's loader
as shipped, and check that both give the same index.

    python bench/task_index.py                # 3 rounds, alternating
    python bench/task_index.py --rounds 5

Each round builds the index twice, each in a fresh interpreter as every ``lm_eval`` run
does: once as installed (the hook keeps each parsed include, ``_memoize_includes``) and once
with lm-eval's own ``load_yaml`` put back in the index (a copy of its module, with only the
hook's ``pll_harness:`` templates added). Both index lm-eval's task folder and ours, as
``TaskManager`` does, and print a digest of every entry (name, kind, path, parsed config,
tags), which must agree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import hashlib, importlib.util, json, sys, time
from pathlib import Path
import lm_eval.tasks._index as index
import lm_eval.tasks._yaml_loader as installed
from pll_harness.task_paths import TASK_DIR
if sys.argv[1] == "shipped":
    import _pll_harness_hook as hook
    spec = importlib.util.spec_from_file_location("shipped_yaml_loader", installed.__file__)
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    hook._resolve_template_includes(shipped)  # the hook's other job, done both ways
    index.load_yaml = shipped.load_yaml
started = time.perf_counter()
built = index.TaskIndex.build([Path(index.__file__).parent, TASK_DIR])
seconds = time.perf_counter() - started
digest = hashlib.sha256(repr(sorted(
    (name, e.kind.name, str(e.yaml_path), repr(e.cfg), sorted(e.tags))
    for name, e in built.items()
)).encode()).hexdigest()[:16]
print(json.dumps({"seconds": seconds, "entries": len(built), "digest": digest}))
"""

WAYS = ("shipped", "kept")


def build_in_fresh_interpreter(way: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, way], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            runs[way].append(build_in_fresh_interpreter(way))
    print("| loader | seconds, each round | best | entries | digest |")
    print("| --- | --- | ---: | ---: | --- |")
    for way, label in zip(WAYS, ("lm-eval's, as shipped", "with kept includes"), strict=True):
        seconds = [run["seconds"] for run in runs[way]]
        digests = sorted({run["digest"] for run in runs[way]})
        print(
            f"| {label} | {', '.join(f'{s:.2f}' for s in seconds)} | {min(seconds):.2f} | "
            f"{runs[way][0]['entries']} | {', '.join(digests)} |"
        )
    same = {run["digest"] for way in WAYS for run in runs[way]}
    print("same index:", "yes" if len(same) == 1 else "NO")
    if len(same) != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
