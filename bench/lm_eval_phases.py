r"""Where the wall time of one ``lm_eval`` run goes: lm-eval's start-up, loading our model,
building the requests, our engine's steps, and lm-eval's work on the results.

    python bench/lm_eval_phases.py --model_args pretrained=DIR,pll_metric=word_l2r \
        --tasks blimp_pll --device cpu
    python bench/lm_eval_phases.py --phases-out results.md <any other lm_eval arguments>

Runs lm-eval's own command line in this process (``--model pll-mlm`` unless another is
given) with a timer around each phase's function, and prints the phases after lm-eval's
own output; ``--phases-out`` also writes them as markdown.  Issue 12's target is the whole
run (``lm_eval ... --tasks blimp_pll`` in at most 40 s on an H100), and this table says
which part is lm-eval's own start-up, which no engine can shorten.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import functools  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import lm_eval.evaluator  # noqa: E402
import lm_eval.tasks.manager  # noqa: E402
import torch  # noqa: E402
from lm_eval.__main__ import cli_evaluate  # noqa: E402
from lm_eval.api.task import ConfigurableTask, Task  # noqa: E402
from transformers import AutoModelForMaskedLM, AutoTokenizer  # noqa: E402

import pll_harness.lm  # noqa: E402
import pll_harness.planning  # noqa: E402
from pll_harness.runner import PLLRunner  # noqa: E402
from pll_harness.scorer import PLLScorer  # noqa: E402

IMPORTED = time.perf_counter()

RUN = "  run the model (on a GPU in parts: until the last batch is queued)"
PHASES: list[tuple[str, Any, str]] = [
    ("lm-eval: index every task folder", lm_eval.tasks.manager.TaskManager, "__init__"),
    ("lm-eval: load each task's data", ConfigurableTask, "download"),
    ("pll-mlm: load the model", pll_harness.lm.PLLMaskedLM, "__init__"),
    (
        "  the model's from_pretrained (its modules' imports included)",
        AutoModelForMaskedLM,
        "from_pretrained",
    ),
    ("  the tokenizer's from_pretrained", AutoTokenizer, "from_pretrained"),
    ("  the model to the device (on a GPU: CUDA's start-up)", torch.nn.Module, "to"),
    ("  PLLScorer", PLLScorer, "__init__"),
    ("lm-eval: build the requests", Task, "build_all_requests"),
    ("pll-mlm: loglikelihood, all of it", pll_harness.lm.PLLMaskedLM, "loglikelihood"),
    ("  tokenize (on a GPU part by part, beside the run)", PLLScorer, "distinct_jobs"),
    ("  tokenize (on a GPU part by part, beside the run)", PLLScorer, "_jobs"),
    ("  plan, all groups before the run", PLLScorer, "plan_work"),
    (RUN, PLLRunner, "run"),
    (RUN, PLLRunner, "run_planned"),
    (RUN, PLLRunner, "launch"),
    ("  planning, wherever it ran (each group's _group)", pll_harness.planning, "_group"),
    ("  assemble", PLLScorer, "assemble"),
    ("lm-eval: evaluate, all of it", lm_eval.evaluator, "evaluate"),
]
"""(label, owner, attribute): the functions timed, each summed over its calls.  Loading
the model is split into transformers' two ``from_pretrained`` calls, moving the model to
the device (``Module.to``, where a GPU's CUDA start-up falls) and building the scorer.  A
single-process run plans each group as the run reaches it, so its planning is part of the
run and is also given on its own (every group's ``_group``, wherever it ran); revisions
before that, and data-parallel runs, plan all groups first (``plan_work``).  Tokenizing is
``distinct_jobs`` in revisions before the parts (pll_harness.parts) and in data-parallel
runs, else each part's ``_jobs``, which on a GPU runs in a thread while the device
works.  A run in parts launches each part without waiting for the device (``launch``),
and assembles each part in a thread once its results are back: on a GPU the rest of the
run shows in the whole ``loglikelihood`` only, and assembling, but for the last part,
overlaps the run.  ``run`` calls ``run_planned``, which calls ``launch``: a call inside a
call of the same label counts once.  A function that a revision (on PYTHONPATH) lacks, or
that the run never called, leaves its row empty."""

seconds: dict[str, float] = defaultdict(float)


running: set[str] = set()
"""The labels being timed now: a call inside another call of the same label is not
counted twice."""


def timed(label: str, function: Callable) -> Callable:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if label in running:
            return function(*args, **kwargs)
        running.add(label)
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds[label] += time.perf_counter() - start
            running.discard(label)

    return wrapper


def table(total: float) -> list[str]:
    evaluate = seconds["lm-eval: evaluate, all of it"]
    after = (
        evaluate
        - seconds["lm-eval: build the requests"]
        - seconds["pll-mlm: loglikelihood, all of it"]
    )
    accounted = (
        (IMPORTED - STARTED)
        + seconds["lm-eval: index every task folder"]
        + seconds["lm-eval: load each task's data"]
        + seconds["pll-mlm: load the model"]
        + evaluate
    )
    labels = dict.fromkeys(label for label, _, _ in PHASES if "evaluate" not in label)
    rows = [
        ("imports (lm-eval, torch, transformers, pll_harness)", IMPORTED - STARTED),
        *((label, seconds.get(label)) for label in labels),
        ("lm-eval: scoring the results, aggregating, printing", after),
        ("other (argument parsing, building the tasks, seeding, ...)", total - accounted),
        ("**total**", total),
    ]
    return [
        f"`lm_eval {' '.join(sys.argv[1:])}`",
        "",
        "| phase | seconds |",
        "| --- | ---: |",
        *(f"| {label} | {'' if value is None else f'{value:.2f}'} |" for label, value in rows),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--phases-out", type=Path)
    ours, lm_eval_args = parser.parse_known_args()
    if "--model" not in lm_eval_args:
        lm_eval_args = ["--model", "pll-mlm", *lm_eval_args]
    for label, owner, name in PHASES:
        if hasattr(owner, name):
            setattr(owner, name, timed(label, getattr(owner, name)))
    sys.argv = ["lm_eval", *lm_eval_args]
    try:
        cli_evaluate()
    finally:
        lines = table(time.perf_counter() - STARTED)
        print("\n".join(["", *lines]))
        if ours.phases_out is not None:
            ours.phases_out.write_text("\n".join(lines) + "\n")
            print(f"wrote {ours.phases_out}")


if __name__ == "__main__":
    main()
