"""bench/demo_weights.sh: pll-demo's weights leave what the device tool sends, and return."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import REPO_ROOT

WEIGHTS = "pll_harness/models/pll-demo/model.safetensors"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def sent(repo: Path) -> set[str]:
    """What the device tool sends: tracked and untracked-not-ignored files."""
    return set(git(repo, "ls-files", "-co", "--exclude-standard").split())


def test_the_weights_stay_here_while_out_and_are_tracked_again_after(tmp_path):
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "bench" / "demo_weights.sh", repo / "bench")
    (repo / WEIGHTS).parent.mkdir(parents=True)
    (repo / WEIGHTS).write_bytes(b"weights")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("/.whl/\n")

    def run(verb: str) -> None:
        subprocess.run(["bash", str(repo / "bench" / "demo_weights.sh"), verb], check=True)

    run("out")
    run("out")  # twice: no error, one ignore line
    assert WEIGHTS not in sent(repo) and "bench/demo_weights.sh" in sent(repo)
    assert (repo / WEIGHTS).read_bytes() == b"weights"
    assert exclude.read_text().splitlines() == ["/.whl/", f"/{WEIGHTS}"]
    run("in")
    assert WEIGHTS in sent(repo)
    assert exclude.read_text().splitlines() == ["/.whl/"]
    assert git(repo, "status", "--porcelain") == ""


def test_without_a_verb_it_says_how_to_use_it():
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "bench" / "demo_weights.sh")], capture_output=True, text=True
    )
    assert done.returncode == 2 and "demo_weights.sh out" in done.stdout
