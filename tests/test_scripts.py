"""bench/ and scripts/: every script still starts, and the parts that run in no other test
still work.

The scripts import the package's internals, which are refactored more often than the
scripts are run: ``--help`` of every Python script fails when an import no longer resolves or
its argument parser no longer builds (and a script without a parser, which would run the
whole benchmark or rebuild a committed fixture instead, fails on the missing usage text).
Shell scripts get ``bash -n``, and those in scripts/ a ``--help`` that changes nothing. What
the benchmarks compute is checked on the committed tiny BERT: ``pll_bench``'s engine worker
reads the planner's and runner's internals to count copies and time the steps.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Event
from types import ModuleType

import pytest
import torch
from conftest import REPO_ROOT, TINY_BERT_DIR

from pll_harness.metrics import PLL_METRICS

PYTHON_SCRIPTS = sorted([*REPO_ROOT.glob("bench/*.py"), *REPO_ROOT.glob("scripts/*.py")])
SHELL_SCRIPTS = sorted([*REPO_ROOT.glob("bench/*.sh"), *REPO_ROOT.glob("scripts/*.sh")])
# scripts/*.sh whose --help is safe to run (bench/gpu*.sh install or download).
SHELL_HELP = ["check_lm_eval_versions.sh", "evaluate_demo_model.sh", "make_minicons_venv.sh"]
# Runs in minicons' venv (transformers<5, no pll_harness): scripts/make_minicons_venv.sh.
MINICONS_PYTHON = REPO_ROOT / "bench" / ".minicons-venv" / "bin" / "python"
IN_MINICONS_VENV = {"minicons_reference.py"}
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
DEMO_METRICS = sorted(PLL_METRICS)


def _help(script: Path) -> subprocess.CompletedProcess[str] | None:
    python = MINICONS_PYTHON if script.name in IN_MINICONS_VENV else Path(sys.executable)
    if not python.is_file():
        return None
    return subprocess.run(
        [str(python), str(script), "--help"], cwd=REPO_ROOT, env=OFFLINE,
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


@pytest.fixture(scope="module")
def help_runs() -> dict[str, subprocess.CompletedProcess[str] | None]:
    """Every Python script's ``--help``, four at a time: most of each is importing torch,
    transformers or lm-eval."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = pool.map(_help, PYTHON_SCRIPTS)
        return {str(s.relative_to(REPO_ROOT)): r for s, r in zip(PYTHON_SCRIPTS, runs, strict=True)}


@pytest.mark.parametrize("script", [str(s.relative_to(REPO_ROOT)) for s in PYTHON_SCRIPTS])
def test_every_python_script_answers_help(help_runs, script):
    done = help_runs[script]
    if done is None:
        pytest.skip(f"no {MINICONS_PYTHON.relative_to(REPO_ROOT)} (scripts/make_minicons_venv.sh)")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage:" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("script", [str(s.relative_to(REPO_ROOT)) for s in SHELL_SCRIPTS])
def test_every_shell_script_parses(script):
    done = subprocess.run(["bash", "-n", script], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", SHELL_HELP)
def test_shell_scripts_in_scripts_answer_help_and_do_nothing_else(name, tmp_path):
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / name), "--help"], cwd=tmp_path,
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"scripts/{name}" in done.stdout
    assert not any(tmp_path.iterdir())


