"""``pll-harness compare``: a leaderboard from lm-eval result files.

Reads the ``results_*.json`` files that ``lm_eval --output_path`` writes, for ``pll-mlm``
runs (one row per model and metric) and for any other lm-eval model such as ``hf`` (one
row per model).  The benchmarks this package ships keep their structured layout, read from
:mod:`pll_harness.tasks.catalog`: BLiMP overall and by phenomenon as in Table 3 of Kauf &
Ivanova (2023), EventsAdapt by trial type and voice, CrowS-Pairs by bias type, CLAMS by
language, Zorro by phenomenon.  Any other task or group that was asked for (a user's own
pairs, or one of lm-eval's) and reports an accuracy-like metric gets a plain column.

A row is one way of scoring: the model type, the checkpoint and every model argument that
changes the numbers (PLL metric, dtype, revision, ...), and lm-eval's ``--limit``.  Files
that agree on all of these are merged into one row (two runs covering different tasks);
files that differ in any of them never are, because a row that showed one file's checkpoint
beside another's numbers would be silently wrong.  Where merged files both report a task
with different values, the newer (by the results' ``date``) is used and a warning on
standard error names both files.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pll_harness.metrics import DEFAULT_METRIC, PLL_METRICS
from pll_harness.tasks.catalog import BENCHMARKS, HEADLINE, LEADERBOARD_DIR, SCORE_DIFF, Benchmark
from pll_harness.tools.models import short_model_name
from pll_harness.tools.plotting import pyplot, save_figure
from pll_harness.tools.tables import best_shown, fmt_number, markdown_table

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

ALIASES: dict[str, str] = {k: v for b in BENCHMARKS for k, v in b.aliases.items()}
"""Tasks that report the same number as another column (both EventsAdapt views)."""

NON_SCORING_ARGS = frozenset(
    {
        "batch_size",
        "max_batch_size",
        "max_batch_tokens",
        "device",
        "device_map",
        "parallelize",
        "max_memory_per_gpu",
        "max_cpu_memory",
        "offload_folder",
        "trust_remote_code",
        "token_log",
        "token_log_mode",
    }
)
"""``model_args`` that decide where and in what pieces a run is scored, not what it scores
(batch sizes change float rounding only): runs that differ only in these share a row."""

DEFAULT_ARGS: dict[str, dict[str, str]] = {
    "pll-mlm": {"pll_metric": DEFAULT_METRIC, "dtype": "auto", "revision": "main"},
    "hf": {"dtype": "auto", "revision": "main"},
}
"""What a model type takes for an argument left out, so that leaving out ``dtype=auto``
and writing it is one row rather than two."""

RECORDED_ARGS: dict[str, str] = {
    "revision": "model_revision",
    "dtype": "model_dtype",
    "max_length": "pll_max_length",
    "pll_metric": "pll_metric",
    "add_prefix_space": "pll_add_prefix_space",
}
"""``model_args`` whose value in effect the model writes into the results' ``config``
(lm-eval's ``hf`` and our ``pll-mlm`` record ``model_revision`` and ``model_dtype``, ours
``pll_max_length`` and ``pll_metric``): where recorded, that value defines the row, so
``dtype=auto`` and the dtype it resolved to, or ``max_length`` left at its default and
written out, are one row, and a run from Python, whose results hold no ``model_args``,
still has its revision and metric."""

MODEL_TYPES: dict[str, str] = {"PLLMaskedLM": "pll-mlm"}
"""The model type lm-eval records for a model object handed to ``simple_evaluate`` (its
class name), as the ``--model`` name that builds the same model."""


@dataclass
class ModelRun:
    """One leaderboard row: a model scored one way, with every numeric task metric."""

    label: str
    model_type: str
    pretrained: str
    """The checkpoint as the run named it (what labels show)."""
    pll_metric: str | None
    settings: dict[str, str] = field(default_factory=dict)
    """The ``model_args`` that change scores (all but :data:`NON_SCORING_ARGS`), defaults
    filled in; ``pretrained`` is its own field."""
    limit: str | None = None
    """lm-eval's ``--limit`` (items per task, or a share below 1); None for a full run."""
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    """task -> metric (``acc``, ``score_diff``, ...) -> value."""
    members: set[str] = field(default_factory=set)
    """Tasks reported as part of a group of the same file (lm-eval's ``group_subtasks``)."""
    files: list[str] = field(default_factory=list)
    checkpoint: str = ""
    """The checkpoint as the results record it (``pll-mlm`` writes a local folder as its
    absolute path, so the same folder named relatively and absolutely is one row); empty
    where they do not, and ``pretrained`` stands in."""

    @property
    def key(self) -> tuple[Any, ...]:
        """What must agree for two result files to be one row."""
        return (
            self.model_type,
            self.checkpoint or self.pretrained.rstrip("/") or self.pretrained,
            tuple(sorted(self.settings.items())),
            self.limit,
        )

    def sort_key(self) -> tuple[Any, ...]:
        metric = PLL_METRICS.index(self.pll_metric) if self.pll_metric in PLL_METRICS else 99
        return (self.pretrained, metric, self.limit is not None, self.label)


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


