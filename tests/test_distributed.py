"""Data parallelism: dealing by cost, pooling scores, and 2 CPU processes (gloo) matching 1
process."""

from __future__ import annotations

import atexit
import contextlib
import copy
import itertools
import json
import logging
import sys
import threading
import time
from pathlib import Path
from threading import Barrier, Thread
from typing import ClassVar

import psutil
import pytest
import torch
import torch.distributed as dist
from conftest import GatheredGroup
from lm_eval.api.instance import Instance
from lm_eval_runs import BIN, run_checked, write_pair_task, write_rolling_task

from pll_harness import distributed
from pll_harness.distributed import (
    CostDealer,
    ProcessFailed,
    checked,
    common_batching,
    pool_target_scores,
    score_shared,
    scored_slots,
)
from pll_harness.lm import PLLMaskedLM
from pll_harness.parts import PART_SHARES
from pll_harness.planning import Batching
from pll_harness.runner import TargetScores
from pll_harness.scorer import PLLScorer


def loads(owners: list[int], costs: list[int], n: int) -> list[int]:
    return [sum(c for c, o in zip(costs, owners, strict=True) if o == p) for p in range(n)]


def test_the_dealer_evens_out_the_loads_costliest_first():
    costs = [100, 1, 1, 1, 50, 50, 1, 1]
    assert sorted(loads(CostDealer(2).deal(costs), costs, 2)) == [102, 103]


def test_the_dealer_carries_the_loads_from_one_part_to_the_next():
    """A part dealt after another evens out the loads of both: the process that got the
    costly batch of the first part gets the cheap ones of the second."""
    dealer = CostDealer(2)
    assert dealer.deal([10]) == [0]
    assert dealer.deal([4, 3, 3]) == [1, 1, 1]
    assert dealer.deal([5, 5]) == [0, 1]  # even again: ties go to the lower rank


def test_the_dealer_is_deterministic_and_complete():
    costs = [5, 3, 3, 3, 2, 2, 7, 0]
    assert CostDealer(3).deal(costs) == CostDealer(3).deal(list(costs))
    assert set(CostDealer(3).deal(costs)) == {0, 1, 2}
    assert CostDealer(1).deal(costs) == [0] * len(costs)
    assert CostDealer(4).deal([]) == []
    with pytest.raises(ValueError, match="at least 1"):
        CostDealer(0)


def test_a_process_sends_only_the_slots_it_scored():
    nan = float("nan")
    mine = TargetScores(torch.tensor([nan, -1.5, nan, -0.25]), torch.tensor([0, 1, 0, 0]).bool())
    other = TargetScores(torch.tensor([-2.0, nan, -3.0, nan]), torch.tensor([1, 0, 0, 0]).bool())
    ((slots, logprobs, greedy),) = scored_slots([mine])
    assert slots.dtype == torch.int32 and slots.tolist() == [1, 3]
    assert logprobs.tolist() == [-1.5, -0.25] and greedy.tolist() == [True, False]
    (pooled,) = pool_target_scores(
        [mine], GatheredGroup([scored_slots([mine]), scored_slots([other])])
    )
    assert pooled.logprobs.tolist() == [-2.0, -1.5, -3.0, -0.25]
    assert pooled.greedy.tolist() == [True, True, False, False]
    assert torch.isnan(mine.logprobs[0])  # the process's own results are left as they were


SENTENCES = [
    ("The traveler lost the souvenir.", "The souvenir lost the traveler."),
    ("The hooligan wrecked the souvenir.", "The souvenir wrecked the hooligan."),
    ("A cat sat on the mat.", "A mat sat on the cat."),
    ("Who should Derek hug after shocking Richard?", "Who should Derek hug Richard after?"),
    ("These dogs were barking.", "These dogs was barking."),
    (
        "The teachers who the student admires have praised the old orchestra yesterday.",
        "The teachers who the student admires has praised the old orchestra yesterday.",
    ),
    ("Hi there.", "There hi."),
]