def _load_script(path: Path) -> ModuleType:
    """The script at ``path`` as a module named after its file (a bench script that imports
    pll_bench needs bench/ on sys.path)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_pll_bench() -> ModuleType:
    return _load_script(REPO_ROOT / "bench" / "pll_bench.py")


def test_micro_benchmarks_write_into_a_folder_that_does_not_exist_yet(tmp_path):
    """host_steps.py and allocator_settings.py write their table last, after minutes of
    measuring: a new ``--out-dir`` must not lose it."""
    out = _load_pll_bench().write_lines(tmp_path / "new" / "folder", "steps", ["| a |", "| b |"])
    assert out.parent == tmp_path / "new" / "folder"
    assert out.read_text() == "| a |\n| b |\n"


def test_pll_bench_engine_worker_counts_the_copies_the_plan_runs():
    """The worker times the engine's steps through its internals and counts each text's
    masked copies from the plan, which the FLOP count rests on. Under ``whole_word`` the
    pieces of a word share one copy, so a text has a copy per word and a target per piece,
    and the tokens run are the copies' lengths summed (no padding). Exact integers; the
    scores must equal a plain ``score()``'s to 1e-5 nats."""
    from transformers import AutoTokenizer

    from pll_harness import PLLScorer

    texts = ["The hooligan wrecked the souvenir.", "The traveler lost the souvenir.", "Dogs bark."]
    tokenizer = AutoTokenizer.from_pretrained(TINY_BERT_DIR)
    words = [len({w for w in tokenizer(t).word_ids() if w is not None}) for t in texts]
    threads = torch.get_num_threads()
    spec = {"model": str(TINY_BERT_DIR), "texts": texts, "threads": threads, "device": "cpu"}
    spec |= {"metric": "whole_word", "dtype": "float32", "long_tokens": 48}
    out = _load_pll_bench().worker_ours(spec)
    assert torch.get_num_threads() == threads
    assert out["copies"] == words and out["copies"] != out["targets"]
    phases = out["phases"]
    assert phases["copies"] == sum(words)
    run = zip(out["copies"], out["lengths"], strict=True)
    assert phases["tokens"] == sum(copies * length for copies, length in run)
    assert {"tokenize", "plan", "run", "assemble", "answers"} <= phases.keys()
    long = out["long"]
    assert 0 < long["targets_scored"] <= long["targets_total"] and long["length"] <= 64
    plain = PLLScorer.from_pretrained(str(TINY_BERT_DIR), pll_metric="whole_word").score(texts)
    assert out["scores"] == pytest.approx([s.logprob for s in plain], abs=1e-5)


def test_bench_data_parallel_reads_the_line_each_rank_logs(caplog):
    """scripts/bench_data_parallel.py reads each rank's figures from its log line: a line
    it no longer matches would leave its report without ranks, silently."""
    from pll_harness import PLLScorer
    from pll_harness.distributed import score_shared

    class OneProcess:
        rank, world_size, device = 0, 1, "cpu"

        def all_gather_object(self, obj):
            return [obj]

    module = _load_script(REPO_ROOT / "scripts" / "bench_data_parallel.py")
    group = OneProcess()
    scorer = PLLScorer.from_pretrained(str(TINY_BERT_DIR))
    with caplog.at_level("INFO", logger="lm_eval.pll_harness.distributed"):
        score_shared(scorer, [("", "A cat sat."), ("", "Dogs bark.")], group, disable_tqdm=True)
    (line,) = module.rank_lines(caplog.text)
    assert line["rank"] == 0 and line["own_requests"] == 2
    assert line["batches"] == line["all_batches"] > 0 and line["cost"] == line["all_cost"] > 0
    assert {"tokenize_s", "pool_tokens_s", "plan_and_score_s", "pool_scores_and_assemble_s"} < set(
        line
    )


def test_the_stand_in_device_gets_every_batch_and_gives_its_scores_back(monkeypatch):
    """parts_overlap.py's stand-in device: every token the plans feed the model reaches its
    thread, and each part's results after its batches; nothing is left queued when
    ``score()`` returns, and the scores it writes (0) come back, with the parts in turn
    and with the next one prepared ahead."""
    from pll_harness import PLLScorer

    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    module = _load_script(REPO_ROOT / "bench" / "parts_overlap.py")
    scorer = PLLScorer.from_pretrained(str(TINY_BERT_DIR), max_batch_tokens=64)
    scorer.parts_from = 1
    texts = [f"The hooligan wrecked souvenir number {i}." for i in range(40)]
    _, jobs = scorer.distinct_jobs([("", text) for text in texts])
    works = [scorer.plan_work(jobs.part(k).encodings) for k in range(len(jobs.bounds) - 1)]
    tokens = sum(work.cost(batch) for work in works for batch in work.batches)
    device = module.StandInDevice(seconds_per_token=1e-6)
    sent = []
    put = device.queue.put
    monkeypatch.setattr(device.queue, "put", lambda seconds: (sent.append(seconds), put(seconds)))
    device.install(scorer)
    for ahead in (False, True):
        sent.clear()
        scorer.prepare_ahead = ahead
        scores = scorer.score(texts)
        assert [score.logprob for score in scores] == [0.0] * len(texts)
        assert device.queue.unfinished_tasks == 0
        batches = [seconds for seconds in sent if isinstance(seconds, float)]
        assert sum(batches) == pytest.approx(1e-6 * tokens) and len(batches) > 3
        assert len(sent) - len(batches) == len(works) and not isinstance(sent[0], Event)
        assert isinstance(sent[-1], Event)


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{bin_dir}/calls"\n{body}')
    path.chmod(0o755)


