"""``pll-harness compare``: leaderboard tables and heat map from lm-eval result files.

The result files are written here in lm-eval's layout (``results``, ``config.model``,
``config.model_args``, ``date``), trimmed to what compare reads."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import lm_eval
import numpy as np
import pytest
from lm_eval.tasks import TaskManager
from lm_eval.utils import handle_non_serializable
from test_tasks_eval import RECIPE, ScriptedLM
from tools_support import assert_png

from pll_harness.cli import main
from pll_harness.task_paths import TASK_DIR
from pll_harness.tasks.catalog import ZORRO_PHENOMENA
from pll_harness.tools.compare import (
    build_leaderboard,
    compare,
    describe_run,
    load_runs,
)


def _result(
    folder: Path,
    name: str,
    model: str,
    args,
    scores: dict[str, float],
    date: float = 1.0,
    limit: float | None = None,
    recorded: dict | None = None,
) -> Path:
    results = {
        task: {
            "alias": task,
            "acc,none": acc,
            "acc_stderr,none": 0.01,
            "score_diff,none": 10 * acc - 5,
            "score_diff_stderr,none": 0.1,
        }
        for task, acc in scores.items()
    }
    data = {
        "results": results,
        "groups": {k: v for k, v in results.items() if "_" not in k.removeprefix("blimp_pll")},
        "config": {
            "model": model,
            "model_args": args,
            "batch_size": 1,
            "device": "cpu",
            "limit": limit,
            **(recorded or {}),
        },
        "model_name": "ignored",
        "date": date,
    }
    path = folder / name / f"results_{date}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def results_dir(tmp_path) -> Path:
    folder = tmp_path / "results"
    blimp = {
        "blimp_pll": 0.8,
        "blimp_pll_anaphor_agreement": 0.9,
        "blimp_pll_ellipsis": 0.7,
        "blimp_pll_ellipsis_n_bar_1": 0.6,
        "blimp_pll_island_effects": 0.75,
    }
    _result(
        folder,
        "bert-l2r",
        "pll-mlm",
        {"pretrained": "/models/bert-base-cased", "pll_metric": "word_l2r"},
        blimp,
    )
    # the same model and metric in a second run, with EventsAdapt (merged into one row)
    _result(
        folder,
        "bert-l2r-ea",
        "pll-mlm",
        {"pretrained": "/models/bert-base-cased", "pll_metric": "word_l2r"},
        {"eventsadapt_pll": 0.66, "eventsadapt_pll_ai": 0.9},
        date=2.0,
    )
    _result(
        folder,
        "bert-orig",
        "pll-mlm",
        "pretrained=/models/bert-base-cased,pll_metric=original,batch_size=auto",
        {k: v - 0.05 for k, v in blimp.items()},
    )
    _result(
        folder,
        "gpt2",
        "hf",
        {"pretrained": "gpt2", "dtype": "float32"},
        {
            "blimp_pll": 0.82,
            "blimp_pll_ellipsis": 0.8,
            "eventsadapt_pll_by_voice": 0.7,
            "eventsadapt_pll_active": 0.72,
        },
    )
    (folder / "gpt2" / "samples_blimp_pll_x.jsonl").write_text("{}\n")  # ignored
    return folder


def test_describe_run_labels():
    run = describe_run({"config": {"model": "pll-mlm", "model_args": "pretrained=x/y"}})
    assert (run.label, run.model_type, run.pretrained, run.pll_metric) == (
        "x/y (word_l2r)",
        "pll-mlm",
        "x/y",
        "word_l2r",
    )
    run = describe_run(
        {"config": {"model": "hf", "model_args": {"pretrained": "./local/gpt2-medium"}}}
    )
    assert (run.label, run.model_type, run.pll_metric) == ("gpt2-medium (hf)", "hf", None)


def test_runs_are_merged_and_ordered(results_dir):
    runs = load_runs([results_dir])
    assert [r.label for r in runs] == [
        "bert-base-cased (original)",
        "bert-base-cased (word_l2r)",
        "gpt2 (hf)",
    ]
    l2r = runs[1]
    assert l2r.scores["blimp_pll"]["acc"] == 0.8 and l2r.scores["eventsadapt_pll"]["acc"] == 0.66
    assert l2r.scores["blimp_pll"]["score_diff"] == pytest.approx(3.0)
    assert len(l2r.files) == 2
    assert runs[2].scores["eventsadapt_pll"]["acc"] == 0.7  # the by-voice view: same number


def test_leaderboard_table_csv_and_heatmap(results_dir, tmp_path):
    board = compare([results_dir], tmp_path / "out")
    tasks = [c.task for c in board.columns]
    assert tasks == [
        "blimp_pll",
        "blimp_pll_anaphor_agreement",
        "blimp_pll_ellipsis",
        "blimp_pll_island_effects",
        "eventsadapt_pll",
        "eventsadapt_pll_ai",
        "eventsadapt_pll_active",
    ]  # only columns some run has, in Table 3 order; paradigms are not columns
    markdown = (tmp_path / "out" / "leaderboard.md").read_text()
    header = markdown.splitlines()[0]
    assert "BLiMP overall" in header and "ANA. AGR" in header and "EventsAdapt" in header
    gpt_line = next(line for line in markdown.splitlines() if line.startswith("| gpt2 (hf)"))
    assert "**82.0**" in gpt_line and "–" in gpt_line  # best overall; anaphora not run

    rows = list(csv.DictReader((tmp_path / "out" / "leaderboard.csv").open()))
    assert [r["model"] for r in rows] == [r.label for r in board.runs]
    assert float(rows[1]["blimp_pll_ellipsis"]) == 0.7
    assert rows[2]["blimp_pll_anaphor_agreement"] == ""
    assert rows[0]["pll_metric"] == "original" and rows[2]["model_type"] == "hf"

    assert_png(tmp_path / "out" / "leaderboard.png")
    fig = board.heatmap()
    (ax,) = [a for a in fig.axes if a.images]
    data = ax.images[0].get_array()
    assert data.shape == (3, len(tasks))
    expected = np.array(board.matrix()) * 100
    assert int(np.ma.count_masked(data)) == int(np.isnan(expected).sum()) > 0
    assert np.allclose(data.filled(np.nan)[~np.isnan(expected)], expected[~np.isnan(expected)])
    assert len(ax.texts) == int((~np.isnan(expected)).sum())  # one number per filled cell
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.label for r in board.runs]


def test_score_diff_and_all_columns(results_dir):
    board = build_leaderboard(load_runs([results_dir]), "score_diff", all_columns=True)
    # every column of the two benchmarks run (BLiMP 13, EventsAdapt 6), none of the others
    assert len(board.columns) == 19
    assert {c.metric for c in board.columns} == {"score_diff"}
    column = {c.task: c for c in board.columns}
    assert board.value(board.runs[1], column["blimp_pll"]) == pytest.approx(3.0)
    assert math.isnan(board.value(board.runs[0], column["eventsadapt_pll_passive"]))
    assert "(% of pairs" not in board.to_markdown()


def test_a_note_that_explains_a_metric_goes_only_with_that_metric(tmp_path):
    """CrowS-Pairs' note explains pct_stereotype: not under a score_diff table, where the
    notes on averaging (its own included) still hold."""
    folder = tmp_path / "results"
    for name, share in (("a", 0.6), ("b", 0.55)):
        scores = {"crows_pairs_pll": share, "blimp_pll": share}
        path = _result(folder, name, "pll-mlm", {"pretrained": name}, scores)
        data = json.loads(path.read_text())
        crows = data["results"]["crows_pairs_pll"]
        crows["pct_stereotype,none"] = crows.pop("acc,none")
        path.write_text(json.dumps(data))
    runs = load_runs([folder])
    shares, diffs = (build_leaderboard(runs, m).to_markdown() for m in ("acc", "score_diff"))
    explained = "CrowS-Pairs columns are pct_stereotype"
    assert explained in shares and explained not in diffs
    assert "BLiMP overall is the mean of the 67 paradigms" in diffs
    assert "CrowS-Pairs columns pool their pairs" in diffs


def test_without_matplotlib_no_file_is_written(results_dir, tmp_path, monkeypatch):
    import importlib

    module = importlib.import_module("pll_harness.tools.compare")  # not the function

    def missing():
        raise ImportError("Plots need matplotlib")

    monkeypatch.setattr(module, "pyplot", missing)
    with pytest.raises(ImportError, match="matplotlib"):
        compare([results_dir], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_compare_and_errors(results_dir, tmp_path, capsys):
    files = sorted(str(p) for p in results_dir.rglob("results_*.json"))
    assert main(["compare", *files, "-o", str(tmp_path / "lb")]) == 0
    assert "| bert-base-cased (word_l2r) |" in capsys.readouterr().out
    assert (tmp_path / "lb" / "leaderboard.csv").is_file()

    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {
                "results": {"wikitext": {"word_perplexity,none": 30.5}},
                "config": {"model": "hf", "model_args": "pretrained=x"},
            }
        )
    )
    assert main(["compare", str(other), "-o", str(tmp_path / "none")]) == 1
    assert "accuracy-like metric" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing.json")]) == 1


def test_rows_are_keyed_by_checkpoint_and_scoring_settings(tmp_path, capsys):
    folder = tmp_path / "res2"
    run1 = {"pretrained": "/ckpt/run1/final", "pll_metric": "original"}
    _result(folder, "a", "pll-mlm", run1, {"blimp_pll": 0.9})
    _result(folder, "b", "pll-mlm", {**run1, "pretrained": "/ckpt/run2/final"}, {"blimp_pll": 0.1})
    # the same checkpoint in another dtype is another row; dtype=auto written out, a batch
    # size, a device or a trailing slash are not, so "d" joins "a"
    _result(folder, "c", "pll-mlm", {**run1, "dtype": "float16"}, {"blimp_pll": 0.85})
    _result(
        folder,
        "d",
        "pll-mlm",
        "pretrained=/ckpt/run1/final/,pll_metric=original,dtype=auto,batch_size=64,device=cuda",
        {"eventsadapt_pll": 0.7},
        date=2.0,
    )
    # a hub name and a local folder of the same name
    _result(folder, "e", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.5})
    _result(folder, "f", "hf", {"pretrained": "/models/gpt2"}, {"blimp_pll": 0.6})
    board = build_leaderboard(load_runs([folder]))
    board.write_csv(tmp_path / "leaderboard.csv")
    assert sorted(r.label for r in board.runs) == [
        "gpt2 (hf)",
        "models/gpt2 (hf)",
        "run1/final (original, dtype=auto)",
        "run1/final (original, dtype=float16)",
        "run2/final (original)",
    ]
    rows = {r["model"]: r for r in csv.DictReader((tmp_path / "leaderboard.csv").open())}
    run2 = rows["run2/final (original)"]
    assert (run2["pretrained"], run2["blimp_pll"]) == ("/ckpt/run2/final", "0.1")
    merged = rows["run1/final (original, dtype=auto)"]
    assert (merged["pretrained"], merged["blimp_pll"], merged["eventsadapt_pll"]) == (
        "/ckpt/run1/final",
        "0.9",
        "0.7",
    )
    assert merged["settings"] == "dtype=auto,pll_metric=original,revision=main"
    assert rows["run1/final (original, dtype=float16)"]["blimp_pll"] == "0.85"
    assert rows["models/gpt2 (hf)"]["pretrained"] == "/models/gpt2"
    assert "warning" not in capsys.readouterr().err


def test_rows_follow_the_settings_the_model_recorded(tmp_path):
    """pll-mlm records its checkpoint (a folder as its absolute path), dtype and max length
    as they took effect: a folder named relatively and absolutely, ``dtype=auto`` and the
    dtype it resolved to, ``max_length`` left out and written out are each one row."""
    folder = tmp_path / "res"
    recorded = {
        "model_checkpoint": "/ckpt/run1",
        "model_dtype": "torch.float32",
        "pll_max_length": 512,
    }
    _result(folder, "a", "pll-mlm", {"pretrained": "run1"}, {"blimp_pll": 0.9}, recorded=recorded)
    explicit = {"pretrained": "/ckpt/run1/", "dtype": "float32", "max_length": "512"}
    _result(folder, "b", "pll-mlm", explicit, {"eventsadapt_pll": 0.7}, recorded=recorded)
    half = {**recorded, "model_dtype": "torch.bfloat16"}
    bf16 = {"pretrained": "run1", "dtype": "bfloat16"}
    _result(folder, "c", "pll-mlm", bf16, {"blimp_pll": 0.8}, recorded=half)
    runs = {run.label: run for run in load_runs([folder])}
    assert sorted(runs) == ["run1 (word_l2r, dtype=bfloat16)", "run1 (word_l2r, dtype=float32)"]
    merged = runs["run1 (word_l2r, dtype=float32)"]
    assert merged.scores["blimp_pll"]["acc"] == 0.9
    assert merged.scores["eventsadapt_pll"]["acc"] == 0.7
    assert merged.settings == {
        "pll_metric": "word_l2r",
        "dtype": "float32",
        "max_length": "512",
        "revision": "main",
    }

    # one folder name in two places: two rows, told apart by the recorded paths
    elsewhere = {**recorded, "model_checkpoint": "/other/run1"}
    _result(folder, "d", "pll-mlm", {"pretrained": "run1"}, {"blimp_pll": 0.5}, recorded=elsewhere)
    labels = sorted(run.label for run in load_runs([folder]))
    assert labels == [
        "ckpt/run1 (word_l2r, dtype=bfloat16)",
        "ckpt/run1 (word_l2r, dtype=float32)",
        "other/run1 (word_l2r)",
    ]


def test_runs_from_python_are_rows_of_their_recorded_metric(tmp_path, capsys):
    """``simple_evaluate(model=PLLMaskedLM(...))`` records no ``model_args``, only the model
    object's class and what the model wrote itself: two metrics are still two rows, and
    the same as a command-line run of that metric."""
    folder = tmp_path / "res"
    for metric, acc in (("word_l2r", 0.9), ("original", 0.6)):
        recorded = {"model_checkpoint": "/ckpt/run1", "pll_metric": metric}
        _result(folder, metric, "PLLMaskedLM", None, {"blimp_pll": acc}, recorded=recorded)
    cli = {"model_checkpoint": "/ckpt/run1", "pll_metric": "original"}
    args = "pretrained=/ckpt/run1,pll_metric=original"
    _result(folder, "cli", "pll-mlm", args, {"eventsadapt_pll": 0.5}, recorded=cli)
    runs = {run.label: run for run in load_runs([folder])}
    assert sorted(runs) == ["run1 (original)", "run1 (word_l2r)"]
    assert runs["run1 (word_l2r)"].scores["blimp_pll"]["acc"] == 0.9
    original = runs["run1 (original)"].scores
    assert (original["blimp_pll"]["acc"], original["eventsadapt_pll"]["acc"]) == (0.6, 0.5)
    assert "different values" not in capsys.readouterr().err


def test_a_task_with_examples_before_each_item_is_its_own_column(tmp_path, capsys):
    """The same task 0-shot and 5-shot never shares a cell: one would silently replace
    the other.  A group's members carry the group's count, so the group stays one column."""
    folder = tmp_path / "res"
    _result(folder, "zero", "hf", "pretrained=gpt2", {"arc_easy": 0.4})
    five = _result(folder, "five", "hf", "pretrained=gpt2", {"arc_easy": 0.7, "mmlu": 0.3}, 2.0)
    data = json.loads(five.read_text())
    data["n-shot"] = {"arc_easy": 5, "mmlu": 5, "mmlu_anatomy": 5}
    data["group_subtasks"] = {"mmlu": ["mmlu_anatomy"]}
    data["results"]["mmlu_anatomy"] = {"acc,none": 0.2}
    five.write_text(json.dumps(data))
    board = build_leaderboard(load_runs([folder]))
    assert [c.header for c in board.columns] == ["arc_easy", "arc_easy (5-shot)", "mmlu (5-shot)"]
    (run,) = board.runs
    assert run.scores["arc_easy"]["acc"] == 0.4 and run.scores["arc_easy (5-shot)"]["acc"] == 0.7
    assert "different values" not in capsys.readouterr().err


def _with_groups(path: Path, shots: dict, groups: dict, members: dict) -> None:
    data = json.loads(path.read_text())
    data["n-shot"], data["group_subtasks"] = shots, groups
    data["results"].update({task: {"acc,none": acc} for task, acc in members.items()})
    path.write_text(json.dumps(data))


def test_a_group_without_its_own_count_takes_its_members(tmp_path, capsys):
    """lm-eval 0.4.3 to 0.4.10 write no n-shot for groups, and 0.4.13 none where the
    members disagree: the group's count comes from its members."""
    folder = tmp_path / "res"
    zero = _result(folder, "zero", "hf", "pretrained=gpt2", {"mmlu": 0.3})
    _with_groups(zero, {"mmlu_a": 0, "mmlu_b": 0}, {"mmlu": ["mmlu_a", "mmlu_b"]}, {})
    five = _result(folder, "five", "hf", "pretrained=gpt2", {"mmlu": 0.4}, 2.0)
    _with_groups(five, {"mmlu_a": 5, "mmlu_b": 5}, {"mmlu": ["mmlu_a", "mmlu_b"]}, {})
    mixed = _result(folder, "mixed", "hf", "pretrained=gpt2", {"suite": 0.5}, 3.0)
    _with_groups(mixed, {"arc": 0, "hella": 10}, {"suite": ["arc", "hella"]}, {})
    board = build_leaderboard(load_runs([folder]))
    assert [c.header for c in board.columns] == ["mmlu", "mmlu (5-shot)", "suite (mixed-shot)"]
    assert "different values" not in capsys.readouterr().err


