"""bench/gpu.sh: a failed installation stops the run, says so, and marks nothing ready."""

from __future__ import annotations

import os
import subprocess

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