RESULTS_WRITTEN = (
    '{"config_source": "/home/me/checkout/pll_harness/tasks/blimp_pll/blimp.yaml", '
    '"other": "/home/me/notes.txt"}'
)


def _evaluate_demo_model(tmp_path: Path, *args: str) -> tuple[Path, list[str]]:
    """Run a copy of scripts/evaluate_demo_model.sh in a repository of its own under
    ``tmp_path``, with stand-ins for lm_eval (writes one results file, ``RESULTS_WRITTEN``)
    and pll-harness; return that repository and the commands the stand-ins received."""
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    (repo / "scripts").mkdir(parents=True)
    bin_dir.mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "evaluate_demo_model.sh", repo / "scripts")
    (bin_dir / "results.json").write_text(RESULTS_WRITTEN)
    _stub(
        bin_dir, "lm_eval",
        'while [ $# -gt 0 ]; do [ "$1" = --output_path ] && out=$2; shift; done\n'
        f'mkdir -p "$out/pll-demo" && cp "{bin_dir}/results.json" '
        '"$out/pll-demo/results_new.json"\n',
    )  # fmt: skip
    _stub(bin_dir, "pll-harness", "")
    # The script reads the metrics through `python`: this one, which has pll_harness.
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    env = {**os.environ, "PATH": path}
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "evaluate_demo_model.sh"), *args], cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return repo, (bin_dir / "calls").read_text().splitlines()


def _results(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("results_*.json"))


def test_evaluate_demo_model_replaces_the_earlier_results_it_updates(tmp_path):
    """The model card's update step re-runs the script into the committed folder: lm-eval
    adds a file per run, so without clearing, the folder and its leaderboard would hold the
    old run beside the new one."""
    old = tmp_path / "repo" / "results" / "pll-demo" / "word_l2r" / "pll-demo" / "results_old.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    repo, calls = _evaluate_demo_model(tmp_path, "20")
    out = repo / "results" / "pll-demo"
    assert _results(out) == [f"{m}/pll-demo/results_new.json" for m in DEMO_METRICS]
    assert sum("--limit 20 --output_path" in call for call in calls) == 4
    assert calls[-1] == "pll-harness compare results/pll-demo -o results/pll-demo"


def test_evaluate_demo_model_keeps_no_machine_folder_in_the_task_paths(tmp_path):
    """lm-eval writes each task's YAML with its absolute path; the committed results keep
    it from ``pll_harness/`` on, and leave other text alone."""
    repo, _ = _evaluate_demo_model(tmp_path, "20")
    for metric in DEMO_METRICS:
        written = repo / "results" / "pll-demo" / metric / "pll-demo" / "results_new.json"
        assert json.loads(written.read_text()) == {
            "config_source": "pll_harness/tasks/blimp_pll/blimp.yaml",
            "other": "/home/me/notes.txt",
        }


def test_evaluate_demo_model_writes_to_out_relative_to_the_callers_folder(tmp_path):
    repo, calls = _evaluate_demo_model(tmp_path, "all", "elsewhere")
    assert _results(tmp_path / "elsewhere") == [
        f"{m}/pll-demo/results_new.json" for m in DEMO_METRICS
    ]
    assert not (repo / "results").exists()
    assert not any("--limit" in call for call in calls)