def test_runs_at_two_recorded_revisions_are_two_rows(tmp_path):
    """A run from Python records its revision (model_revision) but no model_args."""
    folder = tmp_path / "res"
    v1 = {"model_checkpoint": "bert-base-cased", "pll_metric": "word_l2r", "model_revision": "v1"}
    _result(folder, "py", "PLLMaskedLM", None, {"blimp_pll": 0.8}, recorded=v1)
    _result(folder, "cli", "pll-mlm", "pretrained=bert-base-cased", {"blimp_pll": 0.7}, 2.0)
    labels = sorted(run.label for run in load_runs([folder]))
    assert labels == [
        "bert-base-cased (word_l2r, revision=main)",
        "bert-base-cased (word_l2r, revision=v1)",
    ]


def test_add_prefix_space_as_recorded_defines_the_row(tmp_path):
    """It changes a byte-level BPE model's scores, so a run with it is another row; the
    recorded value defines it, so ``true`` and ``True`` are one row, and a run from
    Python (no model_args) keeps it."""
    folder = tmp_path / "res"
    babyberta = "pretrained=phueb/BabyBERTa-1"
    _result(folder, "plain", "pll-mlm", babyberta, {"zorro_pll": 0.7})
    asked = {"pll_add_prefix_space": True}
    _result(
        folder,
        "a",
        "pll-mlm",
        f"{babyberta},add_prefix_space=true",
        {"zorro_pll": 0.8},
        2.0,
        recorded=asked,
    )
    _result(
        folder,
        "b",
        "pll-mlm",
        f"{babyberta},add_prefix_space=True",
        {"blimp_pll": 0.6},
        3.0,
        recorded=asked,
    )
    recorded = {"model_checkpoint": "phueb/BabyBERTa-1", "pll_metric": "word_l2r", **asked}
    _result(folder, "py", "PLLMaskedLM", None, {"clams_pll": 0.5}, 4.0, recorded=recorded)
    labels = sorted(run.label for run in load_runs([folder]))
    assert labels == [
        "phueb/BabyBERTa-1 (word_l2r)",
        "phueb/BabyBERTa-1 (word_l2r, add_prefix_space=True)",
    ]


