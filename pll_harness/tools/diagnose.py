"""``pll-harness diagnose``: how well each PLL metric meets the desiderata of Kauf & Ivanova
(2023, sections 4-5) for one model on one set of sentences.

1. Longer sentences should be less likely: Pearson r between sentence length (tokens) and
   −PLL should be positive (section 4.1, Figure 3A).
2. Out-of-vocabulary ratio: the share of words the tokenizer splits into 2+ tokens; the
   more there are, the more the metric matters (appendix C, Table 2).
3. Frequent words should be more likely: r between a word's PLL in the neutral context
   "My word is _" and its log frequency should be positive (section 4.2, Figure 3B).
   Frequencies come from ``wordfreq`` (Zipf scale, log10 per billion words).
4. With a causal LM: r between sentence PLL and the causal log-likelihood
   log P(sentence | BOS) should be positive (section 5, Figure 4).

Run into an output folder, the scores go to its ``sentences.csv`` and ``words.csv`` chunk by
chunk as they are made, as ``score`` writes its output: an interrupted run loses at most a
chunk, and running it again resumes both files (see :mod:`pll_harness.tools.resumable`).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pll_harness.file_formats import lift_csv_field_limit
from pll_harness.file_lock import lock
from pll_harness.tools.causal import CausalScorer
from pll_harness.tools.interrupts import InterruptGuard
from pll_harness.tools.metrics import CAUSAL, metric_colour, metric_label, parse_metrics
from pll_harness.tools.models import MLMScorers, short_model_name
from pll_harness.tools.plotting import pyplot, save_figure, tools_extra_missing
from pll_harness.tools.progress import scoring_bar
from pll_harness.tools.records import (
    CAUSAL_LOGPROB,
    CAUSAL_N_TOKENS,
    number_columns,
    pll_column,
    score_columns,
    score_fields,
    scoring_models,
    typed_row,
)
from pll_harness.tools.resumable import RecordFile, check_creatable, csv_text
from pll_harness.tools.score import (
    default_chunk_size,
    score_file,
    score_sentences,
    sentence_columns,
)
from pll_harness.tools.sentences import (
    Sentence,
    eventsadapt_sentences,
    first_items,
    read_sentences,
)
from pll_harness.tools.statistics import pearson
from pll_harness.tools.tables import best_shown, fmt_number, markdown_table
from pll_harness.tools.words import is_wordlike, sentence_words, token_offsets, words_of

WORD_CONTEXT = "My word is "
"""The paper's neutral context for word scores (appendix B)."""


@dataclass
class Diagnosis:
    """Everything ``diagnose`` measured: per-sentence and per-word scores and the
    correlations.  ``stats[name]`` has ``r_length``, ``r_frequency``, ``r_causal`` and
    ``mean`` for each metric name (and ``causal`` for the causal model)."""

    model: str
    dataset: str
    metrics: list[str]
    causal: str | None
    sentences: list[dict[str, Any]] = field(default_factory=list)
    words: list[dict[str, Any]] = field(default_factory=list)
    oov: dict[str, dict[str, float]] = field(default_factory=dict)
    words_without_frequency: int = 0
    stats: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def series(self) -> list[str]:
        """The score columns: each metric, then the causal model when there is one."""
        return [*self.metrics, *([CAUSAL] if self.causal else [])]

    @staticmethod
    def score_column(name: str) -> str:
        """The row field holding ``name``'s score (a metric, or ``causal``)."""
        return CAUSAL_LOGPROB if name == CAUSAL else pll_column(name)

    @staticmethod
    def length_column(name: str) -> str:
        """The row field holding the item's length in ``name``'s tokens."""
        return CAUSAL_N_TOKENS if name == CAUSAL else "n_tokens"

    def label(self, name: str) -> str:
        if name == CAUSAL:
            return f"causal LL ({short_model_name(self.causal or '')})"
        return metric_label(name)