def _limit(config: dict[str, Any]) -> str | None:
    """lm-eval's ``--limit`` as written (its command line stores ``20`` as ``20.0``)."""
    limit = config.get("limit")
    if limit is None:
        return None
    if isinstance(limit, float) and limit.is_integer():
        return str(int(limit))
    return str(limit)


def _label(name: str, kind: str, extras: Sequence[str], limit: str | None) -> str:
    details = [kind, *extras, *([f"limit={limit}"] if limit is not None else [])]
    return f"{name} ({', '.join(details)})"


def describe_run(data: dict[str, Any]) -> ModelRun:
    """An empty row for one lm-eval result file, labelled by its model's short name alone
    (the label it keeps where no other row shares that name)."""
    config = data.get("config") or {}
    model_type = str(config.get("model") or "unknown")
    model_type = MODEL_TYPES.get(model_type, model_type)
    args = _model_args(config)
    pretrained = str(args.get("pretrained") or args.get("model") or data.get("model_name") or "?")
    settings = DEFAULT_ARGS.get(model_type, {}) | {
        k: v for k, v in args.items() if k not in NON_SCORING_ARGS and k != "pretrained"
    }
    for arg, recorded in RECORDED_ARGS.items():
        if config.get(recorded) not in (None, ""):
            settings[arg] = str(config[recorded]).removeprefix("torch.")
    metric = settings["pll_metric"] if model_type == "pll-mlm" else None
    limit = _limit(config)
    label = _label(short_model_name(pretrained), metric or model_type, (), limit)
    checkpoint = str(config.get("model_checkpoint") or "")
    tokenizer = str(config.get("model_tokenizer") or "")
    if tokenizer:  # as recorded: the checkpoint's own is no setting, another one is
        settings.pop("tokenizer", None)
        if tokenizer != checkpoint:
            settings["tokenizer"] = tokenizer
    return ModelRun(label, model_type, pretrained, metric, settings, limit, checkpoint=checkpoint)


def _numbers(values: dict[str, Any]) -> dict[str, float]:
    """lm-eval's ``"acc,none": 0.8`` entries as ``{"acc": 0.8}`` (the unfiltered ones),
    and lm-eval 0.3's ``"acc": 0.8``, written before metrics had filters."""
    numbers = {}
    for key, value in values.items():
        metric, comma, filter_name = key.partition(",")
        unfiltered = filter_name == "none" or not comma
        if unfiltered and isinstance(value, int | float) and not isinstance(value, bool):
            numbers[metric] = float(value)
    return numbers


def _read_result_file(path: Path) -> dict[str, Any]:
    """One result file's JSON, or an error that names the file: among a folder of runs, a
    bare JSON error would not say which one is cut short."""
    try:
        text = path.read_bytes().decode("utf-8-sig")  # a BOM, where an editor saved one
        data = json.loads(text)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        if isinstance(error, json.JSONDecodeError) and not text.strip():
            raise ValueError(
                f"{path} is empty; a run killed as it began writing leaves its result file "
                "so. Re-run it, or move the file out of the way."
            ) from error
        if not isinstance(error, json.JSONDecodeError) or not text.lstrip().startswith("{"):
            raise ValueError(
                f"{path} is not an lm-eval result file (not JSON): give the results_*.json "
                "files that lm_eval --output_path writes, or their folders."
            ) from error
        raise ValueError(
            f"{path} is not valid JSON ({error}); a run killed or still writing leaves its "
            "result file cut short. Re-run it, or move the file out of the way."
        ) from error
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError(f"{path} is not an lm-eval result file (no 'results' key).")
    results, date = data["results"], data.get("date") or 0.0
    if not isinstance(results, dict) or not all(isinstance(v, dict) for v in results.values()):
        raise ValueError(
            f"{path} is not an lm-eval result file: its 'results' is not a mapping of each "
            "task to its metrics."
        )
    if isinstance(date, bool) or not isinstance(date, int | float):
        raise ValueError(
            f"{path}: its 'date' is {date!r}, where lm-eval writes the run's time in seconds "
            "since 1970 (which orders the files)."
        )
    return data