def test_pll_bench_report_lists_the_profiled_gpu_kernels():
    """The GPU step's report must render its kernel table: a crash there costs a device
    call."""
    pll_bench = _load_pll_bench()
    committed = REPO_ROOT / "bench" / "results" / "amd-epyc-2cpu-2026-11-23-nano-all.json"
    report = json.loads(committed.read_text())
    phases = report["rows"][0]["phases"]
    phases["gpu_busy_share_of_run"] = 0.99
    phases["gpu_top_kernels"] = [["ampere_bf16_s16816gemm", 4.25], ["vectorized_elementwise", 1.5]]
    text = pll_bench.markdown(report)
    assert "| 99% |" in text
    assert "| `ampere_bf16_s16816gemm` | 4.250 |" in text


def test_pll_bench_gpu_idle_counts_the_host_gaps_between_batches():
    """Batch 2 begins 0.5 s after the GPU finished batch 1, batch 3 while batch 2 runs."""
    idle = _load_pll_bench().gpu_idle([0.25, 1.0, 2.0, 2.5], [1.0, 1.5, 3.0, 3.5], 4.0)
    assert idle["before_first"] == 0.25
    assert idle["between"] == pytest.approx(0.5)
    assert idle["after_last"] == pytest.approx(0.5)
    assert idle["largest_gaps"] == [[2, pytest.approx(0.5), 2.0]]
    assert "in_batches" not in idle


def test_pll_bench_gpu_idle_counts_the_gpu_time_inside_batches():
    """Batch 2's launch ends after the GPU ran out of batch 1's work: it reached batch 2 at
    1.0 and finished it at 1.75, time inside the batch that holds that wait."""
    idle = _load_pll_bench().gpu_idle(
        [0.25, 0.5], [1.0, 1.75], 2.0, reached=[0.25, 1.0], launched=[0.5, 1.5]
    )
    assert idle["between"] == 0
    assert idle["in_batches"] == pytest.approx(1.5)
    assert idle["per_batch"] == [[0.25, 0.5, 0.25, 1.0], [0.5, 1.5, 1.0, 1.75]]


def test_pll_bench_times_each_batch_of_the_timed_score_and_reports_the_gaps():
    """The timeline wraps the runner's batches for one ``score()`` and unwraps them after;
    here a stand-in for torch.cuda whose events complete when recorded, on the CPU."""
    pll_bench = _load_pll_bench()
    from pll_harness import PLLScorer

    scorer = PLLScorer.from_pretrained(str(TINY_BERT_DIR), device="cpu", max_batch_tokens=64)
    texts = ["The hooligan wrecked the souvenir.", "Dogs bark.", "A cat sat on the mat."]
    wall, results, idle = pll_bench._timeline_score(
        scorer, texts, types.SimpleNamespace(cuda=_STAND_IN_CUDA)
    )
    assert [r.logprob for r in results] == [r.logprob for r in scorer.score(texts)]
    assert "_score_batch" not in vars(scorer.runner)
    assert idle["batches"] > 1 and 0 < idle["before_first"] < wall
    assert 0 <= idle["between"] < wall and 0 < idle["after_last"] < wall
    assert len(idle["per_batch"]) == idle["batches"]
    for begun, launched, reached, finished in idle["per_batch"]:  # to the microsecond
        assert begun < launched and begun <= reached + 1e-6 and reached < finished
    assert 0 < idle["in_batches"] < wall
    report = json.loads(
        (REPO_ROOT / "bench" / "results" / "amd-epyc-2cpu-2026-11-23-nano-all.json").read_text()
    )
    report["rows"][0]["phases"]["gpu_idle"] = idle
    report["rows"][0]["again"] = [{"seconds": 1.5, "gpu_idle": None}]
    text = pll_bench.markdown(report)
    assert f"between batches, {idle['after_last']:.2f} s after" in text
    assert f"The GPU spent {idle['in_batches']:.2f} s inside batches" in text
    assert "`score()` call 2 in the same process (word_l2r, float32): 1.50 s." in text