def _running_words(word_lists: Sequence[Sequence[tuple[str, int]]]) -> list[tuple[str, int]]:
    """Every word of the sentences with its token count, punctuation left out, and a
    sentence-initial word lower-cased so that "The" and "the" are one distinct word: the
    words the word scores and the OOV ratios count (a lower-cased word keeps the pieces
    the sentence has it in).  The first word is the first with a letter or digit, so that
    an opening quote does not keep "The" capitalised."""
    return [
        (word.lower() if position == 0 else word, n)
        for words in word_lists
        for position, (word, n) in enumerate(w for w in words if is_wordlike(w[0]))
    ]


def _oov(word_lists: Sequence[Sequence[tuple[str, int]]]) -> dict[str, float]:
    """OOV ratio over running words and over distinct words (:func:`_running_words`)."""
    running = _running_words(word_lists)
    types = dict(running)
    return {
        "words": len(running),
        "ratio": sum(n > 1 for _, n in running) / len(running) if running else math.nan,
        "types": len(types),
        "type_ratio": sum(n > 1 for n in types.values()) / len(types) if types else math.nan,
    }


def word_columns(metrics: Sequence[str], causal: bool) -> list[str]:
    """The columns of ``words.csv``: ``model`` (and ``causal_model``) as in ``score``'s
    output, so that a resumed file never mixes two models' scores."""
    return ["word", "model", "n_tokens", "zipf", *score_columns(metrics, causal)]


@dataclass(frozen=True)
class Keeping:
    """Where scores are kept as they are made: in memory (``folder`` None), or in the
    folder's tables, written ``chunk_size`` items at a time and resumed unless
    ``overwrite``."""

    folder: Path | None = None
    overwrite: bool = False
    chunk_size: int | None = None
    progress: bool = False


@contextmanager
def _bar(keeping: Keeping, steps: int, what: str, done: int = 0) -> Iterator[Any]:
    """The scoring bar of ``steps`` item×metric steps, closed however the block ends (None
    without progress)."""
    bar = scoring_bar(keeping.progress, steps, "item×metric", what, done)
    try:
        yield bar
    finally:
        if bar is not None:
            bar.close()