MIXED_SHOTS = "mixed"
"""The count of a group whose members were shown different numbers of examples."""


def _shot_counts(data: dict[str, Any]) -> dict[str, int | str]:
    """Each task's and group's number of examples shown before an item: lm-eval's
    ``n-shot``, and for a group it leaves out (lm-eval 0.4.3 to 0.4.10 write none for
    groups; 0.4.13 none where the members disagree) its members' count, or
    :data:`MIXED_SHOTS` where they differ."""
    counts: dict[str, int | str] = dict(data.get("n-shot") or {})
    groups: dict[str, list[str]] = data.get("group_subtasks") or {}

    def count(task: str, above: frozenset[str]) -> int | str | None:
        if task in counts or task not in groups or task in above:
            return counts.get(task)
        found = {count(member, above | {task}) for member in groups[task]} - {None}
        if found:
            counts[task] = found.pop() if len(found) == 1 else MIXED_SHOTS
        return counts.get(task)

    for group in groups:
        count(group, frozenset())
    return counts


def _with_shots(task: str, shots: dict[str, int | str], name: str | None = None) -> str:
    """``task`` as a column knows it: ``arc_easy (5-shot)`` where the run showed examples
    before each item (the count of ``name`` in ``shots``, by default ``task``'s), so that
    the same task scored with and without them never shares a cell.  The packaged tasks
    are always 0-shot."""
    count = shots.get(task if name is None else name)
    if count == MIXED_SHOTS:
        return f"{task} ({MIXED_SHOTS}-shot)"
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return f"{task} ({count}-shot)"
    return task


def _differing(old: dict[str, float], new: dict[str, float]) -> str | None:
    """The first metric both report with different values, as ``acc 0.9 vs 0.1``."""
    for metric, a in old.items():
        b = new.get(metric, a)
        same = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
        if not same:
            return f"{metric} {a!r} vs {b!r}"
    return None


def _tail(pretrained: str, depth: int) -> str:
    """The last ``depth`` components of a checkpoint path; the whole name once that is all."""
    parts = PurePosixPath(pretrained).parts
    if depth >= len(parts):
        return pretrained.rstrip("/") or pretrained
    return "/".join(parts[-depth:])


def _assign_labels(runs: Sequence[ModelRun]) -> None:
    """Unique labels, as short as they can be: rows whose checkpoints share a folder name
    show more of their paths (``run1/final``, ``run2/final``), and rows of one checkpoint
    scored differently name the settings in which they differ (``dtype=float16``)."""
    names = [run.checkpoint or run.pretrained for run in runs]
    depth = [len(PurePosixPath(short_model_name(name)).parts) for name in names]

    def same_label() -> list[list[int]]:
        groups: dict[str, list[int]] = {}
        for i, run in enumerate(runs):
            name = _tail(names[i], depth[i])
            kind = run.pll_metric or run.model_type
            groups.setdefault(_label(name, kind, (), run.limit), []).append(i)
        return list(groups.values())

    while longer := [
        i
        for group in same_label()
        if len({runs[i].key[1] for i in group}) > 1
        for i in group
        if _tail(names[i], depth[i]) != _tail(names[i], depth[i] + 1)
    ]:
        for i in longer:
            depth[i] += 1
    for group in same_label():
        settings = [runs[i].settings for i in group]
        keys = sorted({k for s in settings for k in s} - {"pll_metric"})
        differing = [k for k in keys if len({s.get(k) for s in settings}) > 1]
        for i in group:
            run = runs[i]
            extras = [f"{k}={run.settings[k]}" for k in differing if k in run.settings]
            kind = run.pll_metric or run.model_type
            run.label = _label(_tail(names[i], depth[i]), kind, extras, run.limit)


