"""Load sentence pairs from local files and score them as lm-eval tasks.

Every minimal-pair task in this folder (BLiMP, EventsAdapt, a user's own CSV) goes through
the same four steps, named from the YAML templates in ``templates/``:

1. ``custom_dataset`` loads a local CSV / JSONL / Parquet file with ``datasets``' packaged
   builders (never the Hub) and renames the two chosen columns to fixed names, so that one
   template serves any file layout;
2. ``process_docs`` hands lm-eval the split as a list of dicts (:class:`Documents`);
3. ``doc_to_choice`` hands lm-eval the two sentences exactly as written (the templates set an
   empty context and an empty target delimiter, so no prompt and no leading space);
4. ``process_results`` compares the two log-likelihoods itself.  lm-eval's own ``acc`` takes
   ``argmax``, which counts a tie as a win for the first choice; the papers count it as a loss.
"""

from __future__ import annotations

import codecs
import difflib
import glob
import hashlib
import io
import itertools
import logging
import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import fsspec
import pyarrow
import pyarrow.json
import pyarrow.parquet

from pll_harness.file_formats import (
    CSV_QUOTING_RULE,
    DELIMITERS,
    MalformedCSV,
    format_from_name,
    strict_csv_rows,
)

SPLIT = "test"
"""The one split our loaders build; the templates set ``test_split`` to it."""

GOOD, BAD = "sentence_good", "sentence_bad"
FIRST, SECOND = "sentence_first", "sentence_second"

DATA_FORMATS = ("csv", "json", "jsonl", "parquet", "tsv")
"""What ``data_format`` may say (``json`` and ``jsonl`` both read JSON Lines)."""

TASK_YAML_KEY = "pll_harness_task_yaml"
"""The metadata key under which the start-up hook records a pair task's YAML file
(:func:`record_task_yaml`); lm-eval passes it to the loader as a keyword argument."""