class _RecordedEvent:
    """A stand-in CUDA event, on the CPU: complete when recorded."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, other: _RecordedEvent) -> float:
        return (other.at - self.at) * 1000


_STAND_IN_CUDA = types.SimpleNamespace(
    Event=_RecordedEvent, synchronize=lambda: None, reset_peak_memory_stats=lambda: None
)


def test_score_variants_times_each_setting_and_restores_it(monkeypatch):
    """Every variant of score_variants.py runs the same scoring with a timeline, in a run
    split into parts prepared ahead (as on a GPU), and leaves the interpreter's switch
    interval, the collector and the scorer as they were; ``--defaults-only`` runs the
    default's three calls, ``--reserve`` holds one block of a full batch's activations
    on the scorer's device, and ``--pin`` one pinned host block of each power of two."""
    from pll_harness import PLLScorer
    from pll_harness.scorer import activation_bytes_per_token

    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    module = _load_script(REPO_ROOT / "bench" / "score_variants.py")
    scorer = PLLScorer.from_pretrained(str(TINY_BERT_DIR), device="cpu", max_batch_tokens=64)
    scorer.parts_from, scorer.prepare_ahead = 1, True
    texts = [f"The hooligan wrecked souvenir number {i}." for i in range(40)]
    interval, collecting = sys.getswitchinterval(), gc.isenabled()
    rows = module.measure(scorer, texts, types.SimpleNamespace(cuda=_STAND_IN_CUDA))
    assert [row["variant"] for row in rows] == [name for name, _ in module.VARIANTS]
    assert len({row["batches"] for row in rows}) == 1 and rows[0]["batches"] > len(module.VARIANTS)
    assert all(0 < row["longest_launch"] < row["wall"] for row in rows)
    assert (sys.getswitchinterval(), gc.isenabled()) == (interval, collecting)
    assert scorer.prepare_ahead and "_score_batch" not in vars(scorer.runner)
    text = module.markdown(
        {"device": "cpu", "model": "tiny", "sentences": 40, "kernel_variants": 0, "rows": rows}
    )
    assert text.count("\n| ") == 2 * (2 + len(module.VARIANTS))  # the calls, then the host
    assert all(row["host"]["process"]["user_s"] > 0 for row in rows)
    assert len(module.measure(scorer, texts, types.SimpleNamespace(cuda=_STAND_IN_CUDA), True)) == 3

    taken = []
    stand_in = types.SimpleNamespace(
        uint8=torch.uint8, empty=lambda size, **kw: taken.append((size, kw["device"]))
    )
    size = module.reserve(scorer, stand_in)
    assert taken == [(size, scorer.runner.device)]
    assert size == scorer.batching.max_batch_tokens * activation_bytes_per_token(scorer.model)

    pinned = []
    stand_in.empty = lambda size, **kw: pinned.append((size, kw["pin_memory"]))
    assert module.warm_pinned(stand_in) == sum(module.PINNED_SIZES)
    assert pinned == [(size, True) for size in module.PINNED_SIZES]
    # Every power of two a full batch's input ids take, up to a whole BLiMP run's scores.
    assert module.PINNED_SIZES[-1] >= 1_243_264 * 4


def test_lock_stalls_names_the_step_and_lines_that_held_the_lock(monkeypatch):
    """A step that holds the interpreter lock in one long call shows up as a stall of that
    step, placed at the script's own line; every part's steps are run."""
    from pll_harness import PLLScorer

    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    module = _load_script(REPO_ROOT / "bench" / "lock_stalls.py")
    scorer = PLLScorer.from_pretrained(str(TINY_BERT_DIR), device="cpu")
    texts = [f"The hooligan wrecked souvenir number {i}." for i in range(40)]
    assemble = scorer.assemble

    def holding(*args):
        sorted(range(1_000_000), key=int)  # one C call: the lock is not released
        return assemble(*args)

    with module.Ticker(threading.get_ident(), 1.0) as ticker:  # first-call costs
        module.host_steps(scorer, texts, ticker)
    monkeypatch.setattr(scorer, "assemble", holding)
    with module.Ticker(threading.get_ident(), 0.05) as ticker:
        module.host_steps(scorer, texts, ticker)
    held = [step for _, step, _ in ticker.stalls if step.endswith(": assemble")]
    assert len(held) >= 4 and max(ticker.stalls)[1].endswith(": assemble")
    assert all("test_scripts" not in where for _, _, where in ticker.stalls)
    report = {"machine": "cpu", "model": "tiny", "sentences": 40, "seconds": 1.0}
    text = module.markdown({**report, "threshold_ms": 50, "stalls": ticker.stalls})
    assert "| part 0: assemble |" in text and "Longest stalls:" in text