def load_runs(paths: Iterable[str | Path]) -> list[ModelRun]:
    """Read result files into leaderboard rows, one per way of scoring (see the module's
    docstring).

    A file that is not valid JSON stops the whole comparison with an error naming it,
    rather than being skipped: a skipped file would drop a model or a task from the
    leaderboard without anyone noticing.
    """
    files = find_result_files(paths)
    if not files:
        raise ValueError("No lm-eval result files (results_*.json) found.")
    loaded = []
    for path in files:
        data = _read_result_file(Path(path))
        loaded.append((float(data.get("date") or 0.0), str(path), data))
    runs: dict[tuple[Any, ...], ModelRun] = {}
    source: dict[tuple[tuple[Any, ...], str], tuple[float, str, dict[str, float]]] = {}
    conflicts: dict[tuple[tuple[Any, ...], str, str], list[tuple[str, str, float, float]]] = {}
    for date, path, data in sorted(loaded, key=lambda item: (item[0], item[1])):
        fresh = describe_run(data)
        run = runs.setdefault(fresh.key, fresh)
        run.files.append(path)
        shots = _shot_counts(data)
        run.members.update(
            _with_shots(t, shots) for ts in (data.get("group_subtasks") or {}).values() for t in ts
        )
        for name, values in data["results"].items():
            task, numbers = _with_shots(ALIASES.get(name, name), shots, name), _numbers(values)
            before = source.get((run.key, task))
            if before is not None and before[1] != path:
                difference = _differing(before[2], numbers)
                if difference is not None:
                    where = (run.key, before[1], path)
                    conflicts.setdefault(where, []).append((task, difference, before[0], date))
            source[(run.key, task)] = (date, path, numbers)
            run.scores.setdefault(task, {}).update(numbers)
    _assign_labels(list(runs.values()))
    for (key, old, new), tasks in conflicts.items():
        _warn_conflict(runs[key].label, old, new, tasks)
    return sorted(runs.values(), key=ModelRun.sort_key)


def _warn_conflict(
    label: str, old: str, new: str, tasks: Sequence[tuple[str, str, float, float]]
) -> None:
    task, difference, old_date, new_date = tasks[0]
    more = f" and {len(tasks) - 1} more task(s)" if len(tasks) > 1 else ""
    why = (
        "the newer by the results' date"
        if new_date > old_date
        else "both have the same date; the later path"
    )
    print(
        f"pll-harness compare: warning: {label}: {old} and {new} both report {task}{more} "
        f"with different values ({task}: {difference}); using {new} ({why}).",
        file=sys.stderr,
    )