class _DropCustomDatasetAdvice(logging.Filter):
    """Hide lm-eval's "Custom kwargs can be passed to `--metadata`" line.

    lm-eval logs it, twice-lined, for every task whose data comes from ``custom_dataset``:
    67 times for BLiMP.  It advertises options our loaders do not take, so it is pure noise.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "Custom kwargs can be passed to `--metadata`" not in record.getMessage()


def _quiet_lm_eval_task_logger() -> None:
    logger = logging.getLogger("lm_eval.api.task")
    if not any(isinstance(f, _DropCustomDatasetAdvice) for f in logger.filters):
        logger.addFilter(_DropCustomDatasetAdvice())


_quiet_lm_eval_task_logger()

logger = logging.getLogger(f"lm_eval.{__name__}")
_warned: set[str] = set()
"""The cases already reported by this process."""


# --------------------------------------------------------------------------- loading


def load_minimal_pairs(
    data_files: str | Sequence[str],
    good: str = GOOD,
    bad: str = BAD,
    **options: Any,
) -> datasets.DatasetDict:
    """``custom_dataset`` for acceptable/unacceptable pairs: columns become ``sentence_good/bad``.

    ``options`` are those of :func:`load_pairs`; lm-eval also passes the task's metadata here.
    """
    _check_options(options, ("good", "bad"))
    return load_pairs(data_files, {good: GOOD, bad: BAD}, **options)


def load_pair_preferences(
    data_files: str | Sequence[str],
    first: str = FIRST,
    second: str = SECOND,
    **options: Any,
) -> datasets.DatasetDict:
    """``custom_dataset`` for pairs with no right answer (e.g. stereotype vs anti-stereotype)."""
    _check_options(options, ("first", "second"))
    return load_pairs(data_files, {first: FIRST, second: SECOND}, **options)


PAIR_LOADERS = (load_minimal_pairs, load_pair_preferences)
"""The ``custom_dataset`` functions of the pair templates."""

LOADER_OPTIONS = ("data_files", "where", "data_format")
"""The ``dataset_kwargs`` every pair template takes besides its two column names."""

COLUMN_OPTIONS = ("good", "bad", "first", "second")
"""The column names' options of the two loaders (``minimal_pair.yaml`` takes good/bad,
``pair_preference.yaml`` and ``stereotype_pair.yaml`` first/second)."""


def _check_options(options: Mapping[str, Any], columns: tuple[str, str]) -> None:
    """Refuse a ``dataset_kwargs`` key that is a misspelt option or the other template's.

    lm-eval hands the loader the task's ``dataset_kwargs`` mixed with its metadata (``version``,
    every ``--metadata`` key), so unknown keys as such must pass; but ``wehre`` would
    otherwise score every row of the file, and ``good`` on a pair-preference task be
    ignored, without a word."""
    known = (*columns, *LOADER_OPTIONS)
    for key in options:
        if key in known:
            continue
        if key in COLUMN_OPTIONS:
            raise ValueError(
                f"dataset_kwargs.{key} names a column for the other pair template; this one "
                f"names its two sentence columns with {columns[0]!r} and {columns[1]!r}."
            )
        close = _near_miss(key, known)
        if close:
            raise ValueError(
                f"dataset_kwargs has {key!r}: did you mean {close!r}? The pair loaders "
                f"take {', '.join(known)}."
            )


def _near_miss(key: str, options: Sequence[str]) -> str | None:
    """The option ``key`` is probably a misspelling of, if any."""
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.75)
    return close[0] if close else None


def load_pairs(
    data_files: str | Sequence[str],
    columns: Mapping[str, str],
    *,
    where: Mapping[str, Any] | None = None,
    data_format: str | None = None,
    config_source: str | None = None,
    pll_harness_task_yaml: str | None = None,
    **_metadata: Any,
) -> datasets.DatasetDict:
    """Read local pair files into a one-split ``DatasetDict`` with the pair columns renamed.

    Args:
        data_files: one path or several (same format).  Relative paths are taken from the
            folder of the task's YAML, so a task folder can ship its data beside it;
            failing that, from the working folder.
        columns: ``{column in the file: name the template expects}`` for the two sentences.
        where: keep only rows whose columns equal these values (a list means any of them);
            this is how one file feeds several sub-tasks, e.g. EventsAdapt by trial type.
        data_format: ``csv``, ``tsv``, ``json`` or ``parquet``; by default from the suffix.
        config_source: set by lm-eval: the task's YAML for a task found by name, "inline"
            for one handed over as a dict (as ``--tasks path/to/task.yaml`` does).
        pll_harness_task_yaml: set by the start-up hook (:data:`TASK_YAML_KEY`): the YAML
            that an "inline" task was loaded from.
        _metadata: the rest of lm-eval's task metadata (version, ``--metadata``), unused.
    """
    if len(columns) != 2:
        raise ValueError(f"name two different sentence columns, got {list(columns)}")
    paths = _resolve_paths(data_files, _task_yaml(config_source, pll_harness_task_yaml))
    fmt = _format_of(paths[0], data_format)
    dataset = _read(paths, fmt)
    rows = list(range(len(dataset)))
    if where:
        rows = _rows_where(dataset, where)
        dataset = dataset.select(rows)
    dataset = _rename_pair_columns(dataset, columns)
    _check_sentences(dataset, columns, rows, paths)
    return datasets.DatasetDict({SPLIT: dataset})


def record_task_yaml(cfg: dict[str, Any], path: str | Path) -> None:
    """Note in a pair task's metadata the YAML file it was loaded from.

    lm-eval tells the loader a task's YAML (``config_source``) only for a task it found by
    name in a task folder.  ``--tasks path/to/task.yaml`` (or a folder) makes lm-eval load
    the YAML itself and hand over the dict, which it marks "inline": relative
    ``data_files`` would then be looked for in the cwd alone, and a file of that name
    there read instead.  The start-up hook calls this for every YAML that lm-eval loads at
    the top with its functions resolved; other tasks' configs are left as they are."""
    if not any(cfg.get("custom_dataset") is loader for loader in PAIR_LOADERS):
        return
    metadata = cfg.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata[TASK_YAML_KEY] = str(Path(path).expanduser().resolve())


