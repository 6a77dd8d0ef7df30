"""bench/gpu.sh: a failed installation stops the run, says so, and marks nothing ready."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT


def test_a_wheel_that_does_not_install_fails_the_install_step(tmp_path):
    """``install`` runs as an ``if`` condition, where ``set -e`` does not act: a failed pip
    install must still fail it, rather than mark a broken environment ready for every later
    call."""
    wheels, envs, out = tmp_path / "whl", tmp_path / "envs", tmp_path / "out"
    for kind in ("pll", "minicons"):
        (wheels / kind).mkdir(parents=True)
        (wheels / kind / "bogus-1.0-py3-none-any.whl").write_text("not a zip")
    env = {**os.environ, "WHEELS": str(wheels), "ENVS": str(envs), "OUT": str(out)}
    env["BUDGET_S"] = "0"
    done = subprocess.run(
        ["bash", "bench/gpu.sh", "sample"], cwd=REPO_ROOT, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "## install: FAILED" in (out / "summary.md").read_text()
    assert not (envs / "pll-venv" / "ready").exists()
    assert not (envs / "minicons-venv" / "ready").exists()


def test_a_package_missing_from_the_environment_is_named_and_the_steps_still_report(tmp_path):
    """The summary's version line must not stop the run: a python without the packages
    (here: without site-packages) is named MISSING, and each step still gets its line."""
    python = tmp_path / "python-without-site"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PLL_PYTHON": str(python), "MINICONS_PYTHON": str(python)}
    env |= {"OUT": str(out), "BUDGET_S": "0", "ENVS": str(tmp_path / "envs")}
    done = subprocess.run(
        ["bash", "bench/gpu.sh", "sample", "bf16"], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    summary = (out / "summary.md").read_text()
    assert "torch MISSING" in summary and "the environment's python failed" in summary
    assert "## sample: FAILED" in summary and "## bf16: FAILED" in summary


def _recording_python(tmp_path, fails: str = "") -> tuple[Path, Path]:
    """A stand-in python that records each call of bench/score_variants.py (with its
    PYTHONPATH and CUDA_MODULE_LOADING) instead of running it, failing those with the
    argument ``fails``, and runs everything else; and the file of the calls."""
    calls = tmp_path / "calls"
    python = tmp_path / "python"
    failing = f'  case " $* " in *" {fails} "*) exit 1 ;; esac\n' if fails else ""
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = bench/score_variants.py ]; then\n'
        f'  echo "PYTHONPATH=$PYTHONPATH CUDA_MODULE_LOADING=$CUDA_MODULE_LOADING $*" >> {calls}\n'
        f"{failing}"
        "  exit 0\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return python, calls


def _variants(tmp_path, python: Path, settings: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PLL_PYTHON": str(python), "MINICONS_PYTHON": str(python)}
    env |= {"OUT": str(tmp_path / "out"), "BUDGET_S": "120", "ENVS": str(tmp_path / "envs")}
    for name in ("CUDA_MODULE_LOADING", "PYTHONPATH", "BASELINE", "RESERVE", "EAGER", "PROFILE"):
        env.pop(name, None)
    return subprocess.run(
        ["bash", "bench/gpu.sh", "variants"], cwd=REPO_ROOT, env=env | settings,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _tags(lines: list[str]) -> list[str]:
    return [line.split("--tag ")[1].split()[0] if "--tag" in line else "" for line in lines]


def test_the_variants_step_runs_each_engine_and_warm_up_in_a_process_of_its_own(tmp_path):
    """``BASELINE`` runs the other revision's engine first (its folder first on the path),
    then ours; ``RESERVE=1`` adds the two allocators' warm-ups, ``EAGER=1`` a process with
    CUDA's module loading eager, ``WARM=S`` one after S seconds of tiny launches and
    ``PROFILE=1`` one with the calls under the CPU profiler, each with a tag of its own so
    that no result file overwrites another's, and all of them with the defaults alone (the
    profile's calls are the defaults')."""
    python, calls = _recording_python(tmp_path)
    settings = {"BASELINE": ".baseline", "RESERVE": "1", "EAGER": "1", "WARM": "20"}
    done = _variants(tmp_path, python, settings | {"PROFILE": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = calls.read_text().splitlines()
    settings = [line.split(" bench/score_variants.py ")[0] for line in lines]
    assert settings == [
        "PYTHONPATH=.baseline CUDA_MODULE_LOADING=",
        *["PYTHONPATH= CUDA_MODULE_LOADING="] * 3,
        "PYTHONPATH= CUDA_MODULE_LOADING=EAGER",
        *["PYTHONPATH= CUDA_MODULE_LOADING="] * 2,
    ]
    assert all("--defaults-only" in line for line in lines[:6])
    tags = ["baseline", "", "reserve", "pinned", "eager-modules", "warm-launches", "host-profile"]
    assert _tags(lines) == tags
    assert "--reserve" in lines[2] and "--pin" in lines[3]
    assert [("--warm-seconds 20" in line) for line in lines] == [False] * 5 + [True, False]
    assert [("--host-profile" in line) for line in lines] == [False] * 6 + [True]


def test_a_failed_host_profile_fails_the_step_after_the_defaults_ran(tmp_path):
    """``PROFILE=1`` alone: the default's calls alone, then the profile in a process of
    its own, whose failure marks the step failed without taking the defaults' run away."""
    python, calls = _recording_python(tmp_path, fails="--host-profile")
    done = _variants(tmp_path, python, {"PROFILE": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = calls.read_text().splitlines()
    assert _tags(lines) == ["", "host-profile"]
    assert "--defaults-only" in lines[0] and "--host-profile" not in lines[0]
    assert "--host-profile" in lines[1]
    assert "## variants: FAILED" in (tmp_path / "out" / "summary.md").read_text()
