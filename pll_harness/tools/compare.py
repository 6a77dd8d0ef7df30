"""``pll-harness compare``: a leaderboard from lm-eval result files.

Reads the ``results_*.json`` files that ``lm_eval --output_path`` writes, for ``pll-mlm``
runs (one row per model and metric) and for any other lm-eval model such as ``hf`` (one
row per model).  The benchmarks this package ships keep their structured layout, read from
:mod:`pll_harness.tasks.catalog`: BLiMP overall and by phenomenon as in Table 3 of Kauf &
Ivanova (2023), EventsAdapt by trial type and voice, CrowS-Pairs by bias type, CLAMS by
language, Zorro by phenomenon.  Any other task or group that was asked for (a user's own
pairs, or one of lm-eval's) and reports an accuracy-like metric gets a plain column.  Runs
of the same model and metric in several files are merged (the newer file wins where they
overlap).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pll_harness.metrics import DEFAULT_METRIC, PLL_METRICS
from pll_harness.tasks.catalog import BENCHMARKS, Benchmark
from pll_harness.tools.models import short_model_name
from pll_harness.tools.plotting import pyplot, save_figure
from pll_harness.tools.tables import markdown_table

SHARE_METRICS: tuple[str, ...] = (
    "acc",
    "pct_stereotype",
    "first_preferred",
    "acc_norm",
    "exact_match",
)
"""Metrics that are a share of items (shown as %), in the order a plain column picks one."""

PREFERENCE_METRICS = frozenset({"pct_stereotype", "first_preferred"})
"""Shares of pairs with no right answer: 50 % means no preference, so none is "best"."""

HEADLINE = "acc"
"""The ``metric`` that asks for each column's own accuracy-like metric (the default)."""

ALIASES: dict[str, str] = {k: v for b in BENCHMARKS for k, v in b.aliases.items()}
"""Tasks that report the same number as another column (both EventsAdapt views)."""


@dataclass
class ModelRun:
    """One leaderboard row: a model (and PLL metric) with every numeric task metric."""

    label: str
    model_type: str
    pretrained: str
    pll_metric: str | None
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    """task -> metric (``acc``, ``score_diff``, ...) -> value."""
    members: set[str] = field(default_factory=set)
    """Tasks reported as part of a group of the same file (lm-eval's ``group_subtasks``)."""
    files: list[str] = field(default_factory=list)

    def sort_key(self) -> tuple[Any, ...]:
        metric = PLL_METRICS.index(self.pll_metric) if self.pll_metric in PLL_METRICS else 99
        return (self.pretrained, metric, self.label)


@dataclass(frozen=True)
class Column:
    """One leaderboard column: a task (or group), its header and the metric shown.

    ``neutral`` is the value that means "no preference" for pair-preference metrics (the
    best entry is the one closest to it); ``None`` for metrics where higher is better.
    """

    task: str
    header: str
    metric: str
    neutral: float | None = None

    @property
    def share(self) -> bool:
        return self.metric in SHARE_METRICS


def find_result_files(paths: Iterable[str | Path]) -> list[Path]:
    """The given files, plus every ``results_*.json`` under given folders."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(path.rglob("results*.json"))
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"No such result file or folder: {path}")
    return found


def _model_args(config: dict[str, Any]) -> dict[str, str]:
    args = config.get("model_args") or {}
    if isinstance(args, str):
        pairs = (item.split("=", 1) for item in args.split(",") if "=" in item)
        return {k.strip(): v.strip() for k, v in pairs}
    return {str(k): str(v) for k, v in args.items()}


def describe_run(data: dict[str, Any]) -> tuple[str, str, str, str | None]:
    """(label, model type, pretrained, PLL metric or None) of one lm-eval result file."""
    config = data.get("config") or {}
    model_type = str(config.get("model") or "unknown")
    args = _model_args(config)
    pretrained = args.get("pretrained") or args.get("model") or data.get("model_name") or "?"
    name = short_model_name(str(pretrained))
    if model_type == "pll-mlm":
        metric = args.get("pll_metric", DEFAULT_METRIC)
        return f"{name} ({metric})", model_type, str(pretrained), metric
    return f"{name} ({model_type})", model_type, str(pretrained), None


def _numbers(values: dict[str, Any]) -> dict[str, float]:
    """lm-eval's ``"acc,none": 0.8`` entries as ``{"acc": 0.8}`` (the unfiltered ones)."""
    numbers = {}
    for key, value in values.items():
        metric, _, filter_name = key.partition(",")
        if filter_name == "none" and isinstance(value, int | float) and not isinstance(value, bool):
            numbers[metric] = float(value)
    return numbers