def test_a_recorded_tokenizer_other_than_the_checkpoint_s_is_another_row(tmp_path):
    """A model handed over from Python with another tokenizer leaves no model_args; its
    recorded tokenizer (model_tokenizer) makes it a row of its own, while the checkpoint's
    own tokenizer, recorded or written out, is the plain row."""
    folder = tmp_path / "res"
    own = {"model_checkpoint": "/ckpt/run1", "pll_metric": "word_l2r"}
    _result(folder, "old", "pll-mlm", "pretrained=/ckpt/run1", {"blimp_pll": 0.8}, recorded=own)
    same = {**own, "model_tokenizer": "/ckpt/run1"}
    args = "pretrained=/ckpt/run1,tokenizer=/ckpt/run1"
    _result(folder, "cli", "pll-mlm", args, {"clams_pll": 0.6}, 2.0, recorded=same)
    other = {**own, "model_tokenizer": "/ckpt/tok2"}
    _result(folder, "py", "PLLMaskedLM", None, {"blimp_pll": 0.5}, 3.0, recorded=other)
    labels = sorted(run.label for run in load_runs([folder]))
    assert labels == ["run1 (word_l2r)", "run1 (word_l2r, tokenizer=/ckpt/tok2)"]


def test_the_default_revision_written_out_is_the_same_row(tmp_path):
    folder = tmp_path / "res"
    _result(folder, "a", "pll-mlm", "pretrained=bert-base-cased", {"blimp_pll": 0.8})
    args = "pretrained=bert-base-cased,revision=main"
    _result(folder, "b", "pll-mlm", args, {"eventsadapt_pll": 0.6})
    assert [run.label for run in load_runs([folder])] == ["bert-base-cased (word_l2r)"]


