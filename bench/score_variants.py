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

    python bench/score_variants.py --host-profile --tag host-profile --out-dir bench/results

``--host-profile`` runs the default's three calls instead, each under torch's CPU profiler
(CPU activity only, so that no CUPTI tracing changes the GPU's timing; no shapes, no
stacks), and compares the first and the second with the last op by op: the calls and the
self CPU time of each torch op, of the batches' launches outside torch ops and of
``score()`` outside both, in the launching thread (the profiler records the thread that
starts it), and the same for the batches whose launch grew most.  A first call's slow
launches, while the GPU waited, are the host's; this says which of its operations are slow
early (bench/README.md).  The profiler costs about 2 us an op: on the 2-core VM (one
thread) the nano model's ``score()`` of 400 BLiMP sentences (5,700 ops) took 9-12% longer
under it, of 2,000 sentences 3%.

Every call, profiled or not, also records the host around it (:func:`host_usage`: CPU time,
page faults and context switches of the process and of the launching thread, the load, and
a fixed loop of pure Python before and after), in a table of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator
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


WARM_BATCH = 1000
"""Tiny kernels :func:`warm_launches` launches between two waits for the device."""


def warm_launches(torch: Any, device: Any, seconds: float) -> int:
    """Launch one tiny kernel after another for ``seconds``, waiting for the device every
    WARM_BATCH, and return how many ran.  A first call's slow launches outlast its first
    meeting with each shape (the second call, on the same texts, was as slow on the H200),
    as the demo model's training was slow for a few hundred steps after one step of each
    of its shapes (bench/README.md): whether time and launches alone, with none of a
    model's work, make the first call fast is what this tells."""
    cell = torch.zeros(1, device=device)
    launched, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(WARM_BATCH):
            cell.add_(1)
        if cell.device.type == "cuda":
            torch.cuda.synchronize(cell.device)
        launched += WARM_BATCH
    return launched


SPIN_ITERATIONS = 200_000
"""Additions in :func:`spin_ms`'s loop: some 10 ms of pure Python on the 2-core VM."""
USAGE_FIELDS = {
    "user_s": "ru_utime",
    "sys_s": "ru_stime",
    "minor_faults": "ru_minflt",
    "major_faults": "ru_majflt",
    "voluntary_switches": "ru_nvcsw",
    "involuntary_switches": "ru_nivcsw",
}
"""What :func:`host_usage` counts, by its name in the JSON and getrusage's."""


