"""bench/score_variants.py's host profile (``--host-profile``): which torch ops of the
launching thread a first ``score()`` spends more time in than a later one.  The script
itself needs CUDA; its profiling runs here on the CPU with the tiny BERT, and its tables are
checked against torch's own ``key_averages`` and against hand-made events."""

from __future__ import annotations

import importlib
import random
import sys
import threading
import time
from types import ModuleType

import pytest
import torch
from conftest import REPO_ROOT

from pll_harness import PLLScorer

BENCH = str(REPO_ROOT / "bench")
TEXTS = [
    "The cat sat on the mat.",
    "Dogs bark at the mailman every morning.",
    "She has read the whole book twice.",
    "A tiny model is enough for this.",
    "Who did the children see at the zoo?",
    "These sentences make several batches.",
]


@pytest.fixture(scope="module")
def variants() -> ModuleType:
    """The script as a module (it imports pll_bench from its own folder)."""
    sys.path.insert(0, BENCH)
    try:
        return importlib.import_module("score_variants")
    finally:
        sys.path.remove(BENCH)


@pytest.fixture(scope="module")
def scorer(tiny_bert_dir: str) -> PLLScorer:
    """A word_l2r scorer whose small token budget cuts TEXTS into several batches."""
    scorer = PLLScorer.from_pretrained(
        tiny_bert_dir, pll_metric="word_l2r", device="cpu", max_batch_tokens=96
    )
    scorer.score(TEXTS[:2])  # the warm-up the script makes
    return scorer


def test_a_profiled_call_finds_the_models_matrix_products_in_every_batch(
    variants, scorer, monkeypatch
):
    """The whole call and each batch's launch get op tables with the linear layers in them,
    the self times add up to the call's wall time (every event counted once, less its
    children), and the runner is left as it was."""
    calls = []
    score_batch = type(scorer.runner)._score_batch

    def counted(*args):
        calls.append(args)
        score_batch(*args)

    monkeypatch.setattr(type(scorer.runner), "_score_batch", counted)
    profiled = variants.profile_call(scorer, TEXTS, torch)
    ops = profiled["ops"]
    for name in ("aten::linear", "aten::addmm"):
        assert ops[name]["calls"] > 0 and ops[name]["self_s"] > 0, name
    assert ops[variants.CALL]["calls"] == 1
    self_total = sum(entry["self_s"] for entry in ops.values())
    assert self_total == pytest.approx(profiled["wall"], rel=0.05, abs=2e-3)
    assert len(calls) > 1 and len(profiled["batches"]) == len(calls)
    for batch in profiled["batches"]:
        assert batch["ops"]["aten::addmm"]["self_s"] > 0
        assert batch["ops"][variants.BATCH]["calls"] == 1
        assert variants.CALL not in batch["ops"]
        assert sum(entry["self_s"] for entry in batch["ops"].values()) == pytest.approx(
            batch["launch"], rel=1e-6
        )
    assert sum(batch["launch"] for batch in profiled["batches"]) < profiled["wall"]
    assert "_score_batch" not in vars(scorer.runner)


