"""``pll-harness compare``: leaderboard tables and heat map from lm-eval result files.

The result files are written here in lm-eval's layout (``results``, ``config.model``,
``config.model_args``, ``date``), trimmed to what compare reads."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from tools_support import assert_png

from pll_harness.tools.cli import main
from pll_harness.tools.compare import build_leaderboard, compare, describe_run, load_runs

PHENOMENA = ["anaphor_agreement", "ellipsis", "island_effects"]


def _result(
    folder: Path, name: str, model: str, args, scores: dict[str, float], date: float = 1.0
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
        "config": {"model": model, "model_args": args, "batch_size": 1, "device": "cpu"},
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
    assert describe_run({"config": {"model": "pll-mlm", "model_args": "pretrained=x/y"}}) == (
        "x/y (word_l2r)",
        "pll-mlm",
        "x/y",
        "word_l2r",
    )
    label, kind, _, metric = describe_run(
        {"config": {"model": "hf", "model_args": {"pretrained": "./local/gpt2-medium"}}}
    )
    assert (label, kind, metric) == ("gpt2-medium (hf)", "hf", None)


def test_runs_are_merged_and_ordered(results_dir):
    runs = load_runs([results_dir])
    assert [r.label for r in runs] == [
        "bert-base-cased (original)",
        "bert-base-cased (word_l2r)",
        "gpt2 (hf)",
    ]
    l2r = runs[1]
    assert l2r.scores["blimp_pll"] == 0.8 and l2r.scores["eventsadapt_pll"] == 0.66
    assert len(l2r.files) == 2
    assert runs[2].scores["eventsadapt_pll"] == 0.7  # the by-voice view is the same number


def test_leaderboard_table_csv_and_heatmap(results_dir, tmp_path):
    board = compare([results_dir], tmp_path / "out")
    tasks = [t for t, _ in board.columns]
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
    board = build_leaderboard(
        load_runs([results_dir], metric="score_diff"), "score_diff", all_columns=True
    )
    assert len(board.columns) == 19
    value = board.value(board.runs[1], "blimp_pll")
    assert value == pytest.approx(3.0)
    assert math.isnan(board.value(board.runs[0], "eventsadapt_pll_passive"))


def test_cli_compare_and_errors(results_dir, tmp_path, capsys):
    files = sorted(str(p) for p in results_dir.rglob("results_*.json"))
    assert main(["compare", *files, "-o", str(tmp_path / "lb")]) == 0
    assert "| bert-base-cased (word_l2r) |" in capsys.readouterr().out
    assert (tmp_path / "lb" / "leaderboard.csv").is_file()

    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {
                "results": {"hellaswag": {"acc,none": 0.3}},
                "config": {"model": "hf", "model_args": "pretrained=x"},
            }
        )
    )
    assert main(["compare", str(other), "-o", str(tmp_path / "none")]) == 1
    assert "blimp_pll" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing.json")]) == 1