TEXTS = [good for good, _ in SENTENCES] + [" ".join(bad for _, bad in SENTENCES)]
"""The perplexity task's documents; the last is longer than the tiny models take, so it
is scored in windows."""


def run_eval(launcher: list[str], folder: Path, model_dir: str, out: Path) -> dict:
    args = [
        *launcher,
        "--model",
        "pll-mlm",
        "--model_args",
        f"pretrained={model_dir},pll_metric=word_l2r",
        "--tasks",
        "pll_dp_pairs,pll_dp_texts",
        "--include_path",
        str(folder),
        "--device",
        "cpu",
        "--batch_size",
        "auto",
        "--output_path",
        str(out),
        "--log_samples",
    ]
    log = run_checked(args, folder, OMP_NUM_THREADS="1").stderr
    (results_file,) = out.rglob("results_*.json")
    scores = {}
    for task in ("pll_dp_pairs", "pll_dp_texts"):
        (samples_file,) = out.rglob(f"samples_{task}_*.jsonl")
        samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
        scores[task] = {s["doc_id"]: s["filtered_resps"] for s in samples}
    return {
        "log": log,
        "acc": json.loads(results_file.read_text())["results"]["pll_dp_pairs"]["acc,none"],
        "scores": scores,
    }


@pytest.mark.slow
def test_two_cpu_processes_match_one(tmp_path, tiny_bert_dir):
    """torchrun starts 2 gloo processes (accelerate's own launcher needs MPI for several CPU
    processes); each rank must log its share, proving the data-parallel path ran.  Pairs
    (loglikelihood) and texts (loglikelihood_rolling), the last one in windows."""
    write_pair_task(tmp_path, "pll_dp_pairs", SENTENCES)
    write_rolling_task(tmp_path, "pll_dp_texts", TEXTS)
    single = run_eval([str(BIN / "lm_eval")], tmp_path, tiny_bert_dir, tmp_path / "one")
    double = run_eval(
        [str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
         "--master_port", "29533", "-m", "lm_eval"],
        tmp_path, tiny_bert_dir, tmp_path / "two",
    )  # fmt: skip
    assert "Rank 0 scored" in double["log"] and "Rank 1 scored" in double["log"]
    assert "Rank 0 scored" not in single["log"]
    assert double["acc"] == single["acc"]
    for task, count in (("pll_dp_pairs", len(SENTENCES)), ("pll_dp_texts", len(TEXTS))):
        assert double["scores"][task].keys() == single["scores"][task].keys() == set(range(count))
        # same batches, so bit for bit (lm-eval writes the floats in full)
        assert double["scores"][task] == single["scores"][task]


@pytest.mark.slow
def test_two_processes_with_a_cache_that_answers_one_of_them(tmp_path, tiny_bert_dir):
    """--use_cache: a second run with one more document finds rank 1's share all cached,
    so lm-eval calls the model on rank 0 alone, which must not wait for rank 1."""
    write_pair_task(tmp_path, "pll_dp_pairs", SENTENCES)
    args = [
        str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
        "--master_port", "29534", "-m", "lm_eval", "--model", "pll-mlm", "--model_args",
        f"pretrained={tiny_bert_dir}", "--tasks", "pll_dp_pairs", "--include_path",
        str(tmp_path), "--device", "cpu", "--use_cache", str(tmp_path / "cache"),
    ]  # fmt: skip
    run_checked([*args, "--limit", "4"], tmp_path, OMP_NUM_THREADS="1")
    log = run_checked([*args, "--limit", "5"], tmp_path, timeout=120, OMP_NUM_THREADS="1").stderr
    assert "Cached requests: 4, Requests remaining: 2" in log  # rank 0: doc 4 is new
    assert "Requests remaining: 0" in log  # rank 1: docs 1 and 3 (and lm-eval's padding)