def load_runs(paths: Iterable[str | Path]) -> list[ModelRun]:
    """Read result files into leaderboard rows (one per model and PLL metric)."""
    files = find_result_files(paths)
    if not files:
        raise ValueError("No lm-eval result files (results_*.json) found.")
    loaded = []
    for path in files:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if "results" not in data:
            raise ValueError(f"{path} is not an lm-eval result file (no 'results' key).")
        loaded.append((float(data.get("date") or 0.0), str(path), data))
    runs: dict[str, ModelRun] = {}
    for _, path, data in sorted(loaded, key=lambda item: (item[0], item[1])):
        label, model_type, pretrained, pll_metric = describe_run(data)
        run = runs.setdefault(label, ModelRun(label, model_type, pretrained, pll_metric))
        run.files.append(path)
        run.members.update(t for ts in (data.get("group_subtasks") or {}).values() for t in ts)
        for task, values in data["results"].items():
            run.scores.setdefault(ALIASES.get(task, task), {}).update(_numbers(values))
    return sorted(runs.values(), key=ModelRun.sort_key)


@dataclass
class Leaderboard:
    runs: list[ModelRun]
    columns: list[Column]
    metric: str
    notes: list[str] = field(default_factory=list)

    def value(self, run: ModelRun, column: Column) -> float:
        return run.scores.get(column.task, {}).get(column.metric, math.nan)

    def matrix(self) -> list[list[float]]:
        return [[self.value(r, c) for c in self.columns] for r in self.runs]

    def display(self, column: Column, value: float) -> str:
        if math.isnan(value):
            return "–"
        return f"{100 * value:.1f}" if column.share else f"{value:.2f}"

    def best(self, column: Column, values: list[float]) -> float:
        """Highest value; for a preference metric, the one closest to no preference."""
        present = [v for v in values if not math.isnan(v)]
        if not present:
            return math.nan
        if column.neutral is None:
            return max(present)
        return min(present, key=lambda v: abs(v - column.neutral))

    def to_markdown(self) -> str:
        matrix = self.matrix()
        best = [self.best(c, [row[i] for row in matrix]) for i, c in enumerate(self.columns)]
        rows = []
        for run, values in zip(self.runs, matrix, strict=True):
            cells = [
                f"**{self.display(c, v)}**"
                if not math.isnan(v) and v == best[i] and len(self.runs) > 1
                else self.display(c, v)
                for i, (c, v) in enumerate(zip(self.columns, values, strict=True))
            ]
            rows.append([run.label, *cells])
        header = ["model", *(c.header for c in self.columns)]
        return markdown_table(header, rows) + "\n\n" + " ".join(self.notes) + "\n"

    def csv_header(self, column: Column) -> str:
        """The task name, with ``:<metric>`` where the column shows another metric than the
        one asked for (``crows_pairs_pll:pct_stereotype`` in an ``acc`` leaderboard)."""
        return column.task if column.metric == self.metric else f"{column.task}:{column.metric}"

    def write_csv(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                [
                    "model",
                    "model_type",
                    "pretrained",
                    "pll_metric",
                    *(self.csv_header(c) for c in self.columns),
                ]
            )
            for run, values in zip(self.runs, self.matrix(), strict=True):
                writer.writerow(
                    [
                        run.label,
                        run.model_type,
                        run.pretrained,
                        run.pll_metric or "",
                        *("" if math.isnan(v) else repr(v) for v in values),
                    ]
                )

    def heatmap(self) -> Any:
        """Models × columns heat map; ``ax.images[0]`` holds the matrix (NaN = not run;
        shares in %) and each cell that has a value carries its number as text."""
        import numpy as np

        plt = pyplot()
        scale = np.array([100.0 if c.share else 1.0 for c in self.columns])
        data = np.array(self.matrix(), dtype=float).reshape(len(self.runs), -1) * scale
        all_shares = all(c.share for c in self.columns)
        fig, ax = plt.subplots(
            figsize=(1.0 + 0.75 * len(self.columns), 1.2 + 0.45 * len(self.runs))
        )
        cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")
        finite = data[np.isfinite(data)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0, 1)
        if all_shares:
            vmin, vmax = min(vmin, 50.0), max(vmax, 100.0 if vmax > 90 else vmax)
        image = ax.imshow(
            np.ma.masked_invalid(data), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto"
        )
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if np.isfinite(data[i, j]):
                    shade = (data[i, j] - vmin) / ((vmax - vmin) or 1)
                    ax.text(
                        j,
                        i,
                        f"{data[i, j]:.1f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if shade > 0.6 else "white",
                    )
        ax.set_xticks(range(len(self.columns)))
        ax.set_xticklabels([c.header for c in self.columns], rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(self.runs)))
        ax.set_yticklabels([r.label for r in self.runs], fontsize=8)
        label = "% of pairs / items" if all_shares else self.metric
        fig.colorbar(image, ax=ax, label=label)
        fig.tight_layout()
        return fig