def keep_options_out_of_metadata(config: Any) -> None:
    """Drop a pair task's loader options from its metadata, saying so once per set of keys.

    lm-eval merges ``--metadata`` and every ``--model_args`` key into each task's metadata
    and calls ``custom_dataset(**metadata, **dataset_kwargs)``.  A loader option there is
    meant for some other task of the run, yet it would reach our loader: one that the YAML
    also sets (``data_files``, EventsAdapt's ``where``) stops the run with Python's "got
    multiple values for keyword argument", one it leaves out (``where`` on BLiMP, a
    ``data_format``) silently changes which rows or columns are scored, and a near miss
    (``data_file``) stops the run as a misspelt ``dataset_kwargs`` key
    (:func:`_check_options`).  A pair task's options come from its YAML's
    ``dataset_kwargs`` alone.  The start-up hook calls this for every ``TaskConfig`` that
    lm-eval builds; other tasks' configs are left as they are."""
    metadata = config.metadata
    pair_task = any(config.custom_dataset is loader for loader in PAIR_LOADERS)
    if not pair_task or not isinstance(metadata, dict):
        return
    dropped = sorted(key for key in metadata if _like_an_option(key))
    if not dropped:
        return
    config.metadata = {k: v for k, v in metadata.items() if k not in dropped}
    case = f"metadata options {dropped}"
    if case not in _warned:
        _warned.add(case)
        logger.warning(
            "Task %s (and any other pair task of this run) ignores %s from lm-eval's "
            "--metadata or --model_args, which lm-eval hands every task: a pair task reads "
            "its pairs as its YAML's dataset_kwargs say. Set them there (docs/tasks.md).",
            config.task,
            ", ".join(f"{key}={metadata[key]!r}" for key in dropped),
        )


def _like_an_option(key: str) -> bool:
    """Whether the pair loaders would take ``key`` for one of their options, or refuse it
    as a near miss of one (:func:`_check_options`)."""
    options = (*COLUMN_OPTIONS, *LOADER_OPTIONS)
    return key in options or _near_miss(key, options) is not None


def _task_yaml(config_source: str | None, recorded: str | None) -> str | None:
    """The task's YAML: lm-eval's ``config_source``, else the one the hook recorded."""
    if config_source and config_source != "inline":
        return config_source
    return recorded


_NO_TASK_YAML_ADVICE = (
    "; lm-eval did not say which YAML file this task came from (a task config handed over"
    " as a dict), so give data_files as an absolute path"
)


def _resolve_paths(data_files: str | Sequence[str], task_yaml: str | None) -> list[Path]:
    """Absolute paths, relative ones tried beside the task YAML first, then in the cwd."""
    names = [data_files] if isinstance(data_files, (str, Path)) else list(data_files)
    if not names:
        raise ValueError("data_files is empty: name at least one file of sentence pairs")
    bases: list[Path] = []
    if task_yaml:
        bases.append(Path(task_yaml).expanduser().resolve().parent)
    bases.append(Path.cwd())
    resolved = []
    for name in names:
        path = Path(name).expanduser()
        candidates = [path] if path.is_absolute() else [base / path for base in bases]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            tried = ", ".join(str(c) for c in candidates)
            advice = "" if task_yaml or path.is_absolute() else _NO_TASK_YAML_ADVICE
            raise FileNotFoundError(f"pair file {name!r} not found (tried: {tried}){advice}")
        resolved.append(found.resolve())
    return resolved


def _format_of(path: Path, data_format: str | None) -> str:
    """``data_format`` (``jsonl`` read as ``json``), else the format the file name tells."""
    fmt = data_format
    if fmt is None:
        fmt = format_from_name(path)
        if fmt is None:
            raise ValueError(
                f"cannot tell the format of {path.name}; set dataset_kwargs.data_format "
                f"to one of {list(DATA_FORMATS)}"
            )
    if fmt not in DATA_FORMATS:
        raise ValueError(f"unknown data_format {fmt!r}; use one of {list(DATA_FORMATS)}")
    return "json" if fmt == "jsonl" else fmt


