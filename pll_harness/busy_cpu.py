"""Telling the user, once, when other work keeps the CPU busy under this process's scoring.

torch runs one OpenMP thread per core and, by default, OpenMP threads spin while they wait
for each other; when the cores are taken, scoring then slows many-fold (on a shared 2-core
machine, 125-265 ms a sentence against 32-45 ms with passive waiting:
``scripts/bench_busy_cpu.py``).  The wait policy is read when OpenMP starts, too early for
this package to set it, and changing the thread count here would change float32 rounding
with the machine's load, so the choice is left to the user, who is told what to do.

Two checks share the one warning: the load average as a CPU model loads
(:func:`warn_if_cpu_is_busy`), and, while it scores, the CPU time that other work took on
this process's cores (:class:`BusyCPUWatch`): the load average cannot tell then, as this
process's own threads are in it.
"""

from __future__ import annotations

import logging
import os
from time import monotonic
from typing import NamedTuple

import torch

logger = logging.getLogger(f"lm_eval.{__name__}")

ADVICE = (
    "Start Python with OMP_WAIT_POLICY=PASSIVE (same scores), or with OMP_NUM_THREADS set to "
    "the cores you can have."
)

_warned = False

SAMPLE_EVERY_S = 1.0
"""How often :meth:`BusyCPUWatch.check`, called after every batch, reads ``/proc/stat``: a
file of a few kB per core, too much to parse after every small batch on a large machine."""


def _spinning_threads() -> int | None:
    """torch's thread count where its threads spin while they wait (two or more, and
    OpenMP's default wait policy), else None: nothing to warn about."""
    threads = torch.get_num_threads()
    if threads < 2 or os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
        return None
    return threads


def _ranks_here() -> int:
    """How many processes of one launch run on this machine (set by torchrun and
    accelerate; 1 when none launched this one)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def _cores() -> set[int]:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def _warn(what: str, threads: int) -> None:
    global _warned
    _warned = True
    logger.warning(
        "The CPU is busy (%s) and torch runs %d threads, which spin while they wait for each "
        "other: scoring can be several times slower. %s",
        what,
        threads,
        ADVICE,
    )


def warn_if_cpu_is_busy() -> None:
    """Once per process: say what to do when the load average, as a model loads, is above
    the machine's cores.  The load average counts the whole machine (a container's or a
    SLURM job's host), not the cores this process may use: held against those alone, a job
    given a few cores of a loaded node was warned whatever ran on its own cores, which
    :class:`BusyCPUWatch` sees as it scores."""
    threads = _spinning_threads()
    if _warned or threads is None or not hasattr(os, "getloadavg"):
        return
    cores = os.cpu_count() or len(_cores())
    load = os.getloadavg()[0]
    if load > cores:
        _warn(f"load average {load:.1f} on {cores} cores", threads)


def busy_seconds(stat: str, cores: set[int]) -> float:
    """CPU seconds spent on ``cores`` by anything (all processes, the kernel, and time the
    virtual machine's host took: steal), from the text of ``/proc/stat``."""
    ticks = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
            ticks += user + nice + system + irq + softirq + steal
    return ticks / os.sysconf("SC_CLK_TCK")


def _read_proc_stat() -> str | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            return handle.read()
    except OSError:  # not Linux
        return None


def _own_seconds() -> float:
    """CPU seconds this process has spent, all its threads together."""
    own = os.times()
    return own.user + own.system


class _Sample(NamedTuple):
    wall: float
    busy: float
    own: float


class BusyCPUWatch:
    """Watches one process's scoring on the CPU: every ``every_s`` seconds of scoring it
    compares the CPU time spent on this process's cores with this process's own, and warns
    (once per process, with :func:`warn_if_cpu_is_busy`) when other work took more than the
    cores torch's threads leave free, plus half a core.  Only time between :meth:`resume`
    and :meth:`check` counts, so that what others do while this process waits is not held
    against it.  Linux only (``/proc/stat``); elsewhere it does nothing."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self._threads: int | None = None
        self._cores = _cores()
        self._last: _Sample | None = None
        self._wall = self._others = 0.0

    def _sample(self) -> _Sample | None:
        stat = _read_proc_stat()
        if stat is None:
            return None
        return _Sample(monotonic(), busy_seconds(stat, self._cores), _own_seconds())

    def resume(self) -> None:
        """Scoring starts (again) here, with torch's thread count as it is now.  Not with
        several processes on this machine (``torchrun``, ``accelerate launch``): they share
        its cores by design, each rank's threads would be the others' "other work", and
        README's advice for them (``OMP_NUM_THREADS`` = cores / processes) is already the
        remedy."""
        self._threads = None if _ranks_here() > 1 else _spinning_threads()
        self._last = None if self._threads is None or _warned else self._sample()

    def check(self) -> None:
        """Count the scoring since the last sample (taken at most every
        :data:`SAMPLE_EVERY_S`, the first by :meth:`resume`); warn once enough of it shows
        that other work takes the cores."""
        if self._last is None or _warned or monotonic() - self._last.wall < SAMPLE_EVERY_S:
            return
        now = self._sample()
        if now is None:
            return
        self._wall += now.wall - self._last.wall
        self._others += (now.busy - self._last.busy) - (now.own - self._last.own)
        self._last = now
        if self._wall < self.every_s:
            return
        others = self._others / self._wall
        self._wall = self._others = 0.0
        free = len(self._cores) - min(self._threads, len(self._cores))  # never below none
        if others > free + 0.5:
            _warn(
                f"other work took {others:.1f} of the {len(self._cores)} cores while this "
                "process scored: other processes, or this virtual machine's host",
                self._threads,
            )