def test_one_task_twice_in_a_row_warns_and_the_newer_file_wins(tmp_path, capsys):
    folder = tmp_path / "results"
    scores = {"blimp_pll": 0.8, "blimp_pll_ellipsis": 0.7}
    old = _result(folder, "z-first", "hf", {"pretrained": "gpt2"}, scores, date=1.0)
    # the path sorts first, the date says it is newer; blimp_pll_ellipsis agrees
    new = _result(
        folder, "a-again", "hf", {"pretrained": "gpt2"}, {**scores, "blimp_pll": 0.82}, 2.0
    )
    (run,) = load_runs([folder])
    assert run.scores["blimp_pll"]["acc"] == 0.82 and len(run.files) == 2
    err = capsys.readouterr().err
    assert f"gpt2 (hf): {old} and {new} both report blimp_pll with different values" in err
    assert "acc 0.8 vs 0.82" in err and f"using {new} (the newer by the results' date)" in err
    assert "ellipsis" not in err and err.count("warning") == 1


def test_limited_runs_are_marked_and_never_merged_with_full_ones(tmp_path):
    folder = tmp_path / "results"
    _result(folder, "full", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.8})
    # lm-eval's command line stores --limit 20 as 20.0
    _result(folder, "quick", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.95}, 2.0, limit=20.0)
    board = build_leaderboard(load_runs([folder]))
    assert [r.label for r in board.runs] == ["gpt2 (hf)", "gpt2 (hf, limit=20)"]
    assert board.matrix() == [[0.8], [0.95]]
    markdown = board.to_markdown()
    assert "| gpt2 (hf, limit=20) | **95.0** |" in markdown
    assert "limit=N: run with lm-eval's --limit" in markdown
    board.write_csv(tmp_path / "leaderboard.csv")
    rows = list(csv.DictReader((tmp_path / "leaderboard.csv").open()))
    assert [(r["limit"], r["blimp_pll"]) for r in rows] == [("", "0.8"), ("20", "0.95")]