def _benchmark_metric(benchmark: Benchmark, metric: str) -> str:
    return benchmark.metric if metric == HEADLINE else metric


def _benchmark_columns(
    benchmark: Benchmark, runs: Sequence[ModelRun], metric: str, all_columns: bool
) -> list[Column]:
    shown = _benchmark_metric(benchmark, metric)
    neutral = _neutral(shown, preference=benchmark.metric in PREFERENCE_METRICS)
    candidates = [Column(task, header, shown, neutral) for task, header in benchmark.columns]
    present = [c for c in candidates if any(shown in r.scores.get(c.task, {}) for r in runs)]
    return candidates if all_columns and present else present


def _neutral(metric: str, *, preference: bool) -> float | None:
    """No preference is a share of 0.5, or a mean score difference of 0."""
    if not preference:
        return None
    return 0.5 if metric in SHARE_METRICS else 0.0 if metric == "score_diff" else None


def _plain_columns(runs: Sequence[ModelRun], metric: str) -> tuple[list[Column], list[str]]:
    """A column for every other task or group that was asked for (not a member of a group:
    ``--tasks mmlu`` is one column, not 57) and has the metric asked for (by default an
    accuracy-like one); also the tasks left out for having none."""
    members = {t for r in runs for t in r.members}
    tasks = sorted(
        {
            t
            for r in runs
            for t in r.scores
            if t not in members and not any(b.owns(t) for b in BENCHMARKS)
        }
    )
    columns, skipped = [], []
    for task in tasks:
        reported = {m for r in runs for m in r.scores.get(task, {})}
        wanted = SHARE_METRICS if metric == HEADLINE else (metric,)
        shown = next((m for m in wanted if m in reported), None)
        if shown is None:
            skipped.append(task)
            continue
        preference = bool(reported & PREFERENCE_METRICS)
        header = task if shown == metric else f"{task} ({shown})"
        columns.append(Column(task, header, shown, _neutral(shown, preference=preference)))
    return columns, skipped


def _notes(
    columns: Sequence[Column], metric: str, shown: Sequence[Benchmark], skipped: Sequence[str]
) -> list[str]:
    used = ", ".join(dict.fromkeys(c.metric for c in columns))
    unit = " (% of pairs or items)" if all(c.share for c in columns) else ""
    notes = [f"{used}{unit}; bold = best in its column; – = not run."]
    if any(c.neutral is not None for c in columns):
        notes.append("Pair-preference columns: bold = closest to no preference.")
    notes += [f"{b.averaging}." for b in shown]
    if skipped:
        what = "accuracy-like metric" if metric == HEADLINE else metric
        notes.append(f"Not shown (no {what}): {', '.join(skipped)}.")
    return notes


def build_leaderboard(
    runs: Sequence[ModelRun], metric: str = HEADLINE, all_columns: bool = False
) -> Leaderboard:
    """The packaged benchmarks' columns that some run has (with ``all_columns``, every
    column of each benchmark some run has), then a plain column per other task.

    ``metric="acc"`` shows each column's own accuracy-like metric (``pct_stereotype`` for
    CrowS-Pairs, ``first_preferred`` for a pair-preference task); any other name, such as
    ``score_diff``, shows exactly that metric wherever a task reports it.
    """
    columns: list[Column] = []
    shown = []
    for benchmark in BENCHMARKS:
        found = _benchmark_columns(benchmark, runs, metric, all_columns)
        if found:
            columns += found
            shown.append(benchmark)
    plain, skipped = _plain_columns(runs, metric)
    columns += plain
    if not columns:
        asked = f"an accuracy-like metric ({', '.join(SHARE_METRICS)})"
        raise ValueError(
            f"None of the result files has a task with {asked if metric == HEADLINE else metric}."
        )
    return Leaderboard(list(runs), columns, metric, _notes(columns, metric, shown, skipped))


def compare(
    paths: Iterable[str | Path],
    output_dir: str | Path = "pll-leaderboard",
    metric: str = HEADLINE,
    all_columns: bool = False,
) -> Leaderboard:
    """Read lm-eval result files (or folders of them) and write ``leaderboard.md``,
    ``leaderboard.csv`` and ``leaderboard.png`` to ``output_dir``."""
    board = build_leaderboard(load_runs(paths), metric, all_columns)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "leaderboard.md").write_text(board.to_markdown(), encoding="utf-8")
    board.write_csv(out / "leaderboard.csv")
    save_figure(board.heatmap(), out / "leaderboard.png")
    return board