def _sentence_rows(
    sentences: Sequence[Sentence],
    scorers: MLMScorers,
    causal: CausalScorer | None,
    keeping: Keeping,
    started: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per sentence, as ``score`` writes them; with a folder written to its
    ``sentences.csv`` by ``score`` itself (resumed, chunked, locked) and read back;
    ``started`` is called once that file has started."""
    columns = sentence_columns(scorers.metrics, causal is not None)
    if keeping.folder is None:
        with _bar(keeping, len(sentences) * len(scorers.metrics), "sentences") as bar:
            records = score_sentences(sentences, scorers, causal, bar)
        return [{key: record[key] for key in columns} for record in records]
    path = keeping.folder / TABLES["sentences"]
    score_file(
        sentences,
        scorers.name,
        path,
        chunk_size=keeping.chunk_size,
        overwrite=keeping.overwrite,
        progress=keeping.progress,
        scorers=scorers,
        causal_scorer=causal,
        command="diagnose",
        started=started,
    )
    lift_csv_field_limit()
    # utf-8-sig: a table saved again by a spreadsheet starts with a byte-order mark, which
    # score_file reads past when it resumes; read as utf-8, it hid the ``id`` column.
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = {row["id"]: typed_row(row) for row in csv.DictReader(handle)}
    return [rows[sentence.id] for sentence in sentences]


def _word_lists(scorers: MLMScorers, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
    """Each text's words as PLL sees them (text, tokens), from one tokenizer call for the
    scorers' tokens and one for their character spans."""
    scorer = next(iter(scorers.scorers.values()))
    keys, jobs = scorer.distinct_jobs([("", text) for text in texts])
    encodings = jobs.encodings
    stripped = [text.strip() for text in jobs.texts]  # as the scorers tokenize them
    offsets = token_offsets(scorers.tokenizer, stripped)
    words = []
    for index, text in enumerate(stripped):
        start, stop = encodings.offsets[index], encodings.offsets[index + 1]
        scored = encodings.scored[start:stop]
        spans = (
            None
            if offsets is None
            else [s for s, k in zip(offsets[index], scored, strict=True) if k]
        )
        ids = encodings.ids[start:stop][scored].tolist()
        word_ids = encodings.word_ids[start:stop][scored].tolist()
        words.append(_words(scorers.tokenizer, text, ids, word_ids, spans))
    return [words[key] for key in keys]


def _causal_word_lists(causal: CausalScorer, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
    """Each text's words by the causal model's tokenizer, as :func:`_word_lists`."""
    stripped = [text.strip() for text in texts]  # as CausalScorer.encode tokenizes them
    offsets = token_offsets(causal.tokenizer, stripped)
    return [
        _words(
            causal.tokenizer,
            text,
            causal.encode(text),
            causal.word_ids(text),
            None if offsets is None else offsets[index],
        )
        for index, text in enumerate(stripped)
    ]


def _words(
    tokenizer: Any,
    text: str,
    ids: Sequence[int],
    word_ids: Sequence[int],
    offsets: Sequence[tuple[int, int]] | None,
) -> list[tuple[str, int]]:
    """The words of one text: read from the text where the tokens have character spans
    (:func:`sentence_words`), else (a slow tokenizer, one word per token) rebuilt from the
    tokens."""
    if offsets is None:
        return words_of(tokenizer, tokenizer.convert_ids_to_tokens(list(ids)), word_ids)
    return sentence_words(text, offsets, word_ids)


def wordfreq_zipf() -> Callable[[str, str], float]:
    """``wordfreq.zipf_frequency``, imported when a frequency is needed; missing (the
    ``tools`` extra not installed), an error that says how to install it."""
    try:
        from wordfreq import zipf_frequency
    except ImportError as error:
        raise tools_extra_missing("wordfreq", "Word frequencies") from error
    return zipf_frequency


def _score_words(
    words: Sequence[str],
    scorers: MLMScorers,
    causal: CausalScorer | None,
    progress: Any,
) -> list[dict[str, Any]]:
    """Each word's row: its PLL in :data:`WORD_CONTEXT` under every metric (and the causal
    model's log-probability) beside its frequency."""
    zipf_frequency = wordfreq_zipf()

    requests = [(WORD_CONTEXT, w) for w in words]
    word_scores = scorers.score_requests(requests, progress.update if progress else None)
    causal_scores = causal.score(list(words), context=WORD_CONTEXT) if causal else None
    # As the table's rows hold them (its fixed fields), settings and files included.
    model, causal_model = scorers.label, causal.label if causal else ""
    rows = []
    for index, word in enumerate(words):
        first = word_scores[scorers.metrics[0]][index]
        row = {
            "word": word,
            "model": model,
            "n_tokens": len(first.tokens),
            "zipf": zipf_frequency(word, "en"),
        }
        row.update(score_fields(word_scores, index, causal_scores, causal_model))
        rows.append(row)
    return rows


def _open_word_table(
    words: Sequence[str],
    scorers: MLMScorers,
    causal: CausalScorer | None,
    keeping: Keeping,
) -> RecordFile | None:
    """The folder's ``words.csv``, read and checked (and locked when it exists) but not yet
    written: opened before any sentence is scored, so that a table that cannot be resumed
    stops the run before ``sentences.csv`` is touched.  None without a folder."""
    if keeping.folder is None:
        return None
    path = keeping.folder / TABLES["words"]
    columns = word_columns(scorers.metrics, causal is not None)
    fixed = scoring_models(scorers.label, causal.label if causal else None)
    table = RecordFile(
        path,
        "csv",
        columns,
        ("word",),
        keeping.overwrite,
        fixed=fixed,
        numeric=number_columns(columns),
    )
    foreign = {row["word"] for row in table.records} - set(words)
    if foreign:
        table.close()
        raise ValueError(
            f"{path} holds {len(foreign)} words that these sentences do not have (e.g. "
            f"{min(foreign)!r}); it was written for another dataset, or for more of this one "
            "(a larger --limit: give that --limit again to resume it). Use --overwrite or "
            "another output folder."
        )
    return table


def _word_rows(
    words: Sequence[str],
    scorers: MLMScorers,
    causal: CausalScorer | None,
    keeping: Keeping,
    table: RecordFile | None,
) -> list[dict[str, Any]]:
    """The rows of :func:`_score_words`; with a folder written to its ``words.csv``
    (``table``, from :func:`_open_word_table`) chunk by chunk and resumed as ``score`` does
    with sentences."""
    if table is None:
        with _bar(keeping, len(words) * len(scorers.metrics), "words") as bar:
            return _score_words(words, scorers, causal, bar)
    done = {row["word"]: typed_row(row) for row in table.records}
    todo = [word for word in words if word not in done]
    if todo and not table.started:
        _drop_earlier_report(table.path.parent)
        table.start()
    size = keeping.chunk_size or default_chunk_size(scorers.device)
    with (
        InterruptGuard() as guard,
        _bar(keeping, len(todo) * len(scorers.metrics), "words", len(done)) as bar,
    ):
        for start in range(0, len(todo), size):
            rows = _score_words(todo[start : start + size], scorers, causal, bar)
            with guard.hold():
                table.append(rows)
            done.update((row["word"], row) for row in rows)
    return [done[word] for word in words]


def diagnose_sentences(
    sentences: Sequence[Sentence],
    scorers: MLMScorers,
    dataset: str = "sentences",
    causal: CausalScorer | None = None,
    progress: bool = False,
    output_dir: str | Path | None = None,
    overwrite: bool = False,
    chunk_size: int | None = None,
) -> Diagnosis:
    """Score the sentences and their distinct words under every metric and compute the
    desiderata.  See the module docstring.

    With ``output_dir``, the scores are written to its ``sentences.csv`` and ``words.csv``
    as they are made, and what an earlier run wrote there is resumed (``overwrite``: started
    afresh); ``chunk_size`` items are scored and written per step (default as for
    ``score``).
    """
    zipf_frequency = wordfreq_zipf()

    keeping = Keeping(
        Path(output_dir) if output_dir is not None else None, overwrite, chunk_size, progress
    )
    diag = Diagnosis(scorers.name, dataset, list(scorers.metrics), causal.name if causal else None)
    texts = [s.text for s in sentences]
    word_lists = _word_lists(scorers, texts)
    vocabulary = dict.fromkeys(word for word, _ in _running_words(word_lists))
    words = [w for w in vocabulary if zipf_frequency(w, "en") > 0]
    diag.words_without_frequency = len(vocabulary) - len(words)
    table = _open_word_table(words, scorers, causal, keeping)

    def start_afresh() -> None:
        """Once sentences.csv has started (this run scores sentences): the earlier report
        and plots go, as they no longer describe the tables, so that a run stopped before
        its own report leaves none that looks finished; with --overwrite the word table
        starts afresh too, so that nothing of an earlier run's (another model's, say)
        is left and the run resumes."""
        if keeping.folder is not None:
            _drop_earlier_report(keeping.folder)
        if table is not None and keeping.overwrite:
            table.start()

    try:
        diag.sentences = _sentence_rows(sentences, scorers, causal, keeping, start_afresh)
        diag.words = _word_rows(words, scorers, causal, keeping, table)
    finally:
        if table is not None:
            table.close()
    diag.oov["mlm"] = _oov(word_lists)
    if causal is not None:
        diag.oov[CAUSAL] = _oov(_causal_word_lists(causal, texts))

    for name in diag.series:
        column, lengths = diag.score_column(name), diag.length_column(name)
        scores = [r[column] for r in diag.sentences]
        stats = {
            "mean": sum(scores) / len(scores) if scores else math.nan,
            "r_length": pearson([r[lengths] for r in diag.sentences], [-s for s in scores]),
            "r_frequency": pearson(
                [w["zipf"] for w in diag.words], [w[column] for w in diag.words]
            ),
            "r_causal": math.nan,
        }
        if causal is not None and name != CAUSAL:
            stats["r_causal"] = pearson(scores, [r[CAUSAL_LOGPROB] for r in diag.sentences])
        diag.stats[name] = stats
    return diag


# --------------------------------------------------------------------------- plots


def _panels(names: Sequence[str]) -> tuple[Any, Any]:
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(names), figsize=(3.3 * len(names), 3.3), squeeze=False, sharey=False
    )
    return fig, axes[0]


def plot_length(diag: Diagnosis) -> Any:
    """Figure 3A: −(P)LL against sentence length in tokens, one panel per metric (and the
    causal model); each dot is a sentence."""
    fig, axes = _panels(diag.series)
    for ax, name in zip(axes, diag.series, strict=True):
        column, lengths = diag.score_column(name), diag.length_column(name)
        x = [r[lengths] for r in diag.sentences]
        y = [-r[column] for r in diag.sentences]
        ax.scatter(x, y, s=10, alpha=0.5, color=metric_colour(name))
        ax.set_title(
            f"{diag.label(name)}\nr = {fmt_number(diag.stats[name]['r_length'])}", fontsize=9
        )
        ax.set_xlabel("sentence length (tokens)")
    axes[0].set_ylabel("−(P)LL (nats)")
    fig.tight_layout()
    return fig


def plot_frequency(diag: Diagnosis) -> Any:
    """Figure 3B: word (P)LL in "My word is _" against log frequency; single-token words
    and multi-token words in separate colours (two scatter collections per panel)."""
    fig, axes = _panels(diag.series)
    for ax, name in zip(axes, diag.series, strict=True):
        column, pieces = diag.score_column(name), diag.length_column(name)
        for multi, color, label in ((False, "#4d4d4d", "1 token"), (True, "#d6604d", "2+ tokens")):
            rows = [w for w in diag.words if (w[pieces] > 1) == multi]
            ax.scatter(
                [w["zipf"] for w in rows],
                [w[column] for w in rows],
                s=10,
                alpha=0.6,
                color=color,
                label=label,
            )
        ax.set_title(
            f"{diag.label(name)}\nr = {fmt_number(diag.stats[name]['r_frequency'])}", fontsize=9
        )
        ax.set_xlabel("word frequency (Zipf)")
    axes[0].set_ylabel("word (P)LL in “My word is _”")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_causal(diag: Diagnosis) -> Any:
    """Figure 4: sentence PLL against the causal model's log-likelihood, one panel per
    metric; each dot is a sentence."""
    fig, axes = _panels(diag.metrics)
    for ax, name in zip(axes, diag.metrics, strict=True):
        x = [r[CAUSAL_LOGPROB] for r in diag.sentences]
        y = [r[pll_column(name)] for r in diag.sentences]
        ax.scatter(x, y, s=10, alpha=0.5, color=metric_colour(name))
        ax.set_title(
            f"{diag.label(name)}\nr = {fmt_number(diag.stats[name]['r_causal'])}", fontsize=9
        )
        ax.set_xlabel(diag.label(CAUSAL))
    axes[0].set_ylabel("sentence PLL (nats)")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- report


def _best(diag: Diagnosis, key: str) -> set[str]:
    """The metrics whose ``key`` the report shows in bold (:func:`best_shown`, at the
    precision of :func:`fmt_number`, as its cells show them)."""
    values = [diag.stats[m][key] for m in diag.metrics]
    return {m for m, best in zip(diag.metrics, best_shown(values), strict=True) if best}


def report_markdown(diag: Diagnosis, images: dict[str, str]) -> str:
    """The markdown report; ``images`` maps plot names to paths relative to the report."""
    mlm = diag.oov["mlm"]
    lines = [
        f"# PLL diagnosis: {short_model_name(diag.model)}",
        "",
        f"Dataset: **{diag.dataset}**, {len(diag.sentences)} sentences, "
        f"{mlm['words']} words ({mlm['types']} distinct); {len(diag.words)} distinct words "
        f"scored in the English context “{WORD_CONTEXT}_” against English frequencies"
        + (
            f" ({diag.words_without_frequency} more have no wordfreq frequency and are left out)"
            if diag.words_without_frequency
            else ""
        )
        + ".",
        "",
        "Desiderata (Kauf & Ivanova 2023): every r below should be **positive**; larger is "
        "better. Longer sentences should be less likely (r of length with −PLL), frequent "
        "words more likely (r of word PLL with log frequency), and PLL should agree with a "
        "causal LM's log-likelihood.",
        "",
    ]
    header = ["score", "r(length, −PLL)", "r(word PLL, log freq)"]
    if diag.causal:
        header.append("r(PLL, causal LL)")
    header.append("mean sentence (P)LL")
    best = {k: _best(diag, k) for k in ("r_length", "r_frequency", "r_causal")}
    rows = []
    for name in diag.series:
        stats = diag.stats[name]

        def cell(key: str, name: str = name, stats: dict = stats) -> str:
            text = fmt_number(stats[key])
            return f"**{text}**" if name in best[key] else text

        row = [diag.label(name), cell("r_length"), cell("r_frequency")]
        if diag.causal:
            row.append(cell("r_causal") if name != CAUSAL else "–")
        row.append(fmt_number(stats["mean"]))
        rows.append(row)
    lines += [
        markdown_table(header, rows),
        "",
        "Bold: the best PLL metric on that criterion, as shown (equal values all bold).",
        "",
    ]
    lines += ["## Out-of-vocabulary words", ""]
    oov_rows = [["masked LM tokenizer", _pct(mlm["ratio"]), _pct(mlm["type_ratio"])]]
    if CAUSAL in diag.oov:
        oov_rows.append(
            [
                diag.label(CAUSAL) + " tokenizer",
                _pct(diag.oov[CAUSAL]["ratio"]),
                _pct(diag.oov[CAUSAL]["type_ratio"]),
            ]
        )
    lines += [
        "Share of words split into 2+ tokens (punctuation left out). The more such words, the "
        "more PLL-original's inflation of multi-token words distorts scores.",
        "",
        markdown_table(["tokenizer", "running words", "distinct words"], oov_rows),
        "",
        "## Plots",
        "",
    ]
    captions = {
        "length": "Sentence length (tokens) against −(P)LL; each dot is a sentence.",
        "frequency": "Word (P)LL in “My word is _” against log frequency; red: words of 2+ tokens.",
        "causal": "Sentence PLL against the causal model's log-likelihood.",
    }
    for name, path in images.items():
        lines += [f"![{name}]({path})", "", captions.get(name, ""), ""]
    return "\n".join(lines).rstrip() + "\n"


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1%}"


