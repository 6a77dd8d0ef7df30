"""Helpers for tests that drive the real lm-eval CLI in a subprocess, offline."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

BIN = Path(sys.executable).parent
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_checked(
    args: list[str], cwd: Path, timeout: float = 900, **extra_env: str
) -> subprocess.CompletedProcess:
    """Run a command offline; fail the test with the end of its output if it fails or runs
    past ``timeout`` seconds (processes that wait for each other forever), which ends the
    command and every process it started (:func:`kill_all`)."""
    env = {**os.environ, **OFFLINE, **extra_env}
    pipe = subprocess.PIPE
    with subprocess.Popen(
        args, cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_all(process.pid)
            stdout, stderr = process.communicate()
            raise AssertionError(f"ran past {timeout} s: {stderr[-6000:]}") from None
    assert process.returncode == 0, stdout[-3000:] + stderr[-6000:]
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def kill_all(pid: int) -> None:
    """SIGKILL process ``pid``'s group and every process it started.  torchrun starts each
    worker in a session of its own, out of reach of its group; a worker left running would
    also hold the output pipes open, so that reading them waits for it to end."""
    try:
        started = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    os.killpg(pid, signal.SIGKILL)
    for child in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(started, timeout=10)


def write_pair_task(folder: Path, task: str, pairs: list[tuple[str, str]]) -> None:
    """A two-choice task over (good, bad) pairs, scored by lm-eval's own ``acc``."""
    rows = [{"good": good, "bad": bad} for good, bad in pairs]
    body = """output_type: multiple_choice
doc_to_text: ""
doc_to_choice: "{{[good, bad]}}"
doc_to_target: 0
metric_list:
  - metric: acc
"""
    _write_task(folder, task, rows, body)


def write_rolling_task(folder: Path, task: str, texts: list[str]) -> None:
    """A perplexity task over ``texts`` (``loglikelihood_rolling``, as wikitext)."""
    body = """output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
metric_list:
  - metric: word_perplexity
"""
    _write_task(folder, task, [{"text": text} for text in texts], body)


def _write_task(folder: Path, task: str, rows: list[dict], body: str) -> None:
    """``task``'s rows as a JSONL file, and its YAML: the data's header, then ``body``."""
    data = folder / f"{task}.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    header = f"""task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
"""
    (folder / f"{task}.yaml").write_text(header + body)