def test_best_is_judged_at_the_precision_shown(tmp_path):
    folder = tmp_path / "results"
    for name, acc, preferred in (
        ("a", 0.325, 0.4),
        ("b", 0.32499999999999996, 0.6),  # both show 32.5; 40 and 60 are as close to 50
        ("c", 0.3, 0.7),
    ):
        path = folder / name / "results_1.json"
        path.parent.mkdir(parents=True)
        results = {
            "my_agreement": {"acc,none": acc},
            "my_stereo": {"first_preferred,none": preferred},
        }
        config = {"model": "hf", "model_args": f"pretrained={name}"}
        path.write_text(json.dumps({"results": results, "config": config, "date": 1.0}))
    markdown = build_leaderboard(load_runs([folder])).to_markdown()
    assert "| a (hf) | **32.5** | **40.0** |" in markdown
    assert "| b (hf) | **32.5** | **60.0** |" in markdown
    assert "| c (hf) | 30.0 | 70.0 |" in markdown


def test_a_broken_result_file_is_named(results_dir, tmp_path, capsys):
    broken = results_dir / "killed" / "results_3.0.json"
    broken.parent.mkdir()
    broken.write_text('{"results":\n')
    with pytest.raises(ValueError, match=re.escape(f"{broken} is not valid JSON")):
        load_runs([results_dir])
    assert main(["compare", str(results_dir), "-o", str(tmp_path / "lb")]) == 1
    err = capsys.readouterr().err
    assert str(broken) in err and "cut short" in err and "Expecting value" in err
    assert not (tmp_path / "lb").exists()