def spin_ms(rounds: int = 3) -> float:
    """The fastest of ``rounds`` runs of a fixed loop of pure Python, in ms: how fast the
    host runs the kind of work the launching thread does.  A first call slow with it (a
    CPU not yet at its clock, another tenant) is the host's, not the engine's."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(SPIN_ITERATIONS):
            total += i
        best = min(best, time.perf_counter() - start)
    return 1000 * best


def _usage(who: int) -> dict[str, float]:
    usage = resource.getrusage(who)
    return {name: getattr(usage, field) for name, field in USAGE_FIELDS.items()}


@contextlib.contextmanager
def host_usage() -> Iterator[dict[str, Any]]:
    """What the host did while the block ran: the process's and the calling thread's
    (the launching thread's) CPU time, page faults and context switches, with the load
    average and :func:`spin_ms` before and after.  The first call's slow launches are the
    launching thread's (bench/README.md): many involuntary switches say it was preempted,
    major faults that it waited for code or data paged in from disk, minor faults that it
    touched fresh memory, and a slower spin before than after a CPU that sped up."""
    report: dict[str, Any] = {"spin_ms_before": spin_ms(), "load_1min": os.getloadavg()[0]}
    whom = {"process": resource.RUSAGE_SELF, "thread": resource.RUSAGE_THREAD}
    before = {name: _usage(who) for name, who in whom.items()}
    yield report
    for name, who in whom.items():
        after = _usage(who)
        report[name] = {key: after[key] - before[name][key] for key in USAGE_FIELDS}
    report["spin_ms_after"] = spin_ms()


def host_lines(rows: list[dict[str, Any]], key: str) -> list[str]:
    """The :func:`host_usage` of each row (named by ``row[key]``) as a table."""
    lines = [
        "",
        "The host during each call: CPU seconds (user + system) and involuntary context "
        "switches of the process and of the launching thread, the process's minor and major "
        "page faults, the 1-minute load average, and `spin_ms` (a fixed loop of pure Python) "
        "before and after",
        "",
        "| call | CPU s | thread CPU s | switches | thread switches | minor faults | "
        "major faults | load | spin ms before | spin ms after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        host = row["host"]
        process, thread = host["process"], host["thread"]
        lines.append(
            f"| {row[key]} | {process['user_s'] + process['sys_s']:.2f} | "
            f"{thread['user_s'] + thread['sys_s']:.2f} | {process['involuntary_switches']} | "
            f"{thread['involuntary_switches']} | {process['minor_faults']} | "
            f"{process['major_faults']} | {host['load_1min']:.2f} | "
            f"{host['spin_ms_before']:.1f} | {host['spin_ms_after']:.1f} |"
        )
    return lines


def measure(
    scorer: Any, texts: list[str], torch: Any, defaults_only: bool = False
) -> list[dict[str, Any]]:
    """Each variant's timed ``score(texts)`` with its timeline, in the order of VARIANTS
    (``defaults_only``: the default's alone)."""
    rows = []
    for name, setting in VARIANTS:
        if defaults_only and not name.startswith("default"):
            continue
        with setting(scorer), host_usage() as host:
            wall, _, idle = pll_bench._timeline_score(scorer, texts, torch)
        launches = [launched - begun for begun, launched, _, _ in idle["per_batch"]]
        longest = max(launches, default=0.0)
        rows.append({"variant": name, **idle, "longest_launch": longest, "host": host})
        print(f"{name}: {wall:.2f} s", flush=True)
    return rows


CALL = "score() outside torch ops and batches"
"""The profiler's annotation of a whole profiled call: its self time is the launching
thread's time in no batch and no torch op (tokenizing and planning the first part, Python,
waiting for the GPU's queue and at the end)."""
BATCH = "batch launch outside torch ops"
"""The annotation of each batch's launch (``runner._score_batch``, the window that
:func:`pll_bench._timeline_score` times): its self time is the launch's host time in no
torch op (Python, numpy, triton's launches of the short-sequence attention kernel)."""
PROFILED_CALLS = ["default, first call", "default, again", "default, last"]
"""The calls :func:`host_profile` profiles, the sequence of ``--defaults-only``: the second
call was as slow as the first on the H200 (bench/README.md), so the last is the fast one
that the first and the second are compared with."""
TOP_OPS = 20
SLOW_BATCHES = 5
BATCH_OPS = 5


@contextlib.contextmanager
def batches_marked(runner: Any, torch: Any) -> Iterator[None]:
    """Each batch's launch inside a profiler annotation named BATCH, so that the profile
    can be cut into batches on the profiler's own clock."""
    score_batch = runner._score_batch

    def marked(*args: Any) -> None:
        with torch.profiler.record_function(BATCH):
            score_batch(*args)

    runner._score_batch = marked
    try:
        yield
    finally:
        del runner._score_batch


Record = tuple[str, int, int, int]
"""A profiled event: its name, its start and end (ns, on the profiler's clock) and its
thread.  Within a thread events nest."""


def profiler_records(prof: Any) -> list[Record]:
    """The events of a stopped profiler, read from kineto's own: building torch's
    ``FunctionEvent`` objects (``prof.events()``) took 86 us an event on the 2-core VM,
    3.1 s for the 36,000 of 400 sentences on a 12-layer model, where these and
    :func:`op_tables` took 0.24 s; a bert-base call over BLiMP on a GPU makes some 200,000."""
    return [
        (
            event.name(),
            event.start_ns(),
            event.start_ns() + event.duration_ns(),
            event.start_thread_id(),
        )
        for event in prof.profiler.kineto_results.events()
    ]


def _add(table: dict[str, dict[str, Any]], name: str, self_ns: int) -> None:
    entry = table.setdefault(name, {"calls": 0, "self_s": 0.0})
    entry["calls"] += 1
    entry["self_s"] += self_ns / 1e9


def op_tables(records: Iterable[Record]) -> dict[str, Any]:
    """Calls and self CPU seconds by event name (an op table) in ``records``, and in each
    batch's launch (a BATCH event and the events inside it) in launch order, with the
    launch's seconds.  An event's self time is its time less its children's, as torch's
    ``key_averages`` counts it."""
    ops: dict[str, dict[str, Any]] = {}
    batches: list[dict[str, Any]] = []
    around: list[list[Any]] = []  # open events, innermost last: name, end, self, batch, thread

    def close() -> None:
        name, _, self_ns, batch, _ = around.pop()
        for table in (ops,) if batch is None else (ops, batch["ops"]):
            _add(table, name, self_ns)

    for name, start, end, thread in sorted(records, key=lambda r: (r[3], r[1], -r[2])):
        while around and (around[-1][4] != thread or around[-1][1] <= start):
            close()
        parent = around[-1] if around else None
        batch = None if parent is None else parent[3]
        if name == BATCH:
            batch = {"launch": (end - start) / 1e9, "ops": {}}
            batches.append(batch)
        if parent is not None:
            parent[2] -= end - start
        around.append([name, end, end - start, batch, thread])
    while around:
        close()
    return {"ops": ops, "batches": batches}


def profile_call(scorer: Any, texts: list[str], torch: Any) -> dict[str, Any]:
    """One timed ``score(texts)`` under torch's CPU profiler: its wall time and its
    :func:`op_tables`.  CPU activity only: on CUDA no CUPTI tracing, so the GPU's timing
    is the unprofiled one's; no shapes or stacks, which cost the host more."""
    from torch.profiler import ProfilerActivity, profile, record_function

    device = str(scorer.runner.device)
    with (
        batches_marked(scorer.runner, torch),
        profile(activities=[ProfilerActivity.CPU], record_shapes=False, with_stack=False) as prof,
        record_function(CALL),
    ):
        wall, _ = pll_bench._timed_score(scorer, texts, device, torch)
    return {"wall": wall, **op_tables(profiler_records(prof))}


def compare_ops(
    first: dict[str, dict[str, Any]], later: dict[str, dict[str, Any]], top: int | None = TOP_OPS
) -> list[dict[str, Any]]:
    """The ops of two op tables, the most self time gained in ``first`` over ``later``
    first (an op in one table only counts zero calls in the other), the ``top`` of them."""
    none = {"calls": 0, "self_s": 0.0}
    rows = [
        {
            "op": name,
            "calls_first": first.get(name, none)["calls"],
            "calls_later": later.get(name, none)["calls"],
            "self_first": first.get(name, none)["self_s"],
            "self_later": later.get(name, none)["self_s"],
        }
        for name in first.keys() | later.keys()
    ]
    for row in rows:
        row["difference"] = row["self_first"] - row["self_later"]
    rows.sort(key=lambda row: (-row["difference"], row["op"]))
    return rows[:top]


def slowest_batches(
    first: list[dict[str, Any]],
    later: list[dict[str, Any]],
    top: int = SLOW_BATCHES,
    ops: int = BATCH_OPS,
) -> list[dict[str, Any]]:
    """The ``top`` batches whose launch took the most longer in ``first`` than in
    ``later`` (batch k against batch k: the same texts make the same batches), each with
    its ``ops`` largest gains (:func:`compare_ops`); none when the calls made different
    numbers of batches, which then cannot be paired."""
    if len(first) != len(later):
        return []
    rows = [
        {
            "batch": k + 1,
            "launch_first": a["launch"],
            "launch_later": b["launch"],
            "difference": a["launch"] - b["launch"],
            "ops": compare_ops(a["ops"], b["ops"], ops),
        }
        for k, (a, b) in enumerate(zip(first, later, strict=True))
    ]
    rows.sort(key=lambda row: -row["difference"])
    return rows[:top]


def call_summary(profiled: dict[str, Any]) -> dict[str, Any]:
    """A profiled call's totals: wall time, self CPU time in all and outside torch ops,
    and the batches' launches."""
    ops = profiled["ops"]
    outside = {name: ops.get(name, {"self_s": 0.0})["self_s"] for name in (CALL, BATCH)}
    launches = [batch["launch"] for batch in profiled["batches"]]
    return {
        "wall": profiled["wall"],
        "self_total": sum(entry["self_s"] for entry in ops.values()),
        "outside_batches": outside[CALL],
        "in_batches_outside_ops": outside[BATCH],
        "batches": len(launches),
        "launching": sum(launches),
        "longest_launch": max(launches, default=0.0),
    }


def host_profile(scorer: Any, texts: list[str], torch: Any) -> dict[str, Any]:
    """PROFILED_CALLS, each a :func:`profile_call`, and the first and the second each
    against the last, by op and by batch."""
    calls = {}
    for name in PROFILED_CALLS:
        with host_usage() as host:
            calls[name] = profile_call(scorer, texts, torch)
        calls[name]["host"] = host
        print(f"{name}, profiled: {calls[name]['wall']:.2f} s", flush=True)
    last = calls[PROFILED_CALLS[-1]]
    return {
        "calls": [
            {"call": name, **call_summary(calls[name]), "host": calls[name]["host"]}
            for name in PROFILED_CALLS
        ],
        "against_last": [
            {
                "call": name,
                "ops": compare_ops(calls[name]["ops"], last["ops"]),
                "batches": slowest_batches(calls[name]["batches"], last["batches"]),
            }
            for name in PROFILED_CALLS[:-1]
        ],
        "profiles": {
            name: {
                "ops": call["ops"],
                "launches": [round(batch["launch"], 6) for batch in call["batches"]],
            }
            for name, call in calls.items()
        },
    }


def _against_lines(against: dict[str, Any]) -> list[str]:
    """One call's comparison with the last (:func:`host_profile`) as two tables."""
    lines = [
        "",
        f"**{against['call']} against {PROFILED_CALLS[-1]}**: the {TOP_OPS} ops whose self CPU "
        "time (ms) gained most",
        "",
        "| op | calls | calls, last | self | self, last | difference |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {row['op']} | {row['calls_first']} | {row['calls_later']} | "
        f"{1000 * row['self_first']:.1f} | {1000 * row['self_later']:.1f} | "
        f"{1000 * row['difference']:+.1f} |"
        for row in against["ops"]
    ]
    lines += [
        "",
        f"and the {SLOW_BATCHES} batches whose launch grew most (ms), each with the "
        f"{BATCH_OPS} ops that gained most:",
        "",
        "| batch | launch | launch, last | ops (difference) |",
        "| ---: | ---: | ---: | --- |",
    ]
    if not against["batches"]:
        return [*lines, "| - | - | - | the calls made different numbers of batches |"]
    for row in against["batches"]:
        gains = "; ".join(f"{op['op']} {1000 * op['difference']:+.1f}" for op in row["ops"])
        lines.append(
            f"| {row['batch']} | {1000 * row['launch_first']:.1f} | "
            f"{1000 * row['launch_later']:.1f} | {gains} |"
        )
    return lines


def profile_markdown(report: dict[str, Any]) -> str:
    """:func:`host_profile`'s report as tables: each call's totals, then the first and
    the second call each against the last."""
    lines = [
        f"# score() on the host, a first call against a later one: {report['device']}",
        "",
        f"- engine: {report['engine']}; model: {report['model']}, {report['dtype']}, "
        f"word_l2r, {report['sentences']} sentences",
        "- torch's CPU profiler (CPU activity only) in the launching thread. Self CPU time: "
        "the time in an op and in no op inside it; an op's holds its launches' waits while "
        "the GPU's queue is full",
        f"- seconds: the timed `score()`; self CPU time in all, in `{CALL}` and in "
        f"`{BATCH}` (Python, waits, triton's launches); launching: the batches' launches "
        "summed, and the longest",
        "",
        "| call | seconds | self CPU | outside batches | in batches outside ops | batches | "
        "launching | longest launch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["calls"]:
        lines.append(
            f"| {row['call']} | {row['wall']:.2f} | {row['self_total']:.2f} | "
            f"{row['outside_batches']:.2f} | {row['in_batches_outside_ops']:.2f} | "
            f"{row['batches']} | {row['launching']:.2f} | {row['longest_launch']:.3f} |"
        )
    lines += host_lines(report["calls"], "call")
    for against in report["against_last"]:
        lines += _against_lines(against)
    return "\n".join(lines) + "\n"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# score() variants: {report['device']}",
        "",
        f"- engine: {report.get('engine', 'pll_harness')}; reserved before the first call: "
        f"{report.get('reserved_bytes', 0) / 2**30:.1f} GiB on the device, "
        f"{report.get('pinned_bytes', 0) / 2**20:.0f} MiB pinned on the host, "
        f"{report.get('warm_launches', 0):,d} tiny kernels launched; CUDA's module "
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
    lines += host_lines(report["rows"], "variant")
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
    parser.add_argument(
        "--warm-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="before the first call, launch tiny kernels one after another for S seconds",
    )
    parser.add_argument(
        "--host-profile",
        action="store_true",
        help="the default's three calls alone, each under torch's CPU profiler, compared op by op",
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
    launched = (
        warm_launches(torch, scorer.runner.device, args.warm_seconds) if args.warm_seconds else 0
    )
    warm_up = texts[: pll_bench.WARMUP_SENTENCES]
    if args.host_profile:
        profile_call(scorer, warm_up, torch)  # the profiler's own first-use costs too
        measured = host_profile(scorer, texts, torch)
        render = profile_markdown
    else:
        scorer.score(warm_up)
        measured = {"rows": measure(scorer, texts, torch, args.defaults_only)}
        render = markdown
    report = {
        "device": torch.cuda.get_device_name(),
        "model": str(model),
        "dtype": spec["dtype"],
        "engine": _engine_folder(),
        "sentences": len(texts),
        "kernel_variants": pll_bench._kernel_variants(),
        "reserved_bytes": reserved,
        "pinned_bytes": pinned,
        "warm_launches": launched,
        "warm_seconds": args.warm_seconds,
        "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING"),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **measured,
    }
    text = render(report)
    print(text)
    suffix = f"-{args.tag}" if args.tag else ""
    out = pll_bench.write_lines(args.out_dir, "score-variants", [text.rstrip("\n")], suffix, "cuda")
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
