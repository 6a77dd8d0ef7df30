"""``pll-harness compare``: a leaderboard from lm-eval result files.

Reads the ``results_*.json`` files that ``lm_eval --output_path`` writes, for ``pll-mlm``
runs (one row per model and metric) and for any other lm-eval model such as ``hf`` (one
row per model), and lays out BLiMP overall and by phenomenon as in Table 3 of Kauf &
Ivanova (2023), then EventsAdapt overall and by trial type and voice.  Runs of the same
model and metric in several files are merged (the newer file wins where they overlap).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pll_harness.tools.metrics import DEFAULT_METRIC_NAME, METRIC_NAMES
from pll_harness.tools.models import short_model_name
from pll_harness.tools.plotting import pyplot, save_figure
from pll_harness.tools.tables import markdown_table

BLIMP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("blimp_pll", "BLiMP overall"),
    ("blimp_pll_anaphor_agreement", "ANA. AGR"),
    ("blimp_pll_argument_structure", "ARG STR."),
    ("blimp_pll_binding", "BINDING"),
    ("blimp_pll_control_raising", "CTRL. RAIS."),
    ("blimp_pll_determiner_noun_agreement", "D-N AGR"),
    ("blimp_pll_ellipsis", "ELLIPSIS"),
    ("blimp_pll_filler_gap_dependency", "FILLER GAP"),
    ("blimp_pll_irregular_forms", "IRREGULAR"),
    ("blimp_pll_island_effects", "ISLAND"),
    ("blimp_pll_npi_licensing", "NPI"),
    ("blimp_pll_quantifiers", "QUANTIFIERS"),
    ("blimp_pll_subject_verb_agreement", "S-V AGR"),
)
EVENTSADAPT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("eventsadapt_pll", "EventsAdapt"),
    ("eventsadapt_pll_ai", "EA AI"),
    ("eventsadapt_pll_aan", "EA AAN"),
    ("eventsadapt_pll_aar", "EA AAR"),
    ("eventsadapt_pll_active", "EA active"),
    ("eventsadapt_pll_passive", "EA passive"),
)
COLUMNS = BLIMP_COLUMNS + EVENTSADAPT_COLUMNS
ALIASES = {"eventsadapt_pll_by_voice": "eventsadapt_pll"}
"""Tasks that report the same number as another column (both EventsAdapt views)."""


@dataclass
class ModelRun:
    """One leaderboard row: a model (and PLL metric) with its task scores."""

    label: str
    model_type: str
    pretrained: str
    pll_metric: str | None
    scores: dict[str, float] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def sort_key(self) -> tuple[Any, ...]:
        metric = METRIC_NAMES.index(self.pll_metric) if self.pll_metric in METRIC_NAMES else 99
        return (self.pretrained, metric, self.label)


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
        metric = args.get("pll_metric", DEFAULT_METRIC_NAME)
        return f"{name} ({metric})", model_type, str(pretrained), metric
    return f"{name} ({model_type})", model_type, str(pretrained), None


def load_runs(paths: Iterable[str | Path], metric: str = "acc") -> list[ModelRun]:
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
        for task, values in data["results"].items():
            value = values.get(f"{metric},none")
            if isinstance(value, int | float) and not isinstance(value, bool):
                run.scores[ALIASES.get(task, task)] = float(value)
    return sorted(runs.values(), key=ModelRun.sort_key)


@dataclass
class Leaderboard:
    runs: list[ModelRun]
    columns: list[tuple[str, str]]
    metric: str

    def value(self, run: ModelRun, task: str) -> float:
        return run.scores.get(task, math.nan)

    def matrix(self) -> list[list[float]]:
        return [[self.value(r, t) for t, _ in self.columns] for r in self.runs]

    def display(self, value: float) -> str:
        if math.isnan(value):
            return "–"
        return f"{100 * value:.1f}" if self.metric == "acc" else f"{value:.2f}"

    def to_markdown(self) -> str:
        matrix = self.matrix()
        best = []
        for c in range(len(self.columns)):
            column = [row[c] for row in matrix if not math.isnan(row[c])]
            best.append(max(column) if column else math.nan)
        rows = []
        for run, values in zip(self.runs, matrix, strict=True):
            cells = [
                f"**{self.display(v)}**"
                if not math.isnan(v) and v == best[c] and len(self.runs) > 1
                else self.display(v)
                for c, v in enumerate(values)
            ]
            rows.append([run.label, *cells])
        unit = "accuracy, %" if self.metric == "acc" else self.metric
        note = (
            f"{self.metric} ({unit}); bold = best in its column; – = not run. BLiMP overall is "
            "the mean of the 67 paradigms, a phenomenon the mean of its paradigms; "
            "EventsAdapt columns pool their pairs."
        )
        return markdown_table(["model", *(h for _, h in self.columns)], rows) + "\n\n" + note + "\n"

    def write_csv(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                ["model", "model_type", "pretrained", "pll_metric", *(t for t, _ in self.columns)]
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
        """Models × columns heat map; ``ax.images[0]`` holds the matrix (NaN = not run)
        and each cell that has a value carries its number as text."""
        import numpy as np

        plt = pyplot()
        data = np.array(self.matrix(), dtype=float)
        if self.metric == "acc":
            data = data * 100
        fig, ax = plt.subplots(
            figsize=(1.0 + 0.75 * len(self.columns), 1.2 + 0.45 * len(self.runs))
        )
        cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")
        finite = data[np.isfinite(data)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0, 1)
        if self.metric == "acc":
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
        ax.set_xticklabels([h for _, h in self.columns], rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(self.runs)))
        ax.set_yticklabels([r.label for r in self.runs], fontsize=8)
        fig.colorbar(image, ax=ax, label="accuracy (%)" if self.metric == "acc" else self.metric)
        fig.tight_layout()
        return fig


def build_leaderboard(
    runs: Sequence[ModelRun], metric: str = "acc", all_columns: bool = False
) -> Leaderboard:
    """Keep the columns that some run has (all of them with ``all_columns``)."""
    columns = [
        (task, header)
        for task, header in COLUMNS
        if all_columns or any(task in r.scores for r in runs)
    ]
    if not columns:
        raise ValueError(
            "None of the result files has blimp_pll or eventsadapt_pll tasks "
            f"({metric}). compare reads runs of this package's tasks (docs/tasks.md)."
        )
    return Leaderboard(list(runs), columns, metric)


def compare(
    paths: Iterable[str | Path],
    output_dir: str | Path = "pll-leaderboard",
    metric: str = "acc",
    all_columns: bool = False,
) -> Leaderboard:
    """Read lm-eval result files (or folders of them) and write ``leaderboard.md``,
    ``leaderboard.csv`` and ``leaderboard.png`` to ``output_dir``."""
    board = build_leaderboard(load_runs(paths, metric), metric, all_columns)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "leaderboard.md").write_text(board.to_markdown(), encoding="utf-8")
    board.write_csv(out / "leaderboard.csv")
    save_figure(board.heatmap(), out / "leaderboard.png")
    return board