@dataclass
class Leaderboard:
    runs: list[ModelRun]
    columns: list[Column]
    metric: str
    notes: list[str] = field(default_factory=list)

    def value(self, run: ModelRun, column: Column) -> float:
        return run.scores.get(column.task, {}).get(column.metric, math.nan)

    def has_score(self, run: ModelRun, column: Column) -> bool:
        """Whether the run wrote this score, NaN included: lm-eval writes NaN for a metric
        it could not compute, which is not a task left out."""
        return column.metric in run.scores.get(column.task, {})

    def matrix(self) -> list[list[float]]:
        return [[self.value(r, c) for c in self.columns] for r in self.runs]

    @staticmethod
    def _scale_and_digits(column: Column) -> tuple[float, int]:
        return (100.0, 1) if column.share else (1.0, 2)

    def display(self, run: ModelRun, column: Column, value: float) -> str:
        """The cell as shown: "–" where the run has no such score, "nan" where it wrote NaN."""
        if math.isnan(value) and self.has_score(run, column):
            return "nan"
        scale, digits = self._scale_and_digits(column)
        return fmt_number(scale * value, digits)

    def bold(self, column: Column, values: Sequence[float]) -> list[bool]:
        """The best cells of a column (highest; for a preference metric, closest to no
        preference on either side), judged at the precision shown (:func:`best_shown`)."""
        scale, digits = self._scale_and_digits(column)
        return best_shown(values, digits, scale, column.neutral)

    def to_markdown(self) -> str:
        matrix = self.matrix()
        bold = [self.bold(c, [row[i] for row in matrix]) for i, c in enumerate(self.columns)]
        rows = []
        for r, (run, values) in enumerate(zip(self.runs, matrix, strict=True)):
            cells = [
                f"**{self.display(run, c, v)}**" if bold[i][r] else self.display(run, c, v)
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
                    "limit",
                    "settings",
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
                        run.limit or "",
                        ",".join(f"{k}={v}" for k, v in sorted(run.settings.items())),
                        *(
                            repr(v) if self.has_score(run, c) else ""
                            for c, v in zip(self.columns, values, strict=True)
                        ),
                    ]
                )

    def heatmap(self) -> Any:
        """Models × columns heat map; ``ax.images[0]`` holds the matrix (NaN = not run or NaN;
        shares in %) and each cell that has a value carries its number as text."""
        import numpy as np

        plt = pyplot()
        scale = np.array([100.0 if c.share else 1.0 for c in self.columns])
        data = np.array(self.matrix(), dtype=float).reshape(len(self.runs), -1) * scale
        all_shares = all(c.share for c in self.columns)
        labels = max(len(r.label) for r in self.runs)  # labels grow to tell rows apart
        fig, ax = plt.subplots(
            figsize=(1.5 + 0.06 * labels + 0.75 * len(self.columns), 1.2 + 0.45 * len(self.runs))
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
    return 0.5 if metric in SHARE_METRICS else 0.0 if metric == SCORE_DIFF else None


def _outside_benchmarks(task: str, run: ModelRun) -> bool:
    """Whether no packaged benchmark's column shows ``task`` for ``run``: it is none of
    their columns (nor a group reporting a column's number), and a benchmark that owns it
    (a BLiMP paradigm, say) has no column in this run.  A paradigm run alone was otherwise
    dropped without a word."""
    for benchmark in BENCHMARKS:
        shown = {t for t, _ in benchmark.columns} | set(benchmark.aliases)
        if task in shown or (benchmark.owns(task) and shown & run.scores.keys()):
            return False
    return True


def _plain_columns(runs: Sequence[ModelRun], metric: str) -> tuple[list[Column], list[str]]:
    """A column for every other task or group that was asked for (not a member of a group:
    ``--tasks mmlu`` is one column, not 57) and has the metric asked for (by default an
    accuracy-like one); also the tasks left out for having none.  A packaged benchmark's
    task that is none of its columns (one BLiMP paradigm) is such a task too, unless its
    run has the benchmark's columns, which stand for it."""
    members = {t for r in runs for t in r.members}
    tasks = sorted(
        {t for r in runs for t in r.scores if t not in members and _outside_benchmarks(t, r)}
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
    runs: Sequence[ModelRun],
    columns: Sequence[Column],
    metric: str,
    shown: Sequence[Benchmark],
    skipped: Sequence[str],
) -> list[str]:
    used = ", ".join(dict.fromkeys(c.metric for c in columns))
    unit = " (% of pairs or items)" if all(c.share for c in columns) else ""
    notes = [f"{used}{unit}; bold = best in its column; – = not run."]
    if any(c.neutral is not None for c in columns):
        notes.append("Pair-preference columns: bold = closest to no preference.")
    for benchmark in shown:
        notes.append(f"{benchmark.averaging}.")
        if benchmark.metric_note and _benchmark_metric(benchmark, metric) == benchmark.metric:
            notes.append(f"{benchmark.metric_note}.")
    if any(r.limit is not None for r in runs):
        notes.append(
            "limit=N: run with lm-eval's --limit, each task on its first N items (below 1: "
            "that share of them), so not comparable with full runs."
        )
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
    return Leaderboard(list(runs), columns, metric, _notes(runs, columns, metric, shown, skipped))


def compare(
    paths: Iterable[str | Path],
    output_dir: str | Path = LEADERBOARD_DIR,
    metric: str = HEADLINE,
    all_columns: bool = False,
) -> Leaderboard:
    """Read lm-eval result files (or folders of them) and write ``leaderboard.md``,
    ``leaderboard.csv`` and ``leaderboard.png`` to ``output_dir``."""
    board = build_leaderboard(load_runs(paths), metric, all_columns)
    pyplot()  # the heat map's matplotlib: missing, it stops the run before any file is written
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "leaderboard.md").write_text(board.to_markdown(), encoding="utf-8")
    board.write_csv(out / "leaderboard.csv")
    save_figure(board.heatmap(), out / "leaderboard.png")
    return board