def _read(paths: list[Path], fmt: str) -> datasets.Dataset:
    """The files as one split, with ``datasets``' packaged builder of local files; CSV cells
    stay verbatim ("NA" is a word, not a gap), once :func:`_check_csv_quoting` has found
    their quoting well formed.

    ``Dataset.from_csv`` and its siblings run the same builders as ``load_dataset("csv",
    ...)`` without its module lookup, which for every call sends a download-count request
    to the Hub: 67 requests for BLiMP, 5-10 s of a run where the Hub cannot be reached
    (bench/README.md), however local the files.  A file without records makes those
    builders fail in three different ways (a bare StopIteration among them); that case is
    told apart, only once they have failed, and named.

    JSON Lines is first read as :func:`_read_json_lines_in_memory` reads it."""
    readers: dict[str, tuple[Callable[..., datasets.Dataset], dict[str, Any]]] = {
        "csv": (datasets.Dataset.from_csv, {"keep_default_na": False}),
        "tsv": (datasets.Dataset.from_csv, {"keep_default_na": False, "sep": DELIMITERS["tsv"]}),
        "json": (datasets.Dataset.from_json, {}),
        "parquet": (datasets.Dataset.from_parquet, {}),
    }
    read, kwargs = readers[fmt]
    if fmt in DELIMITERS:
        for path in paths:
            _check_csv_quoting(path, DELIMITERS[fmt])
    if fmt == "json":
        in_memory = _read_json_lines_in_memory(paths)
        if in_memory is not None:
            return in_memory
    try:
        # The builders take glob patterns: `pairs[1].csv` would read `pairs1.csv`.
        return read([glob.escape(str(p)) for p in paths], split=SPLIT, **kwargs)
    except Exception:
        empty = [p.name for p in paths if not _holds_records(p, fmt)]
        if not empty:
            raise
        raise ValueError(
            f"{', '.join(empty)}: no sentence pairs (the file holds no records)"
        ) from None


def _check_csv_quoting(path: Path, delimiter: str) -> None:
    """Refuse a CSV/TSV file whose quoting the CSV rules do not allow, naming its line.

    The builder's reader (pandas) takes a cell that starts with a double quote as a quoted
    cell and, without a word, joins any text after the closing quote to it (the cell
    ``"Stop!" he said.`` is scored as ``Stop! he said.``), or lets a quote never closed run
    on over the rows after it.  Python's csv module in strict mode refuses both and reads
    every well-formed file as pandas does, so one pass of it over the file finds them.  A
    file it cannot decode is left to the builder, whose error names the cause."""
    try:
        # Decompressed as the builder decompresses it (``.gz`` and the like, told by the
        # name), and a leading byte-order mark dropped, as pandas drops it.
        with fsspec.open(
            str(path), "rt", compression="infer", encoding="utf-8-sig", newline=""
        ) as handle:
            for _row in strict_csv_rows(handle, delimiter):
                pass
    except MalformedCSV as error:
        raise ValueError(
            f"{path}: the row that starts on line {error.line} is not well-formed CSV "
            f"({error.fault}). {CSV_QUOTING_RULE}"
        ) from None
    except (OSError, ValueError):  # UnicodeDecodeError included: the builder says why
        return


SINGLE_STREAMS = (None, "gzip")
"""Compressions the in-memory read takes, as fsspec infers them from a file's name: one
stream each, read as the builder reads it once it has decompressed the file (an archive
such as a zip file may hold several files, which the builder reads one after the
other)."""


MAX_IN_MEMORY_BYTES = 64 << 20
"""Most bytes one in-memory read takes over all its files (the largest packaged task's file
holds 3.4 MB); beyond, the builder's memory-mapped Arrow copy keeps a large split out of
RAM."""