def test_the_op_table_is_torchs_own(variants, scorer):
    """Read from kineto's events, the table has the names, calls and self times that
    torch's ``key_averages`` builds from its slower ``FunctionEvent`` objects."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with (
        variants.batches_marked(scorer.runner, torch),
        profile(activities=[ProfilerActivity.CPU]) as prof,
        record_function(variants.CALL),
    ):
        scorer.score(TEXTS)
    ours = variants.op_tables(variants.profiler_records(prof))["ops"]
    theirs = {average.key: average for average in prof.key_averages()}
    assert ours.keys() == theirs.keys()
    for name, entry in ours.items():
        assert entry["calls"] == theirs[name].count, name
        assert entry["self_s"] == pytest.approx(theirs[name].self_cpu_time_total / 1e6), name


def test_events_nest_within_their_thread_and_batches_collect_what_is_inside_them(variants):
    """Self time is an event's time less its children's; each batch holds the events
    inside its launch, itself included, and a batch may start where the last one ended.
    Another thread's events overlap the first thread's without nesting in them."""
    call, batch = variants.CALL, variants.BATCH
    records = [
        (call, 0, 100, 1),
        ("aten::empty", 5, 10, 1),
        (batch, 20, 60, 1),
        ("aten::linear", 25, 45, 1),
        ("aten::addmm", 30, 40, 1),
        (batch, 60, 90, 1),
        ("aten::addmm", 70, 75, 1),
        ("aten::empty", 0, 50, 2),
        ("aten::mm", 10, 20, 2),
    ]
    random.Random(0).shuffle(records)
    tables = variants.op_tables(records)

    def in_ns(table):
        return {
            name: (entry["calls"], round(entry["self_s"] * 1e9)) for name, entry in table.items()
        }

    assert in_ns(tables["ops"]) == {
        call: (1, 100 - 5 - 40 - 30),
        "aten::empty": (2, 5 + 50 - 10),
        batch: (2, 40 - 20 + 30 - 5),
        "aten::linear": (1, 20 - 10),
        "aten::addmm": (2, 10 + 5),
        "aten::mm": (1, 10),
    }
    assert [round(b["launch"] * 1e9) for b in tables["batches"]] == [40, 30]
    assert [in_ns(b["ops"]) for b in tables["batches"]] == [
        {batch: (1, 20), "aten::linear": (1, 10), "aten::addmm": (1, 10)},
        {batch: (1, 25), "aten::addmm": (1, 5)},
    ]


def test_ops_are_compared_by_the_self_time_the_first_call_gained(variants):
    """Largest gain first, losses last; an op of one call only counts zero calls and zero
    time in the other; ``top`` keeps the first rows."""
    first = {
        "aten::addmm": {"calls": 3, "self_s": 0.5},
        "aten::empty": {"calls": 2, "self_s": 0.01},
        "cudnn graph": {"calls": 1, "self_s": 0.2},
    }
    later = {
        "aten::addmm": {"calls": 3, "self_s": 0.1},
        "aten::empty": {"calls": 4, "self_s": 0.02},
        "aten::copy_": {"calls": 1, "self_s": 0.05},
    }
    rows = variants.compare_ops(first, later)
    assert [(row["op"], round(row["difference"], 6)) for row in rows] == [
        ("aten::addmm", 0.4),
        ("cudnn graph", 0.2),
        ("aten::empty", -0.01),
        ("aten::copy_", -0.05),
    ]
    assert rows[1] | {"difference": None} == {
        "op": "cudnn graph", "calls_first": 1, "calls_later": 0, "self_first": 0.2,
        "self_later": 0.0, "difference": None,
    }  # fmt: skip
    assert (rows[2]["calls_first"], rows[2]["calls_later"]) == (2, 4)
    assert (rows[3]["calls_first"], rows[3]["self_first"]) == (0, 0.0)
    assert [row["op"] for row in variants.compare_ops(first, later, top=2)] == [
        "aten::addmm",
        "cudnn graph",
    ]


def test_batches_are_paired_by_position_and_ranked_by_how_much_their_launch_grew(variants):
    def batch(launch, addmm):
        return {"launch": launch, "ops": {"aten::addmm": {"calls": 1, "self_s": addmm}}}

    first = [batch(0.01, 0.005), batch(0.5, 0.45), batch(0.02, 0.01), batch(0.2, 0.15)]
    later = [batch(0.01, 0.005), batch(0.01, 0.005), batch(0.03, 0.02), batch(0.01, 0.005)]
    rows = variants.slowest_batches(first, later, top=3)
    assert [row["batch"] for row in rows] == [2, 4, 1]
    assert rows[0]["launch_first"] == 0.5 and rows[0]["launch_later"] == 0.01
    assert rows[0]["ops"][0]["op"] == "aten::addmm"
    assert rows[0]["ops"][0]["difference"] == pytest.approx(0.445)
    assert variants.slowest_batches(first, later[:3]) == []


def test_the_host_profile_compares_the_first_and_second_calls_with_the_last(variants, scorer):
    """Three profiled calls, each summed up, the first two against the last by op and by
    batch, and the tables that say so."""
    report = variants.host_profile(scorer, TEXTS, torch)
    assert [row["call"] for row in report["calls"]] == variants.PROFILED_CALLS
    assert [row["call"] for row in report["against_last"]] == variants.PROFILED_CALLS[:2]
    for row in report["calls"]:
        launches = report["profiles"][row["call"]]["launches"]
        assert row["batches"] == len(launches) > 1
        assert row["longest_launch"] == pytest.approx(max(launches), abs=1e-6)
        assert 0 < row["outside_batches"] + row["in_batches_outside_ops"] < row["self_total"]
    last = report["profiles"][variants.PROFILED_CALLS[-1]]
    for against in report["against_last"]:
        its = report["profiles"][against["call"]]
        assert len(against["ops"]) == variants.TOP_OPS
        for row in against["ops"]:
            for table, key in ((its["ops"], "self_first"), (last["ops"], "self_later")):
                assert row[key] == table.get(row["op"], {"self_s": 0.0})["self_s"]
        assert len(against["batches"]) == variants.SLOW_BATCHES
        for row in against["batches"]:
            assert row["launch_first"] == pytest.approx(its["launches"][row["batch"] - 1], abs=1e-6)
            assert row["launch_later"] == pytest.approx(
                last["launches"][row["batch"] - 1], abs=1e-6
            )
    report |= {"device": "cpu", "engine": "pll_harness", "model": "tiny", "dtype": "float32"}
    text = variants.profile_markdown(report | {"sentences": len(TEXTS)})
    for name in variants.PROFILED_CALLS:
        assert f"\n| {name} | " in text
    for row in report["calls"]:
        thread = row["host"]["thread"]
        cpu = row["host"]["process"]["user_s"] + row["host"]["process"]["sys_s"]
        assert 0 < thread["user_s"] + thread["sys_s"] <= cpu + 0.01  # the thread's is part
        assert f"\n| {row['call']} | {cpu:.2f} | " in text
    for against in report["against_last"]:
        assert f"**{against['call']} against default, last**" in text
        for row in against["ops"]:
            assert f"\n| {row['op']} | {row['calls_first']} | {row['calls_later']} | " in text
        for row in against["batches"]:
            assert f"\n| {row['batch']} | {1000 * row['launch_first']:.1f} | " in text


def busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_host_usage_tells_the_calling_threads_work_from_the_process_s(variants):
    """CPU time spent in the block's own thread counts for both, another thread's for the
    process alone; fresh memory touched counts as minor faults; the spin is timed on both
    sides of the block."""
    with variants.host_usage() as own:
        busy(0.3)
    other = threading.Thread(target=busy, args=(0.3,))
    with variants.host_usage() as beside:
        other.start()
        other.join()
    for host in (own, beside):
        assert host["spin_ms_before"] > 0 and host["spin_ms_after"] > 0
        process = host["process"]
        assert process["user_s"] + process["sys_s"] >= 0.28
    assert own["thread"]["user_s"] + own["thread"]["sys_s"] >= 0.28
    assert beside["thread"]["user_s"] + beside["thread"]["sys_s"] < 0.1
    with variants.host_usage() as touched:
        pages = bytearray(64 * 2**20)
        pages[::4096] = b"x" * len(range(0, len(pages), 4096))
    assert touched["process"]["minor_faults"] >= 16  # 64 MiB in 4 KiB pages or 2 MiB ones
    assert touched["thread"]["minor_faults"] >= 16


def test_the_variants_table_ends_with_the_host_during_each_call(variants):
    """``measure`` (CUDA only) gives each row its ``host_usage``; the report's tables show
    it, one line a variant."""
    with variants.host_usage() as host:
        busy(0.05)
    row = {"variant": "default, first call", "wall": 9.5, "before_first": 0.3, "between": 0.2}
    row |= {"in_batches": 8.8, "after_last": 0.2, "longest_launch": 0.68, "host": host}
    report = {"device": "H200", "model": "bert-base", "sentences": 134_000, "rows": [row]}
    text = variants.markdown(report | {"kernel_variants": 0})
    assert "\n| default, first call | 9.50 | 0.30 | 0.20 | 8.80 | 0.20 | 0.680 |" in text
    cpu = host["process"]["user_s"] + host["process"]["sys_s"]
    assert f"\n| default, first call | {cpu:.2f} | " in text.split("The host during")[1]


def test_warm_launches_launches_for_the_seconds_given(variants):
    """Whole rounds of WARM_BATCH tiny kernels until the time is up (on the CPU here; on
    CUDA each round ends waiting for the device); none for 0 s, the default."""
    start = time.perf_counter()
    launched = variants.warm_launches(torch, "cpu", 0.2)
    took = time.perf_counter() - start
    assert launched >= variants.WARM_BATCH and launched % variants.WARM_BATCH == 0
    assert 0.2 <= took < 1.0
    assert variants.warm_launches(torch, "cpu", 0.0) == 0