def test_import_times_reads_a_real_importtime_log_and_its_package_rows_add_up(tmp_path):
    """The parser reads this interpreter's own ``-X importtime`` lines, lm-eval's output
    between them skipped: ``json`` at the top, ``json.decoder`` inside it, ``json.scanner``
    inside that (the nesting the indent encodes). Each module's own time is counted once,
    so the package rows add up to the total, to the table's two decimals."""
    module = _load_script(REPO_ROOT / "bench" / "import_times.py")
    done = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", "import json, email.parser"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    log = tmp_path / "run.log"
    lines = done.stderr.splitlines()
    log.write_text("\n".join([lines[0], "INFO lm-eval says | 12 | x", *lines[1:]]) + "\n")
    imports = module.parse(log.read_text().splitlines())
    depth = {record.module: record.depth for record in imports}
    assert (depth["json"], depth["json.decoder"], depth["json.scanner"]) == (0, 1, 2)
    assert len(imports) == len(lines) - 1  # all but the header
    total = sum(record.self_us for record in imports) / 1e6
    packages = module.by_package(imports)
    assert sum(seconds for _, seconds, _ in packages) == pytest.approx(total, abs=1e-9)
    assert sum(count for _, _, count in packages) == len(imports)
    assert {"json", "email"} <= {package for package, _, _ in packages}
    module.main([str(log), "--out", str(tmp_path / "imports.md")])
    report = (tmp_path / "imports.md").read_text()
    assert report.startswith(f"`run.log`: {len(imports)} modules imported in {total:.2f} s")
    assert "| json |" in report
    log.write_text("no imports here\n")
    with pytest.raises(SystemExit, match="no `import time:` lines"):
        module.main([str(log)])


def test_pll_bench_prints_the_baselines_steps_beside_ours(monkeypatch):
    """A baseline revision's steps are timed as ours are (one whose internals predate them
    is timed as a whole), and the step table names the engine of each row; a report
    written before the answers column still renders."""
    pll_bench = _load_pll_bench()
    texts = ["The hooligan wrecked the souvenir.", "Dogs bark."]
    spec = {"model": str(TINY_BERT_DIR), "texts": texts, "threads": torch.get_num_threads()}
    spec |= {"device": "cpu", "metric": "word_l2r", "dtype": "float32", "revision": "abc1234"}
    baseline = pll_bench.worker_baseline(spec)
    assert baseline["engine"] == "baseline abc1234"
    assert {"tokenize", "plan", "run", "assemble", "answers"} <= baseline["phases"].keys()

    def older_internals(scorer, *rest):  # a revision from before the bulk engine's Jobs
        raise AttributeError("'list' object has no attribute 'encodings'")

    monkeypatch.setattr(pll_bench, "_phases", older_internals)
    older = pll_bench.worker_baseline(spec)
    assert "phases" not in older and older["scores"] == baseline["scores"]
    committed = REPO_ROOT / "bench" / "results" / "amd-epyc-2cpu-2026-11-23-nano-all.json"
    report = json.loads(committed.read_text())
    ours, other = report["rows"][0], report["rows"][1]
    other["phases"] = {**ours["phases"], "answers": 0.125}
    lines = pll_bench.markdown(report).splitlines()
    header = next(
        i
        for i, line in enumerate(lines)
        if line.startswith("| engine | metric | dtype | tokenize s")
    )
    ours_step, other_step = lines[header + 2 : header + 4]
    assert ours_step.startswith("| ours | word_l2r | float32 | 2.14 |") and "|  |" in ours_step
    assert other_step.startswith(f"| {other['engine']} |") and "| 0.12 |" in other_step


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("Intel(R) Xeon(R) Processor", "intel-xeon-processor"),
        ("AMD EPYC 7B13 64-Core Processor", "amd-epyc-7b13-64-core-processor"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("Intel(TM) Core(tm) i7-8700 CPU @ 3.20GHz", "intel-core-i7-8700-cpu-3.20ghz"),
    ],
)
def test_results_files_are_named_without_characters_a_shell_would_need_quoted(name, part):
    assert _load_pll_bench().file_name_part(name) == part
