"""The advice for a CPU that other work keeps busy: as a model loads (the load average)
and while it scores (the CPU time others take on this process's cores)."""

from __future__ import annotations

import logging
import os

import pytest

from pll_harness import busy_cpu
from pll_harness.scorer import PLLScorer

TICKS = os.sysconf("SC_CLK_TCK")


@pytest.fixture
def two_spinning_threads(monkeypatch):
    """A process on cores 0 and 1 with two torch threads that spin, not yet warned."""
    monkeypatch.setattr(busy_cpu, "_warned", False)
    monkeypatch.setattr(busy_cpu.torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(busy_cpu.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(busy_cpu.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)  # one process, not a launch's rank


def test_a_busy_cpu_gets_advice_once(two_spinning_threads, monkeypatch, caplog):
    monkeypatch.setattr(busy_cpu.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    with caplog.at_level(logging.WARNING):
        busy_cpu.warn_if_cpu_is_busy()
    assert "CPU is busy" not in caplog.text
    monkeypatch.setattr(busy_cpu.os, "getloadavg", lambda: (5.5, 5.0, 4.0))
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    with caplog.at_level(logging.WARNING):
        busy_cpu.warn_if_cpu_is_busy()
    assert "CPU is busy" not in caplog.text
    monkeypatch.delenv("OMP_WAIT_POLICY")
    with caplog.at_level(logging.WARNING):
        busy_cpu.warn_if_cpu_is_busy()
        busy_cpu.warn_if_cpu_is_busy()
    assert caplog.text.count("CPU is busy (load average 5.5 on 2 cores)") == 1
    assert "OMP_WAIT_POLICY=PASSIVE" in caplog.text


def proc_stat(per_core_ticks: dict[int, int]) -> str:
    """/proc/stat with ``ticks`` spread over user, system and steal of each core (and
    idle, iowait, guest fields that must not count)."""
    lines = ["cpu  999 999 999 999 999 999 999 999 0 0"]
    for core, ticks in per_core_ticks.items():
        user, system, steal = ticks // 2, ticks // 4, ticks - ticks // 2 - ticks // 4
        lines.append(f"cpu{core} {user} 0 {system} 5000 70 0 0 {steal} 33 0")
    lines += ["intr 123 4 5", "ctxt 98", "cpu_extra 1"]
    return "\n".join(lines) + "\n"


def test_busy_seconds_count_only_this_process_cores_and_no_idle_time():
    text = proc_stat({0: 400, 1: 100, 2: 10_000})
    assert busy_cpu.busy_seconds(text, {0, 1}) == pytest.approx(500 / TICKS)
    assert busy_cpu.busy_seconds(text, {2}) == pytest.approx(10_000 / TICKS)


def test_the_real_proc_stat_is_read_where_there_is_one():
    text = busy_cpu._read_proc_stat()
    if text is None:
        pytest.skip("no /proc/stat here (not Linux)")
    assert busy_cpu.busy_seconds(text, busy_cpu._cores()) > 0


class FakeMachine:
    """A clock, /proc/stat and this process's CPU time, moved on by hand."""

    def __init__(self, monkeypatch) -> None:
        self.now, self.busy_ticks, self.own = 100.0, 0, 0.0
        monkeypatch.setattr(busy_cpu, "monotonic", lambda: self.now)
        monkeypatch.setattr(busy_cpu, "_own_seconds", lambda: self.own)
        monkeypatch.setattr(
            busy_cpu,
            "_read_proc_stat",
            lambda: proc_stat({0: self.busy_ticks // 2, 1: self.busy_ticks - self.busy_ticks // 2}),
        )

    def run(self, seconds: float, ours: float, others: float) -> None:
        """``seconds`` pass with ``ours`` and ``others`` cores' worth of work."""
        self.now += seconds
        self.own += ours * seconds
        self.busy_ticks += round((ours + others) * seconds * TICKS)

    def score(
        self, watch: busy_cpu.BusyCPUWatch, ours: float, others: float, steps: int = 30
    ) -> None:
        """One run of ``steps`` batches of a second each, watched as the runner watches."""
        watch.resume()
        for _ in range(steps):
            self.run(1.0, ours=ours, others=others)
            watch.check()


@pytest.mark.parametrize(
    ("others", "warned"),
    [(0.0, False), (0.3, False), (0.8, True), (1.5, True)],
)
def test_the_watch_warns_once_when_others_take_the_cores_under_the_scoring(
    two_spinning_threads, monkeypatch, caplog, others, warned
):
    machine = FakeMachine(monkeypatch)
    watch = busy_cpu.BusyCPUWatch(every_s=10.0)
    with caplog.at_level(logging.WARNING):
        watch.resume()
        for _ in range(30):  # batches of 0.5 s; the watch reads the files every second
            machine.run(0.5, ours=2.0 - others, others=others)
            watch.check()
    assert caplog.text.count("CPU is busy") == (1 if warned else 0)
    if warned:
        assert f"other work took {others:.1f} of the 2 cores while this process scored" in (
            caplog.text
        )


def test_the_watch_holds_nothing_against_time_this_process_spent_waiting(
    two_spinning_threads, monkeypatch, caplog
):
    """Between two calls (a notebook, lm-eval building requests) other work may take the
    cores without slowing the scoring: only the time from resume to the last check counts."""
    machine = FakeMachine(monkeypatch)
    watch = busy_cpu.BusyCPUWatch(every_s=10.0)
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            watch.resume()
            for _ in range(8):
                machine.run(1.0, ours=2.0, others=0.0)
                watch.check()
            machine.run(60.0, ours=0.0, others=2.0)  # waiting while others work
    assert "CPU is busy" not in caplog.text


def test_the_watch_leaves_threads_that_do_not_spin_alone(two_spinning_threads, monkeypatch, caplog):
    """Threads that wait passively, or one thread (set after the scorer was made), do not
    spin against other work."""
    machine = FakeMachine(monkeypatch)
    watch = busy_cpu.BusyCPUWatch(every_s=10.0)
    watch.resume()
    machine.run(1.0, ours=2.0, others=0.0)
    watch.check()
    monkeypatch.setattr(busy_cpu.torch, "get_num_threads", lambda: 1)
    with caplog.at_level(logging.WARNING):
        machine.score(
            watch, ours=0.2, others=1.8
        )  # more than the core one thread leaves free, plus half a core
    monkeypatch.setattr(busy_cpu.torch, "get_num_threads", lambda: 2)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    with caplog.at_level(logging.WARNING):
        machine.score(watch, ours=1.0, others=1.0)
    assert "CPU is busy" not in caplog.text


def test_scoring_on_the_cpu_is_watched(two_spinning_threads, monkeypatch, caplog, tiny_bert_dir):
    """The runner resumes the watch as it starts and checks it after every batch."""
    machine = FakeMachine(monkeypatch)

    def a_busy_clock() -> float:
        machine.run(20.0, ours=1.0, others=1.0)  # every look: 20 s of sharing the cores
        return machine.now

    monkeypatch.setattr(busy_cpu, "monotonic", a_busy_clock)
    monkeypatch.setattr(busy_cpu.os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # idle as it loads
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu", max_batch_tokens=64)
    with caplog.at_level(logging.WARNING):
        scorer.score(["The cat sat on the mat.", "The keys to the cabinet are on the table."])
    assert caplog.text.count("other work took 1.0 of the 2 cores while this process") == 1


def test_more_threads_than_cores_is_not_other_work(two_spinning_threads, monkeypatch, caplog):
    """torch.set_num_threads(4) (or OMP_NUM_THREADS=4) on a process that may use 2 cores:
    its own threads fill the cores and nothing else runs, yet the threshold (cores - threads
    + 0.5) went below zero, so any run of 10 s warned that "other work took 0.0 of the 2
    cores"."""
    monkeypatch.setattr(busy_cpu.torch, "get_num_threads", lambda: 4)
    machine = FakeMachine(monkeypatch)
    watch = busy_cpu.BusyCPUWatch(every_s=10.0)
    with caplog.at_level(logging.WARNING):
        machine.score(watch, ours=2.0, others=0.0)
    assert "CPU is busy" not in caplog.text
    with caplog.at_level(logging.WARNING):
        machine.score(watch, ours=1.0, others=1.0)
    assert caplog.text.count("other work took 1.0 of the 2 cores") == 1


def test_the_load_average_of_a_larger_machine_is_not_held_against_a_few_cores(
    two_spinning_threads, monkeypatch, caplog
):
    """The load average counts every core of the machine (a container or a SLURM job sees
    its host's): a job given cores 0 and 1 of a 64-core node that other jobs load to 30
    was told its CPU was busy ("load average 30.0 on 2 cores") as every model loaded,
    though nothing may run on its two cores; the watch sees those while it scores."""
    monkeypatch.setattr(busy_cpu.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(busy_cpu.os, "getloadavg", lambda: (30.0, 30.0, 30.0))
    with caplog.at_level(logging.WARNING):
        busy_cpu.warn_if_cpu_is_busy()
    assert "CPU is busy" not in caplog.text
    monkeypatch.setattr(busy_cpu.os, "getloadavg", lambda: (70.0, 70.0, 70.0))
    with caplog.at_level(logging.WARNING):
        busy_cpu.warn_if_cpu_is_busy()
    assert "CPU is busy (load average 70.0 on 64 cores)" in caplog.text


def test_a_main_thread_bound_to_one_core_is_not_warned_about_its_own_work(
    two_spinning_threads, monkeypatch, caplog
):
    """OMP_PROC_BIND=true (or OMP_PLACES) binds the main thread to the first place as
    OpenMP starts, so the affinity read is one core while torch runs 2 threads: the main
    thread tokenizing alone on its core, torch idle, on an idle machine, was told "other
    work took -0.0 of the 1 cores"."""
    monkeypatch.setattr(busy_cpu.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    clock = {"now": 100.0, "core0": 0, "own": 0.0}
    monkeypatch.setattr(busy_cpu, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(busy_cpu, "_own_seconds", lambda: clock["own"])
    monkeypatch.setattr(busy_cpu, "_read_proc_stat", lambda: proc_stat({0: clock["core0"], 1: 0}))
    watch = busy_cpu.BusyCPUWatch(every_s=10.0)
    with caplog.at_level(logging.WARNING):
        watch.resume()
        for _ in range(30):  # the main thread works on core 0, nothing else runs
            clock["now"] += 1.0
            clock["own"] += 1.0
            clock["core0"] += TICKS
            watch.check()
    assert "CPU is busy" not in caplog.text


def test_the_ranks_of_one_launch_are_not_each_others_other_work(
    two_spinning_threads, monkeypatch, caplog
):
    """Under torchrun or accelerate with several processes on one machine, every rank's
    threads are the others' "other work": with OMP_NUM_THREADS = cores / processes, as
    README advises, the margin above the cores left free was half a core whatever the
    machine, and any noise warned each rank."""
    machine = FakeMachine(monkeypatch)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    watch = busy_cpu.BusyCPUWatch(every_s=10.0)
    with caplog.at_level(logging.WARNING):
        machine.score(watch, ours=2.0, others=2.0)
    assert "CPU is busy" not in caplog.text
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    with caplog.at_level(logging.WARNING):
        machine.score(watch, ours=2.0, others=2.0)
    assert "other work took 2.0 of the 2 cores" in caplog.text
