r"""Where a GPU ``score()`` over all of BLiMP loses time to its host: the same call, in one
process on one loaded model, under settings that change how the host threads share the
interpreter, each with the GPU's timeline of :func:`pll_bench.gpu_idle`.

    python bench/score_variants.py --out-dir bench/results    # on a CUDA machine

``score()`` overlaps the preparing of later parts (tokenizing, planning) with the launches of
the current one, in threads of one interpreter.  On an H100 the timed call took 9.50 s
where its steps run one after another took 7.47 s for the run alone (bench/README.md).
The variants tell apart what that could be: a first call's costs (the default, then again),
the launching thread waiting for the interpreter lock (a shorter switch interval), the
cyclic garbage collector (off throughout), and the overlap itself (parts prepared in the
launching thread).  The default runs once more at the end, against drift.  Each variant's
batch-by-batch times go to the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pll_bench

import pll_harness


@contextlib.contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """The interpreter's thread switch interval set to ``seconds`` inside."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """No cyclic garbage collection inside, after one full collection."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def prepared_in_line(scorer: Any) -> Iterator[None]:
    """Later parts tokenized and planned in the launching thread, between parts."""
    before = scorer.prepare_ahead
    scorer.prepare_ahead = False
    try:
        yield
    finally:
        scorer.prepare_ahead = before


VARIANTS: list[tuple[str, Callable[[Any], contextlib.AbstractContextManager]]] = [
    ("default, first call", lambda scorer: contextlib.nullcontext()),
    ("default, again", lambda scorer: contextlib.nullcontext()),
    ("switch interval 0.5 ms", lambda scorer: switch_interval(5e-4)),
    ("cyclic collector off", lambda scorer: collector_off()),
    ("parts prepared in the launching thread", prepared_in_line),
    ("default, last", lambda scorer: contextlib.nullcontext()),
]


def reserve(scorer: Any, torch: Any) -> int:
    """Hold and free one block as large as a full batch's activations by the engine's own
    estimate, so that torch's caching allocator keeps it for the batches to come.  In the
    first ``score()`` of a process the launches of the same dozen large batches (45-129 of
    135) ran until the GPU had finished them, on every H100 run, and in no later call
    (bench/README.md): whether that is the allocator growing is what this tells."""
    from pll_harness.scorer import activation_bytes_per_token

    size = scorer.batching.max_batch_tokens * activation_bytes_per_token(scorer.model)
    block = torch.empty(size, dtype=torch.uint8, device=scorer.runner.device)
    del block
    return size


PINNED_SIZES = [2**k for k in range(10, 28)]
"""Bytes of the pinned host blocks :func:`warm_pinned` holds: every power of two from 1 KiB
to 128 MiB, past a full batch's input ids and index arrays and a run's score buffers."""


def warm_pinned(torch: Any) -> int:
    """Hold and free one pinned host block of every size in PINNED_SIZES, so that torch's
    caching host allocator has one of each power of two for the batches to come.  That
    allocator serves each size class from blocks of exactly that size, and a new one is a
    ``cudaHostAlloc``, which can stall the device's queue; the engine pins each batch's
    input ids and indices and each part's score buffers (``pll_harness/runner.py``), so a
    first call meets new size classes where later calls do not: the other candidate, beside
    :func:`reserve`, for the first call's slow launches."""
    blocks = [torch.empty(size, dtype=torch.uint8, pin_memory=True) for size in PINNED_SIZES]
    del blocks
    return sum(PINNED_SIZES)


def measure(
    scorer: Any, texts: list[str], torch: Any, defaults_only: bool = False
) -> list[dict[str, Any]]:
    """Each variant's timed ``score(texts)`` with its timeline, in the order of VARIANTS
    (``defaults_only``: the default's alone)."""
    rows = []
    for name, setting in VARIANTS:
        if defaults_only and not name.startswith("default"):
            continue
        with setting(scorer):
            wall, _, idle = pll_bench._timeline_score(scorer, texts, torch)
        launches = [launched - begun for begun, launched, _, _ in idle["per_batch"]]
        rows.append({"variant": name, **idle, "longest_launch": max(launches, default=0.0)})
        print(f"{name}: {wall:.2f} s", flush=True)
    return rows


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# score() variants: {report['device']}",
        "",
        f"- engine: {report.get('engine', 'pll_harness')}; reserved before the first call: "
        f"{report.get('reserved_bytes', 0) / 2**30:.1f} GiB on the device, "
        f"{report.get('pinned_bytes', 0) / 2**20:.0f} MiB pinned on the host; CUDA's module "
        f"loading: {report.get('cuda_module_loading') or 'the default (lazy)'}",
        f"- model: {report['model']}, bf16, word_l2r, {report['sentences']} sentences; "
        f"kernel variants compiled at the end: {report['kernel_variants']}",
        "- seconds: the timed `score()`; GPU idle before the first batch, between batches "
        "(lower bounds) and after the last; inside batches: the GPU's time from reaching "
        "each batch to finishing it; longest launch: the most the host took to launch one "
        "batch",
        "",
        "| variant | seconds | before first | between | inside batches | after last | "
        "longest launch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['variant']} | {row['wall']:.2f} | {row['before_first']:.2f} | "
            f"{row['between']:.2f} | {row['in_batches']:.2f} | {row['after_last']:.2f} | "
            f"{row['longest_launch']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _engine_folder() -> str:
    """Where the scored package came from: relative to the repository when inside it (a
    BASELINE folder), else the installed package's folder."""
    folder = Path(pll_harness.__file__).resolve().parent
    if folder.is_relative_to(pll_bench.REPO_ROOT):
        return str(folder.relative_to(pll_bench.REPO_ROOT))
    return str(folder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, help="a sample of this many sentences (default: all)")
    parser.add_argument(
        "--defaults-only", action="store_true", help="only the default's three calls"
    )
    parser.add_argument(
        "--reserve",
        action="store_true",
        help="before the first call, hold and free one block of a full batch's activations",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="before the first call, hold and free a pinned host block of each power of two",
    )
    parser.add_argument("--tag", default="", help="suffix of the result file names")
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("score_variants.py times CUDA events: run it on a CUDA machine")
    bench_args = pll_bench.parse_args([])
    texts = pll_bench.benchmark_sentences(bench_args.data, args.n)
    model, _ = pll_bench.resolve_model(bench_args)
    spec = {"model": str(model), "metric": "word_l2r", "device": "cuda", "dtype": "bfloat16"}
    scorer = pll_bench._load_ours(spec)
    reserved = reserve(scorer, torch) if args.reserve else 0
    pinned = warm_pinned(torch) if args.pin else 0
    scorer.score(texts[: pll_bench.WARMUP_SENTENCES])
    rows = measure(scorer, texts, torch, args.defaults_only)
    device = torch.cuda.get_device_name()
    report = {
        "device": device,
        "model": str(model),
        "engine": _engine_folder(),
        "sentences": len(texts),
        "kernel_variants": pll_bench._kernel_variants(),
        "reserved_bytes": reserved,
        "pinned_bytes": pinned,
        "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING"),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    text = markdown(report)
    print(text)
    suffix = f"-{args.tag}" if args.tag else ""
    out = pll_bench.write_lines(args.out_dir, "score-variants", [text.rstrip("\n")], suffix, "cuda")
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