def test_a_file_that_is_not_json_is_not_called_cut_short(tmp_path):
    sentences = tmp_path / "s.txt"
    sentences.write_text("The cat sat.\n")
    with pytest.raises(ValueError, match=r"s\.txt is not an lm-eval result file \(not JSON\)"):
        load_runs([sentences])


def test_an_empty_result_file_is_called_empty_and_a_bom_is_read(results_dir, tmp_path):
    """Both were called "not JSON": an empty file is what a run killed as it began writing
    leaves, and a byte-order mark is what some editors save a JSON file with."""
    empty = tmp_path / "results_9.json"
    empty.write_text("\n")
    with pytest.raises(ValueError, match=re.escape(f"{empty} is empty; a run killed")):
        load_runs([empty])
    plain = load_runs([results_dir])
    for path in results_dir.rglob("*.json"):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [run.scores for run in load_runs([results_dir])] == [run.scores for run in plain]


def test_no_result_files_or_a_foreign_json_is_an_error(tmp_path):
    """Named rather than skipped: a skipped file would drop a row without anyone noticing."""
    with pytest.raises(ValueError, match=r"No lm-eval result files \(results_\*\.json\)"):
        load_runs([tmp_path])
    foreign = tmp_path / "results_x.json"
    foreign.write_text('{"samples": []}')
    with pytest.raises(ValueError, match=re.escape(f"{foreign} is not an lm-eval result file")):
        load_runs([tmp_path])
    # hand-edited files: a list of results (a traceback), a date in words (an error that
    # named no file)
    foreign.write_text('{"results": [{"acc,none": 0.5}]}')
    with pytest.raises(ValueError, match=re.escape(f"{foreign} is not an lm-eval result file")):
        load_runs([tmp_path])
    foreign.write_text('{"results": {"t": {"acc,none": 0.5}}, "date": "2024-01-01"}')
    with pytest.raises(ValueError, match=re.escape(f"{foreign}: its 'date' is '2024-01-01'")):
        load_runs([tmp_path])


# ------------------------------------------------------------- real lm-eval result files


def _run_and_save(
    folder: Path,
    tm: TaskManager,
    tasks: list[str],
    score,
    model: str,
    args: str,
    date: float,
    limit: int | None = 2,
) -> Path:
    """Run ``tasks`` with a scripted model through lm-eval and save its result file the way
    ``lm_eval --output_path`` does (the model's name and arguments stand in for a real one)."""
    out = lm_eval.simple_evaluate(
        model=ScriptedLM(score), tasks=tasks, task_manager=tm, limit=limit, bootstrap_iters=0
    )
    assert out is not None
    out.pop("samples", None)
    out["config"].update(model=model, model_args=args)
    out["date"] = date
    path = folder / args.replace("=", "-").replace(",", "_") / f"results_{date}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(out, default=handle_non_serializable))
    return path


def right(request) -> float:
    """The first sentence of every pair (good, or more stereotyping) scores higher."""
    return 0.0 if request.idx == 0 else -1.0


def half_right(request) -> float:
    """The first sentence wins on the first pair of each task, loses on the second."""
    return 0.0 if request.idx == 0 else (-1.0 if request.doc_id == 0 else 1.0)