def test_a_run_past_its_time_ends_workers_in_sessions_of_their_own(tmp_path):
    """torchrun starts each worker in a session of its own, out of reach of a signal to
    torchrun's process group: a timed-out run must end them too, or it waits for them
    (they hold its output open) while they score on, or wait on each other forever."""
    pid_file = tmp_path / "worker.pid"
    launcher = (
        "import subprocess, sys, time; "
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        "start_new_session=True); "
        f"open({str(pid_file)!r}, 'w').write(str(w.pid)); time.sleep(60)"
    )
    started = time.monotonic()
    with pytest.raises(AssertionError, match="ran past 5 s"):
        run_checked([sys.executable, "-c", launcher], tmp_path, timeout=5)
    assert time.monotonic() - started < 30, "the run waited for its worker"
    worker = int(pid_file.read_text())
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(worker).status() == psutil.STATUS_ZOMBIE, "the worker lives on"


def test_a_gloo_group_this_package_starts_is_destroyed_at_exit(monkeypatch):
    """Left to the interpreter's shutdown, gloo's threads can abort a process that finished
    before its peers (SIGABRT; torchrun then fails the run): the group is destroyed by an
    exit handler while Python is still whole, and the handler then leaves the GIL free for
    those threads.  A group someone else started is theirs."""
    calls = []
    initialized = [False]
    monkeypatch.setattr(dist, "is_initialized", lambda: initialized[0])
    monkeypatch.setattr(dist, "init_process_group", lambda backend: calls.append(backend))
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: calls.append("destroyed"))
    monkeypatch.setattr(atexit, "register", calls.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(distributed.time, "sleep", lambda seconds: calls.append(seconds))

    distributed.ProcessGroup()
    assert calls == ["gloo", distributed._destroy_process_group]
    initialized[0] = True
    distributed._destroy_process_group()
    # then the GIL stays free while gloo's worker threads let go of the last collective
    assert calls[-2:] == ["destroyed", distributed.GLOO_SETTLE_SECONDS]
    assert distributed.GLOO_SETTLE_SECONDS > 0
    calls.clear()
    distributed.ProcessGroup()  # started by someone else (accelerate, the user)
    assert calls == []


def test_processes_agree_on_the_smallest_token_budget():
    """Budgets from free GPU memory differ slightly between devices; all processes must
    still build the same batches."""
    agreed = common_batching(Batching(9000, 8), GatheredGroup([9000, 8912, 9104]))
    assert agreed == Batching(8912, 8)


# ------------------------------------------------- a failure on one process stops them all


class OneOfTwo:
    """Rank ``rank`` of 2, whose exchanges answer with its own part twice, except that the
    other process sends ``failure`` at exchange ``failing_at``; it records what this process
    sent.  Rank 0 scores a one-batch request itself (the first part gets the first batch),
    so that its run gets past the exchange of scores."""

    world_size, device = 2, "cpu"

    def __init__(
        self, failing_at: int = -1, failure: ProcessFailed | None = None, rank: int = 1
    ) -> None:
        self.failing_at, self.failure, self.rank = failing_at, failure, rank
        self.sent: list = []

    def all_gather_object(self, obj):
        self.sent.append(obj)
        other = self.failure if len(self.sent) - 1 == self.failing_at else obj
        return [obj, other] if self.rank == 0 else [other, obj]


def fail(*_args, **_kwargs):
    raise ValueError("no such text")


@pytest.mark.parametrize(
    ("step", "exchange"),
    [("distinct_jobs", 0), ("plan_work", 1), ("runner.launch", 1), ("assemble", 2), ("then", 2)],
)
def test_a_process_whose_step_fails_tells_the_others(tiny_bert_dir, monkeypatch, step, exchange):
    """Every step runs on each process alone between two exchanges (``then``, the token
    log, before the last); one that fails there must still join, with its error, the
    exchange the others wait in next, or they wait for ever (NCCL across nodes: until its
    timeout)."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    owner, _, name = step.rpartition(".")
    if step != "then":
        monkeypatch.setattr(scorer.runner if owner else scorer, name, fail)
    group = OneOfTwo(rank=0)
    with pytest.raises(ValueError, match="no such text"):
        score_shared(scorer, [("", "A cat sat.")], group, then=fail if step == "then" else None)
    assert len(group.sent) == exchange + 1
    assert isinstance(group.sent[-1], ProcessFailed)
    assert str(group.sent[-1]) == "Process 0 stopped: ValueError: no such text"


def test_processes_that_score_together_part_together(tiny_bert_dir):
    """Tokens, scores, then a last exchange that every step before it can fail into."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    group = OneOfTwo(rank=0)
    logged = []
    (score,) = score_shared(scorer, [("", "A cat sat.")], group, then=logged.extend)
    assert logged == [score] and len(group.sent) == 3 and group.sent[-1] is None


def test_a_broken_exchange_leaves_the_first_error_to_be_raised(tiny_bert_dir, monkeypatch):
    """Telling the others can fail too (a lost peer, a CUDA error): the error the user
    sees is still the step's own."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    monkeypatch.setattr(scorer, "distinct_jobs", fail)
    group = OneOfTwo()

    def broken(obj):
        raise RuntimeError("Connection closed by peer")

    group.all_gather_object = broken
    with pytest.raises(ValueError, match="no such text"):
        score_shared(scorer, [("", "A cat sat.")], group)


@pytest.mark.parametrize("exchange", [0, 1, 2])
def test_a_failure_on_another_process_stops_this_one(tiny_bert_dir, exchange):
    """Rank 1 reports a failure at the first exchange (tokens), the second (scores) or the
    last (its token log) to rank 0, which scores the one batch and so gets that far."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    failure = ProcessFailed("Process 1 stopped: ValueError: no such text")
    group = OneOfTwo(exchange, failure, rank=0)
    with pytest.raises(ProcessFailed, match="Process 1 stopped: ValueError: no such text"):
        score_shared(scorer, [("", "A cat sat.")], group)
    assert len(group.sent) == exchange + 1
    with pytest.raises(ProcessFailed):
        checked([9000, failure])


def test_a_process_that_fails_to_start_tells_the_others(tiny_bert_dir, tmp_path, monkeypatch):
    """Its token log refused (an earlier run's records in its own file), rank 1 stops; rank
    0 must not wait for it in the token budget's exchange."""
    group = OneOfTwo()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("pll_harness.lm.ProcessGroup", lambda: group)
    (tmp_path / "tokens.rank1.jsonl").write_text('{"text": "earlier"}\n')
    with pytest.raises(ValueError, match="already holds records"):
        PLLMaskedLM(pretrained=tiny_bert_dir, token_log=str(tmp_path / "tokens.jsonl"))
    (sent,) = group.sent
    assert isinstance(sent, ProcessFailed) and "already holds records" in str(sent)


def test_a_process_told_that_another_failed_to_start_leaves_no_empty_log(
    tiny_bert_dir, tmp_path, monkeypatch
):
    """Rank 0 opened its own token log before rank 1's failure reached it."""
    failure = ProcessFailed("Process 1 stopped: ValueError: already holds records")
    group = OneOfTwo(failing_at=0, failure=failure, rank=0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("pll_harness.lm.ProcessGroup", lambda: group)
    with pytest.raises(ProcessFailed, match="Process 1 stopped"):
        PLLMaskedLM(pretrained=tiny_bert_dir, token_log=str(tmp_path / "logs" / "tokens.jsonl"))
    assert list(tmp_path.iterdir()) == []


def test_a_token_log_that_cannot_be_written_tells_the_others(tiny_bert_dir, tmp_path, monkeypatch):
    """pll-mlm writes a process's token log inside the shared call (score_shared's then=),
    before its last exchange: written after it, a failure there would leave the others
    waiting in lm-eval's next collective."""
    group = OneOfTwo(rank=0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("pll_harness.lm.ProcessGroup", lambda: group)
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, token_log=str(tmp_path / "tokens.jsonl"))
    monkeypatch.setattr(lm.token_log, "write", fail)
    request = Instance("loglikelihood", doc={}, arguments=("", "A cat sat."), idx=0)
    with pytest.raises(ValueError, match="no such text"):
        lm.loglikelihood([request])
    assert isinstance(group.sent[-1], ProcessFailed)
    assert str(group.sent[-1]) == "Process 0 stopped: ValueError: no such text"


class Unprintable(ValueError):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def test_an_error_without_a_message_still_tells_the_others(tiny_bert_dir, monkeypatch):
    """An error whose message cannot be made is still sent, by its type: the others would
    otherwise wait for this process in the exchange."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")

    def unprintable(*_args, **_kwargs):
        raise Unprintable

    monkeypatch.setattr(scorer, "distinct_jobs", unprintable)
    group = OneOfTwo(rank=0)
    with pytest.raises(Unprintable):
        score_shared(scorer, [("", "A cat sat.")], group)
    (sent,) = group.sent
    assert isinstance(sent, ProcessFailed) and str(sent) == "Process 0 stopped: Unprintable"


class ThreadedGroup:
    """Rank ``rank`` of a group of threads that really exchange: each call waits for the
    others' call, and a call that meets another process's exchange of another number
    fails, as mismatched collectives would hang or mix data."""

    device = "cpu"

    def __init__(self, shared: dict, rank: int, world_size: int) -> None:
        self.shared, self.rank, self.world_size = shared, rank, world_size
        self.calls = 0

    def all_gather_object(self, obj):
        shared = self.shared
        shared["parts"][self.rank] = (self.calls, obj)
        self.calls += 1
        shared["sent"].wait(timeout=10)
        parts = list(shared["parts"])
        shared["read"].wait(timeout=10)
        numbers = {number for number, _ in parts}
        assert len(numbers) == 1, f"exchanges {numbers} met"
        return [part for _, part in parts]


STAGE = {None: 4, "distinct_jobs": 1, "runner.launch": 2, "assemble": 3, "then": 3}
"""The exchange (of 3) each failing step sends its failure in (4: none fails)."""


def run_one_process(scorer: PLLScorer, step: str | None, group: ThreadedGroup) -> tuple:
    """One process of the test below: fails in ``step`` (or not), then meets lm-eval's
    next collective; how its call ended and how many exchanges it made."""
    scorer = copy.copy(scorer)
    scorer.runner = copy.copy(scorer.runner)
    if step not in (None, "then"):
        owner, _, name = step.rpartition(".")
        setattr(scorer.runner if owner else scorer, name, fail)
    requests = [("", f"A cat sat {group.rank} times."), ("", "Dogs bark.")]
    return how_it_ended(scorer, requests, group, then=fail if step == "then" else None)


def how_it_ended(scorer: PLLScorer, requests: list, group: ThreadedGroup, then=None) -> tuple:
    """How one process's call ended, once it met lm-eval's next collective, and how many
    exchanges it made."""
    try:
        score_shared(scorer, requests, group, disable_tqdm=True, then=then)
        outcome = "scored"
    except ProcessFailed:
        outcome = "told"
    except ValueError:
        outcome = "failed"
    group.all_gather_object("lm-eval's next collective")
    return outcome, group.calls


def test_processes_failing_anywhere_make_the_same_exchanges(tiny_bert_dir):
    """Two processes, each failing in any step or in none, then lm-eval's next collective:
    every process makes the same exchanges, the ones that failed first raise their own
    error and the others ProcessFailed."""
    scorers = [PLLScorer.from_pretrained(tiny_bert_dir, device="cpu") for _ in range(2)]
    for steps in itertools.product(STAGE, repeat=2):
        shared = {"parts": [None, None], "sent": Barrier(2), "read": Barrier(2)}
        ended: list = [None, None]

        def process(rank: int, steps=steps, shared=shared, ended=ended) -> None:
            group = ThreadedGroup(shared, rank, 2)
            ended[rank] = run_one_process(scorers[rank], steps[rank], group)

        threads = [Thread(target=process, args=(rank,)) for rank in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        first = min(STAGE[step] for step in steps)
        calls = min(first, 3) + 1  # lm-eval's next collective included
        expected = [
            ("scored" if first == 4 else "failed" if STAGE[step] == first else "told", calls)
            for step in steps
        ]
        assert ended == expected, steps


def test_a_process_failing_in_a_later_part_stops_the_others(tiny_bert_dir):
    """Rank 0 fails planning its third part, after launching two: both processes make the
    same exchanges, rank 0 raises its own error and rank 1 ProcessFailed."""
    scorers = [PLLScorer.from_pretrained(tiny_bert_dir, device="cpu") for _ in range(2)]
    for scorer in scorers:
        scorer.parts_from = 1
    plan, plans = scorers[0].plan_work, []

    def failing_third(encodings):
        plans.append(len(encodings))
        if len(plans) == 3:
            fail()
        return plan(encodings)

    scorers[0].plan_work = failing_third
    shared = {"parts": [None, None], "sent": Barrier(2), "read": Barrier(2)}
    ended: list = [None, None]

    def process(rank: int) -> None:
        requests = [("", f"{rank} cats sat {i} times.") for i in range(30)]
        ended[rank] = how_it_ended(scorers[rank], requests, ThreadedGroup(shared, rank, 2))

    threads = [Thread(target=process, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(plans) == 3
    assert ended == [("failed", 3), ("told", 3)]


@pytest.mark.parametrize("parts_from", [None, 150, 161, 1000])
def test_processes_in_threads_equal_one_process_bit_for_bit(tiny_bert_dir, parts_from):
    """Three processes with uneven shares, a request in two of them, one with a single
    request padded as lm-eval pads shares (copies of its last request): the scores equal
    one process's given all the requests, bit for bit, whether the run is split into parts
    (150 of its 160 distinct requests: split, judged by every process's requests together,
    though each has fewer) or not (161: the padding and the request in two shares make 164
    requests but no more distinct ones; 1000; None: a CPU's)."""
    import random

    rng = random.Random(1)
    words = ["the", "cat", "dog", "sat", "on", "a", "mat", "who", "should", "derek", "hug"]
    pool = [
        (rng.choice(["", "Context:"]), f"{i} " + " ".join(rng.choices(words, k=rng.randint(1, 20))))
        for i in range(160)
    ]
    shares = [pool[:1] * 4, pool[1:100], pool[100:] + pool[5:6]]
    scorers = [PLLScorer.from_pretrained(tiny_bert_dir, device="cpu") for _ in shares]
    for scorer in scorers:
        scorer.parts_from = parts_from
    shared = {"parts": [None] * 3, "sent": Barrier(3), "read": Barrier(3)}
    out: list = [None] * 3

    def process(rank: int) -> None:
        group = ThreadedGroup(shared, rank, 3)
        out[rank] = score_shared(scorers[rank], shares[rank], group, disable_tqdm=True)

    threads = [Thread(target=process, args=(rank,)) for rank in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    requests = [request for share in shares for request in share]
    assert len(requests) == 164 and len(set(requests)) == 160
    one = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    one.parts_from = parts_from
    assert one.splits(len(set(requests))) == (parts_from == 150)
    single = one.score_requests(pool)
    got = [score for share in out for score in share]
    assert [score.text for score in got] == [continuation for _, continuation in requests]
    assert got == single[:1] * 4 + single[1:] + single[5:6]


class OneProcess:
    rank, world_size, device = 0, 1, "cpu"

    def all_gather_object(self, obj):
        return [obj]


class Bar(distributed.tqdm):
    """The progress bar, its count and total kept when it closes (tqdm closes at the end of
    its block and again when dropped)."""

    ended: ClassVar[list[tuple[float, float]]] = []

    def close(self) -> None:
        Bar.ended.append((self.n, self.total))
        super().close()


def test_a_shared_run_launches_its_first_part_before_the_last_is_planned(
    tiny_bert_dir, monkeypatch
):
    """Each part is launched once it is planned and dealt, not once all are (the device
    would wait for all planning).  The progress bar ends with the process's batches of
    every part as its count and total."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    scorer.parts_from = 1
    launched = threading.Event()
    launched_first: list[bool] = []
    plan, launch = scorer.plan_work, scorer.runner.launch
    n_parts, plans = len(PART_SHARES), []

    def plan_work(encodings):
        if len(plans) == n_parts - 1:
            launched_first.append(launched.is_set())
        plans.append(plan(encodings))
        return plans[-1]

    def first_launch(*args, **kwargs):
        launched.set()
        return launch(*args, **kwargs)

    monkeypatch.setattr(scorer, "plan_work", plan_work)
    monkeypatch.setattr(scorer.runner, "launch", first_launch)
    monkeypatch.setattr(distributed, "tqdm", Bar)
    Bar.ended.clear()
    requests = [("", f"{i} dogs sat on the mat.") for i in range(40)]
    got = score_shared(scorer, requests, OneProcess())
    assert len(plans) == n_parts and sum(len(work.slot_offsets) - 1 for work in plans) == 40
    assert launched_first == [True]
    one = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    one.parts_from = 1
    assert got == one.score_requests(requests)
    batches = sum(len(work.batches) for work in plans)
    assert set(Bar.ended) == {(batches, batches)} and batches > n_parts


def test_a_rank_logs_its_distinct_requests_not_lm_evals_padding(tiny_bert_dir, caplog):
    """lm-eval pads a shorter share with copies of its last request; the log line says
    how many texts the rank had to tokenize, which the copies do not add to."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    padded = [("", "A cat sat."), ("", "The dog ran."), ("", "The dog ran."), ("", "The dog ran.")]
    with caplog.at_level(logging.INFO, logger="lm_eval.pll_harness"):
        score_shared(scorer, padded, OneProcess(), disable_tqdm=True)
    assert "it tokenized its 2 distinct requests" in caplog.text


def _foreign_cache(path: Path) -> Path:
    """A --use_cache database that another model type filled: no record of its settings."""
    from sqlitedict import SqliteDict

    with SqliteDict(str(path), autocommit=True) as database:
        database["0" * 64] = (-1.0, True)
    return path


def test_a_process_whose_cache_is_refused_tells_the_others(tiny_bert_dir, tmp_path, monkeypatch):
    """--use_cache gives each process a database of its own, so one process can refuse its
    own alone: the others must hear it before their first request, not find the process
    gone in lm-eval's next collective (a gloo or NCCL error that names no cause)."""
    from lm_eval.api.model import CachingLM

    group = OneOfTwo()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("pll_harness.lm.ProcessGroup", lambda: group)
    lm = PLLMaskedLM(pretrained=tiny_bert_dir)
    sent = len(group.sent)
    with pytest.raises(ValueError, match="without a record of their settings"):
        CachingLM(lm, str(_foreign_cache(tmp_path / "cache_rank1.db")))
    assert len(group.sent) == sent + 1
    assert isinstance(group.sent[-1], ProcessFailed)
    assert "without a record of their settings" in str(group.sent[-1])


def test_a_process_told_that_another_refused_its_cache_stops(tiny_bert_dir, tmp_path, monkeypatch):
    """Rank 0's own database is fine; rank 1's refusal reaches it as the cache is handed
    over, and a run without a refusal makes the same one exchange."""
    from lm_eval.api.model import CachingLM

    monkeypatch.setenv("WORLD_SIZE", "2")
    failure = ProcessFailed("Process 1 stopped: ValueError: without a record of their settings")
    told = OneOfTwo(failing_at=1, failure=failure, rank=0)
    monkeypatch.setattr("pll_harness.lm.ProcessGroup", lambda: told)
    lm = PLLMaskedLM(pretrained=tiny_bert_dir)
    with pytest.raises(ProcessFailed, match="Process 1 stopped"):
        CachingLM(lm, str(tmp_path / "told_rank0.db"))
    fine = OneOfTwo(rank=0)
    monkeypatch.setattr("pll_harness.lm.ProcessGroup", lambda: fine)
    lm = PLLMaskedLM(pretrained=tiny_bert_dir)
    CachingLM(lm, str(tmp_path / "fine_rank0.db"))
    assert fine.sent[-1] is None and len(fine.sent) == len(told.sent)