REPORT = "report.md"
TABLES = {"sentences": "sentences.csv", "words": "words.csv"}
"""The tables, written as the scoring goes and resumed."""
PLOTS = {"length": "length.png", "frequency": "frequency.png", "causal": "causal.png"}
"""The files of a finished diagnosis besides its tables: written once the scoring is done."""


def _drop_earlier_report(folder: Path) -> None:
    """Remove an earlier run's report and plots as a run that adds to the tables (or, with
    ``--overwrite``, replaces them) starts, so that a run stopped before its own report
    leaves no report of other scores beside its tables."""
    for name in (REPORT, *PLOTS.values()):
        (folder / name).unlink(missing_ok=True)


def write_outputs(diag: Diagnosis, output_dir: str | Path, tables: bool = True) -> Path:
    """Write ``report.md``, the PNG plots and (``tables``; not where the scoring wrote
    them as it went) ``sentences.csv`` / ``words.csv`` to ``output_dir``; return the
    report's path."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"sentences": diag.sentences, "words": diag.words} if tables else {}
    with ExitStack() as held:
        # The tables are locked before anything is written, and until the report is: a
        # diagnose run that writes the folder holds them, and emptied under it they would
        # get its later chunks after ours; and a run that starts on the folder meanwhile
        # (--overwrite, another model) would get this report beside its tables.
        handles: dict[str, BinaryIO] = {}
        for table, name in TABLES.items():
            path = out / name
            if table in written or path.exists():
                handles[table] = held.enter_context(open(path, "ab"))
                lock(handles[table], path, "a diagnose run with this output folder")
        images = {
            "length": save_figure(plot_length(diag), out / PLOTS["length"]).name,
            "frequency": save_figure(plot_frequency(diag), out / PLOTS["frequency"]).name,
        }
        if diag.causal:
            images["causal"] = save_figure(plot_causal(diag), out / PLOTS["causal"]).name
        else:  # an earlier run's, with another model (--overwrite): not this report's
            (out / PLOTS["causal"]).unlink(missing_ok=True)
        for table, rows in written.items():
            handles[table].truncate(0)
            if rows:
                handles[table].write(csv_text(list(rows[0]), rows, header=True).encode())
        report = out / REPORT
        report.write_text(report_markdown(diag, images), encoding="utf-8")
    return report


def _check_output_dir(output_dir: str | Path) -> None:
    """Check that ``output_dir`` is, or can be made, a folder to write in: called before the
    models load, so that a folder the report cannot go to stops the run at once.  Nothing is
    made here: the folder appears with the first table written, once the run has started."""
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(
            f"{out} is not a folder; diagnose writes a folder (report.md, plots, CSVs): pick "
            "another --output-dir."
        )
    try:
        check_creatable(out / REPORT)
    except OSError as error:
        raise ValueError(
            f"{out}: cannot write the report there ({error.strerror}: {error.filename})."
        ) from None


def diagnose(
    model: str,
    dataset: str = "eventsadapt",
    output_dir: str | Path = "pll-diagnosis",
    metrics: str | Sequence[str] | None = "all",
    causal: str | None = None,
    limit: int | None = None,
    column: str | None = None,
    device: str | None = None,
    progress: bool = False,
    overwrite: bool = False,
    chunk_size: int | None = None,
) -> Diagnosis:
    """Run the diagnosis of ``model`` on ``dataset`` (``eventsadapt``, the packaged pairs,
    or a sentence file as for ``score``) and write the report to ``output_dir``.

    ``limit`` keeps the first sentences of a file, or the first pairs of EventsAdapt.  The
    scores go to the folder as they are made, and a re-run resumes them (``overwrite``
    starts afresh; see :func:`diagnose_sentences`).
    """
    if dataset.lower() == "eventsadapt" and not os.path.exists(dataset):
        sentences = eventsadapt_sentences(limit)
    else:
        as_table = "Give the file one of those names to read it as a table."
        sentences = first_items(read_sentences(dataset, column=column, as_table=as_table), limit)
    if not sentences:
        raise ValueError(f"No sentences in {dataset}.")
    _check_output_dir(output_dir)
    pyplot()  # the plots' matplotlib, missing without the tools extra: now, not after scoring
    scorers = MLMScorers(model, parse_metrics(metrics), device=device)
    causal_scorer = CausalScorer(causal, device=device) if causal else None
    diag = diagnose_sentences(
        sentences,
        scorers,
        dataset,
        causal_scorer,
        progress=progress,
        output_dir=output_dir,
        overwrite=overwrite,
        chunk_size=chunk_size,
    )
    write_outputs(diag, output_dir, tables=False)
    return diag