def test_leaderboard_of_two_runs_of_the_new_benchmarks(tmp_path: Path) -> None:
    tm = TaskManager(include_defaults=False, include_path=str(TASK_DIR))
    tasks = ["crows_pairs_pll", "clams_pll", "zorro_pll"]
    folder = tmp_path / "runs"
    _run_and_save(folder, tm, tasks, right, "pll-mlm", "pretrained=m,pll_metric=original", 1.0)
    _run_and_save(folder, tm, tasks, half_right, "pll-mlm", "pretrained=m,pll_metric=word_l2r", 2.0)
    board = compare([folder], tmp_path / "out")

    # lm-eval records --limit in the file, and the rows say so
    assert [r.label for r in board.runs] == ["m (original, limit=2)", "m (word_l2r, limit=2)"]
    headers = [c.header for c in board.columns]
    assert headers[:2] == ["CrowS-Pairs", "CP race"]
    assert [h for h in headers if h.startswith("CLAMS")] == [
        "CLAMS",
        "CLAMS en",
        "CLAMS fr",
        "CLAMS de",
        "CLAMS he",
        "CLAMS ru",
    ]  # by language; the English-only group was not run
    assert headers[16:] == ["Zorro", *(p.header for p in ZORRO_PHENOMENA)]
    assert len(board.columns) == 10 + 6 + 14
    metrics = {c.task: c.metric for c in board.columns}
    assert metrics["crows_pairs_pll"] == "pct_stereotype" and metrics["clams_pll_fr"] == "acc"
    original, word_l2r = board.matrix()
    assert original == [1.0] * len(board.columns)
    assert word_l2r == [0.5] * len(board.columns)

    lines = (tmp_path / "out" / "leaderboard.md").read_text().splitlines()
    row = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1:] for line in lines[2:4]}
    original, word_l2r = row["m (original, limit=2)"], row["m (word_l2r, limit=2)"]
    # CrowS-Pairs: no preference (50) is the best; CLAMS and Zorro: higher is better.
    assert word_l2r[0] == "**50.0**" and original[0] == "100.0"
    assert original[10] == "**100.0**" and word_l2r[10] == "50.0"
    note = lines[-1]
    assert "pct_stereotype" in note and "CLAMS is the mean" in note and "Zorro is the mean" in note
    assert "limit=N: run with lm-eval's --limit" in note
    header = next(csv.reader((tmp_path / "out" / "leaderboard.csv").open()))
    assert header[4:6] == ["limit", "settings"]
    assert header[6:8] == [
        "crows_pairs_pll:pct_stereotype",
        "crows_pairs_pll_race_color:pct_stereotype",
    ]
    assert "clams_pll_de" in header and "zorro_pll_binding" in header


def test_leaderboard_of_two_runs_of_a_users_own_tasks(tmp_path: Path) -> None:
    tasks_dir = tmp_path / "my_tasks"
    tasks_dir.mkdir()
    (tasks_dir / "pairs.csv").write_text(
        "ok,bad\nThe dogs bark.,The dogs barks.\nA cat sleeps.,A cat sleep.\n"
    )
    (tasks_dir / "stereo.jsonl").write_text(
        '{"s": "She is a nurse.", "a": "He is a nurse."}\n'
        '{"s": "He is a pilot.", "a": "She is a pilot."}\n'
    )
    for task, template, data, (a_key, a_col), (b_key, b_col) in (
        ("my_agreement", "minimal_pair", "pairs.csv", ("good", "ok"), ("bad", "bad")),
        ("my_stereo", "pair_preference", "stereo.jsonl", ("first", "s"), ("second", "a")),
    ):
        (tasks_dir / f"{task}.yaml").write_text(
            RECIPE.format(
                task=task,
                template=TASK_DIR / "templates" / f"{template}.yaml",
                data=data,
                a_key=a_key,
                a_col=a_col,
                b_key=b_key,
                b_col=b_col,
            )
        )
    tm = TaskManager(include_defaults=False, include_path=[str(tasks_dir)])
    folder = tmp_path / "runs"
    tasks = ["my_agreement", "my_stereo"]
    # full runs (limit=None: each task has two items), so the third file joins gpt-a's row
    _run_and_save(folder, tm, tasks, right, "hf", "pretrained=gpt-a", 1.0, limit=None)
    _run_and_save(folder, tm, tasks, half_right, "hf", "pretrained=gpt-b", 2.0, limit=None)
    # A third file: lm-eval's own tasks, a group (one column, not one per member) and a task
    # without any accuracy-like metric.
    third = folder / "gpt-a-more" / "results_3.0.json"
    third.parent.mkdir()
    third.write_text(
        json.dumps(
            {
                "results": {
                    "arc_easy": {"acc,none": 0.7, "acc_norm,none": 0.6},
                    "mmlu": {"acc,none": 0.4},
                    "mmlu_stem": {"acc,none": 0.3},
                    "wikitext": {"word_perplexity,none": 30.5},
                },
                "group_subtasks": {"mmlu": ["mmlu_stem"], "arc_easy": [], "wikitext": []},
                "config": {"model": "hf", "model_args": "pretrained=gpt-a"},
                "date": 3.0,
            }
        )
    )

    board = compare([folder], tmp_path / "out")
    assert [r.label for r in board.runs] == ["gpt-a (hf)", "gpt-b (hf)"]
    assert [(c.task, c.header, c.metric) for c in board.columns] == [
        ("arc_easy", "arc_easy", "acc"),
        ("mmlu", "mmlu", "acc"),
        ("my_agreement", "my_agreement", "acc"),
        ("my_stereo", "my_stereo (first_preferred)", "first_preferred"),
    ]
    assert board.matrix()[0] == [0.7, 0.4, 1.0, 1.0]
    assert board.matrix()[1][2:] == [0.5, 0.5] and math.isnan(board.matrix()[1][0])
    markdown = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "Not shown (no accuracy-like metric): wikitext." in markdown
    gpt_b = next(line for line in markdown.splitlines() if line.startswith("| gpt-b"))
    assert gpt_b.split(" | ")[4] == "**50.0** |"  # closest to no preference
    assert_png(tmp_path / "out" / "leaderboard.png")

    diffs = build_leaderboard(load_runs([folder]), "score_diff")
    assert [c.task for c in diffs.columns] == ["my_agreement", "my_stereo"]
    assert diffs.matrix()[0] == [1.0, 1.0] and diffs.matrix()[1] == [0.0, 0.0]