def _read_json_lines_in_memory(paths: list[Path]) -> datasets.Dataset | None:
    """JSON Lines files of plain columns, each within one chunk of the JSON builder, read
    with the builder's own parser call (pyarrow's, with its block size) into an in-memory
    split; or None, and the builder reads them or says why it cannot: a file larger than a
    chunk, one without rows or columns, one that starts with a byte-order mark or is one
    JSON array, one that pyarrow cannot parse or that its name says is an archive or
    compressed other than by gzip, a nested column (which the builder may store as JSON
    text), the columns of an agent's traces (which it reshapes), files whose columns
    differ, more than MAX_IN_MEMORY_BYTES in all.  What is left is the case where the
    builder parses each file in one call and stores the result as it is, so both give the
    same split.

    The builder's bookkeeping around that call (hashing the files, writing an Arrow copy
    of each into the ``datasets`` cache, then memory-mapping it) cost about 20 ms a file
    with an empty cache, as a fresh machine has: lm-eval loaded blimp_pll's 67 tasks in
    1.42-2.03 s that way (0.58-0.76 s from a filled cache), in 0.54-0.75 s this way, with
    or without a cache (bench/README.md)."""
    from datasets.packaged_modules.json import json as json_builder
    from datasets.table import InMemoryTable

    # Columns that the builder takes for an agent's traces (datasets versions that have them).
    traces = getattr(json_builder, "has_agent_traces_markers", lambda features: False)

    chunk = json_builder.JsonConfig.__dataclass_fields__["chunksize"].default
    smallest_block = max(chunk // 32, 16 << 10)
    tables = []
    content = hashlib.sha256()
    total = 0
    for path in paths:
        if fsspec.utils.infer_compression(str(path)) not in SINGLE_STREAMS:
            return None
        try:
            with fsspec.open(str(path), "rb", compression="infer") as handle:
                data = handle.read(chunk + 1)
            if not data or len(data) > chunk or data.startswith((codecs.BOM_UTF8, b"[")):
                return None
            block = len(data) if len(data) // 8 > smallest_block else smallest_block
            table = pyarrow.json.read_json(
                io.BytesIO(data), read_options=pyarrow.json.ReadOptions(block_size=block)
            )
            table.validate()
        except Exception:  # the builder reads it, or says why it cannot
            return None
        if not (table.num_rows and table.num_columns) or (
            tables and table.schema != tables[0].schema
        ):
            return None
        tables.append(table)
        content.update(data)
        total += len(data)
        if total > MAX_IN_MEMORY_BYTES:
            return None
    # A fingerprint of the bytes read: datasets' default hashes the whole table through
    # dill, 18 ms a BLiMP file, most of this read's time.
    dataset = datasets.Dataset(
        InMemoryTable(pyarrow.concat_tables(tables)),
        split=SPLIT,
        fingerprint=content.hexdigest()[:16],
    )
    features = dataset.features
    if all(isinstance(f, datasets.Value) for f in features.values()) and not traces(features):
        return dataset
    return None


def _holds_records(path: Path, fmt: str) -> bool:
    """Whether a pair file has a record: a line besides the header of a CSV/TSV, a
    non-blank line of JSON Lines, a row of Parquet; compressed files as ``datasets`` reads
    them.  True where that cannot be told (a file that is not UTF-8, say), so that the
    reader's own error stands."""
    try:
        if fmt == "parquet":
            return pyarrow.parquet.ParquetFile(path).metadata.num_rows > 0
        needed = 1 if fmt == "json" else 2
        with fsspec.open(str(path), "rt", compression="infer", encoding="utf-8") as handle:
            return len(list(itertools.islice(filter(str.strip, handle), needed))) == needed
    except (OSError, ValueError):  # UnicodeDecodeError and pyarrow's ArrowInvalid included
        return True


def _rows_where(dataset: datasets.Dataset, where: Mapping[str, Any]) -> list[int]:
    """The rows whose columns hold these values, in file order (``select`` needs no
    hashing).  Values compare as read: a column of numbers wants numbers, not strings."""
    missing = [c for c in where if c not in dataset.column_names]
    if missing:
        raise KeyError(f"where: no column {missing} (columns: {dataset.column_names})")
    wanted = {c: set(v) if isinstance(v, (list, tuple)) else {v} for c, v in where.items()}
    columns = dataset.select_columns(list(wanted))[:]  # one batch read, not a row loop
    keep = [
        i
        for i in range(len(dataset))
        if all(columns[c][i] in values for c, values in wanted.items())
    ]
    if not keep:
        kinds = {c: type(columns[c][0]).__name__ for c in wanted if columns[c]}
        raise ValueError(f"where={dict(where)} keeps no rows (the columns hold {kinds})")
    return keep


def _rename_pair_columns(dataset: datasets.Dataset, columns: Mapping[str, str]) -> datasets.Dataset:
    present = dataset.column_names
    missing = [c for c in columns if c not in present]
    if missing:
        raise KeyError(f"no column {missing} in the pair file (columns: {present})")
    renames = {src: dst for src, dst in columns.items() if src != dst}
    clashes = [dst for dst in renames.values() if dst in present]
    if clashes:
        raise ValueError(f"the file already has columns {clashes}; name them as the pair columns")
    return dataset.rename_columns(renames) if renames else dataset


def _check_sentences(
    dataset: datasets.Dataset, columns: Mapping[str, str], rows: list[int], paths: list[Path]
) -> None:
    """Fail at load time, naming the data row (1 the first, in the files as read, before
    ``where``) and the file's column, rather than deep inside a model."""
    if len(dataset) == 0:
        raise ValueError(f"{', '.join(p.name for p in paths)}: no sentence pairs")
    batch = dataset.select_columns(list(columns.values()))[:]  # one batch read, no row loop
    for column, name in columns.items():
        for index, sentence in enumerate(batch[name]):
            if not isinstance(sentence, str) or not sentence.strip():
                where = ", ".join(p.name for p in paths)
                raise ValueError(
                    f"{where}: data row {rows[index] + 1} has no sentence in {column!r}: "
                    f"{sentence!r}"
                )


# --------------------------------------------------------------------------- documents


class VerbatimRow(dict):
    """A row of a task made from these templates, whose sentences are scored as written,
    with an empty context.  lm-eval's ``--system_instruction`` (and a chat template) put
    text in front of every request, and no task setting can refuse them, so the rows carry
    their kind to the model, which refuses a context (``PLLMaskedLM.loglikelihood``)."""


class Documents(list):
    """A split's rows as dicts (:class:`VerbatimRow`), carrying the split's ``features``.

    lm-eval iterates a task's documents twice (building the requests, then scoring the
    results), and ``datasets`` formats every row it hands out: 34 us a row, against 1.5
    us a row for the whole split's ``to_list()``; 4.3 s of all of BLiMP's 67,000 pairs on
    a 2-core machine (bench/README.md).  lm-eval takes a list of dicts as a task's
    documents (``Task.eval_docs``) but reads their ``features`` once while it builds the
    task, so the list carries them.
    """

    def __init__(self, dataset: datasets.Dataset) -> None:
        super().__init__(map(VerbatimRow, dataset.to_list()))
        self.features = dataset.features


_documents: weakref.WeakKeyDictionary[datasets.Dataset, Documents] = weakref.WeakKeyDictionary()


def as_documents(dataset: datasets.Dataset) -> Documents:
    """``process_docs`` of the templates: the split as a :class:`Documents` list, made
    once per split.  lm-eval calls ``process_docs`` at every read of ``Task.eval_docs``
    (four or five a task), and each fresh list would hold its own dicts: about 1 KB a
    BLiMP row."""
    documents = _documents.get(dataset)
    if documents is None:
        documents = _documents[dataset] = Documents(dataset)
    return documents


# --------------------------------------------------------------------------- scoring


def no_context(doc: Mapping[str, Any]) -> str:
    """Every sentence is scored on its own: the context is empty."""
    return ""


def minimal_pair_choices(doc: Mapping[str, Any]) -> list[str]:
    """Both sentences verbatim; a function, not Jinja, so quotes need no escaping."""
    return [doc[GOOD], doc[BAD]]


def preference_pair_choices(doc: Mapping[str, Any]) -> list[str]:
    return [doc[FIRST], doc[SECOND]]


def pair_scores(results: Sequence[Any]) -> tuple[float, float]:
    """The two log-likelihoods from lm-eval's per-choice ``(loglikelihood, is_greedy)``.

    A NaN (a float16 overflow in the model, most often) is said once: the pair counts as
    wrong, which alone would pass for a plausible accuracy; only ``score_diff`` shows it."""
    if len(results) != 2:
        stale = (
            "; lm-eval built this document no requests, which happens when its request "
            "cache (--cache_requests) was filled by a run with other documents (--samples): "
            "re-run with --cache_requests refresh"
            if not results
            else ""
        )
        raise ValueError(f"expected scores for 2 sentences, got {len(results)}{stale}")
    first, second = (float(r[0] if isinstance(r, (tuple, list)) else r) for r in results)
    if (math.isnan(first) or math.isnan(second)) and "nan" not in _warned:
        _warned.add("nan")
        logger.warning(
            "The model gave a NaN log-likelihood for a sentence of a pair: such a pair "
            "counts as wrong (acc, first_preferred and pct_stereotype 0) and makes score_diff "
            "nan. A float16 overflow is the usual cause: score in bfloat16 or float32. "
            "Further cases are not reported."
        )
    return first, second


def process_minimal_pair(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """``acc`` is 1 only if good scores strictly higher (a tie is wrong); plus good - bad."""
    good, bad = pair_scores(results)
    return {"acc": float(good > bad), "score_diff": good - bad}


def process_pair_preference(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """``first_preferred`` is 1 only if the first sentence scores strictly higher."""
    first, second = pair_scores(results)
    return {"first_preferred": float(first > second), "score_diff": first - second}


def process_stereotype_pair(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """CrowS-Pairs' count: 1 only if the more stereotyping (first) sentence scores strictly
    higher; a tie counts 0 and stays in the denominator, as in the paper's ``metric.py``."""
    more, less = pair_scores(results)
    return {"pct_stereotype": float(more > less), "score_diff": more - less}