def test_a_paradigm_run_alone_and_an_older_layout_get_their_numbers(tmp_path):
    """A BLiMP paradigm belongs to the BLiMP benchmark, whose columns are its overall score
    and phenomena: run alone, with none of them, it was dropped without a word.  lm-eval
    0.3 wrote metrics without a filter (``"acc": 0.58``), which read as no accuracy."""
    folder = tmp_path / "results"
    paradigm = "blimp_pll_anaphor_gender_agreement"
    _result(folder, "alone", "pll-mlm", {"pretrained": "/m/a", "pll_metric": "word_l2r"},
            {paradigm: 0.25})  # fmt: skip
    old = _result(folder, "old", "hf", {"pretrained": "gpt2"}, {"arc_easy": 0.5}, date=2.0)
    data = json.loads(old.read_text())
    data["results"]["arc_easy"] = {"acc": 0.58, "acc_stderr": 0.01}
    old.write_text(json.dumps(data))
    board = build_leaderboard(load_runs([folder]))
    column = {c.task: c for c in board.columns}
    run = {r.model_type: r for r in board.runs}
    assert board.value(run["pll-mlm"], column[paradigm]) == pytest.approx(0.25)
    assert board.value(run["hf"], column["arc_easy"]) == pytest.approx(0.58)


def test_a_score_written_as_nan_is_shown_as_nan_not_as_not_run(tmp_path):
    """lm-eval writes NaN for a metric it could not compute; shown as "–" it read as a task
    the model was never run on."""
    folder = tmp_path / "results"
    args = {"pretrained": "/m/a", "pll_metric": "word_l2r"}
    _result(folder, "a", "pll-mlm", args, {"blimp_pll": math.nan, "blimp_pll_ellipsis": 0.5})
    _result(folder, "b", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.7}, date=2.0)
    board = build_leaderboard(load_runs([folder]))
    column = {c.task: c for c in board.columns}
    run = {r.model_type: r for r in board.runs}
    overall, ellipsis = column["blimp_pll"], column["blimp_pll_ellipsis"]
    shown = {
        (kind, task): board.display(run[kind], c, board.value(run[kind], c))
        for kind in run
        for task, c in (("overall", overall), ("ellipsis", ellipsis))
    }
    assert shown == {
        ("pll-mlm", "overall"): "nan",
        ("pll-mlm", "ellipsis"): "50.0",
        ("hf", "overall"): "70.0",
        ("hf", "ellipsis"): "–",
    }
    assert "| nan |" in board.to_markdown()
    board.write_csv(tmp_path / "board.csv")
    with open(tmp_path / "board.csv", encoding="utf-8", newline="") as handle:
        table = {row["model_type"]: row for row in csv.DictReader(handle)}
    assert table["pll-mlm"]["blimp_pll"] == "nan" and table["hf"]["blimp_pll_ellipsis"] == ""


def test_a_share_limit_is_shown_as_a_share(tmp_path):
    """``--limit 0.5`` scores half of each task: its row must say ``limit=0.5``, not a
    ``limit=0`` that reads as nothing scored, and stay apart from ``--limit 0.25``."""
    folder = tmp_path / "results"
    _result(folder, "half", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.9}, 1.0, limit=0.5)
    _result(folder, "quarter", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.7}, 2.0, limit=0.25)
    runs = load_runs([folder])
    assert sorted(r.label for r in runs) == ["gpt2 (hf, limit=0.25)", "gpt2 (hf, limit=0.5)"]


def test_a_filtered_metric_is_not_taken_for_the_unfiltered_one(tmp_path):
    """lm-eval writes a metric once per filter (``acc,none``, ``acc,strict-match``): the
    leaderboard shows the unfiltered value, whichever comes last in the file."""
    folder = tmp_path / "results"
    path = _result(folder, "run", "hf", {"pretrained": "gpt2"}, {"blimp_pll": 0.8})
    data = json.loads(path.read_text())
    data["results"]["blimp_pll"]["acc,strict-match"] = 0.1
    path.write_text(json.dumps(data))
    (run,) = load_runs([folder])
    assert run.scores["blimp_pll"]["acc"] == 0.8
