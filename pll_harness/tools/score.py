"""``pll-harness score``: sentence and token scores for a file of sentences, every requested
metric side by side, optionally beside a causal LM's log-likelihood.

Output is written in chunks and can be resumed: re-running with the same output file skips
the sentences it already holds (matched by id and text).  One run at a time writes a file
(see :mod:`pll_harness.tools.resumable`), and SIGINT/SIGTERM never cut a chunk in two
(:mod:`pll_harness.tools.interrupts`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pll_harness.file_formats import jsonl_text
from pll_harness.file_lock import same_file
from pll_harness.provenance import model_label, scoring_model
from pll_harness.scorer import check_sizes
from pll_harness.tools.causal import CausalScorer
from pll_harness.tools.interrupts import InterruptGuard
from pll_harness.tools.metrics import parse_metrics
from pll_harness.tools.models import MLMScorers
from pll_harness.tools.progress import scoring_bar
from pll_harness.tools.records import (
    COUNT_COLUMNS,
    number_columns,
    pll_column,
    score_columns,
    score_fields,
    scoring_models,
)
from pll_harness.tools.resumable import (
    DamagedOutput,
    RecordFile,
    csv_text,
    record_format,
    start_all,
)
from pll_harness.tools.sentences import Sentence, refuse_repeated_ids
from pll_harness.tools.words import word_spans

if TYPE_CHECKING:
    import torch

SENTENCE_FIELDS = ("id", "text", "model", *COUNT_COLUMNS)
"""``model``: the masked LM that scored the row, with its settings that are not the
defaults and, for a hub model, the commit it was loaded from
(:func:`~pll_harness.provenance.scoring_model`; with ``causal_model`` the fields of
:func:`scoring_models`), so that a resumed output never mixes two models', two settings'
or two commits' scores."""


def sentence_columns(metrics: Sequence[str], causal: bool) -> list[str]:
    return [*SENTENCE_FIELDS, *score_columns(metrics, causal)]


TOKEN_SUM_TOLERANCE = (1e-3, 2e-3)
"""Nats by which a sentence's token rows may add up to other than its score: a constant
and a share per token.  A sentence scored again for its token rows alone, in other
batches, differs by about 1e-6 in float32 but up to about 1e-3 a token in bfloat16
(0.14 nats over 147 tokens, measured); another model's scores lie nats away."""


def token_columns(metrics: Sequence[str]) -> list[str]:
    return ["id", "token_index", "token", "token_id", "word_index", *(f"lp_{m}" for m in metrics)]


def score_sentences(
    sentences: Sequence[Sentence],
    scorers: MLMScorers,
    causal: CausalScorer | None = None,
    progress: Any = None,
    warn_unscored: bool = True,
) -> list[dict[str, Any]]:
    """One record per sentence: sentence-level scores plus per-token lists.

    The record holds ``pll_<metric>`` (summed natural-log PLL), ``causal_logprob`` when a
    causal model is given, and under ``tokens`` one dict per token with its word index and
    ``lp_<metric>`` log-probabilities.  ``warn_unscored=False``: the caller names the
    sentences with no token to score itself (:func:`score_file`, by id, once per run).
    """
    texts = [s.text for s in sentences]
    ticks = progress.update if progress is not None else None
    per_metric = scorers.score(texts, ticks, warn_unscored)
    causal_scores = causal.score(texts) if causal is not None else None
    model, causal_model = scorers.label, causal.label if causal is not None else ""
    records = []
    for index, sentence in enumerate(sentences):
        first = per_metric[scorers.metrics[0]][index]
        words = scorers.word_ids(sentence.text)
        spans = word_spans(words)
        record: dict[str, Any] = {
            "id": sentence.id,
            "text": sentence.text,
            "model": model,
            "n_tokens": len(first.tokens),
            "n_words": len(spans),
            "n_multi_token_words": sum(1 for a, b in spans if b - a > 1),
            **score_fields(per_metric, index, causal_scores, causal_model),
        }
        record["tokens"] = [
            {
                "token_index": t,
                "token": token,
                "token_id": first.token_ids[t],
                "word_index": words[t],
                **{f"lp_{m}": per_metric[m][index].token_logprobs[t] for m in scorers.metrics},
            }
            for t, token in enumerate(first.tokens)
        ]
        if causal_scores is not None:
            record["causal_tokens"] = list(causal_scores[index].tokens)
            record["causal_token_logprobs"] = list(causal_scores[index].token_logprobs)
        records.append(record)
    return records


JSONL_NESTED = ("tokens", "causal_tokens", "causal_token_logprobs")
"""Fields of a JSONL record that hold lists rather than one value."""

DEFAULT_CHUNK_SIZES = {"cpu": 32, "accelerator": 1024}
"""Sentences scored and written per step when ``chunk_size`` is not given: what an
interruption can lose (a few seconds to a minute of work), large enough on an accelerator
to fill its forward passes."""


def default_chunk_size(device: torch.device | str) -> int:
    kind = "cpu" if str(device).startswith("cpu") else "accelerator"
    return DEFAULT_CHUNK_SIZES[kind]


class _Output:
    """Where records go: a resumable, locked output file (with a per-token CSV beside it
    when asked for), or standard output.  ``done`` maps the ids an earlier run wrote to
    their texts.  Opening reads and checks the files; :meth:`start` (once the models have
    loaded) is the first to create or change them."""

    def __init__(
        self,
        path: Path | None,
        fmt: str,
        columns: list[str],
        token_path: Path | None,
        token_cols: list[str],
        overwrite: bool,
        models: dict[str, str],
    ) -> None:
        self.fmt, self.columns = fmt, columns
        self.main: RecordFile | None = None
        self.tokens: RecordFile | None = None
        self.done: dict[str, str] = {}
        self.missing_tokens: set[str] = set()
        self._header_due = path is None and fmt == "csv"
        if path is None:
            return
        try:
            self.main = RecordFile(
                path,
                fmt,
                columns,
                ("id",),
                overwrite,
                JSONL_NESTED,
                models,
                number_columns(columns),
            )
            self.done = {str(r["id"]): str(r["text"]) for r in self.main.records}
            if token_path is not None:
                scores = [c for c in token_cols if c.startswith("lp_")]
                self.tokens = RecordFile(
                    token_path, "csv", token_cols, ("id", "token_index"), overwrite, numeric=scores
                )
                self._match_tokens()
        except BaseException:
            self.close()
            raise

    def _match_tokens(self) -> None:
        """Keep the token rows of the sentences the main file holds, and refuse token rows
        that do not match their sentence.  A sentence's token rows are written before its
        sentence row, so a run stopped between the two writes leaves, after the last
        sentence's, the rows of sentences it never finished: :meth:`start` cuts them off.
        Rows of sentences the main file lacks anywhere else, or beside a main file that
        does not exist yet, belong to another output.  Sentences that have no token rows at
        all were written by a run without ``--tokens``: they are ``missing_tokens``, to be
        scored again for their token rows alone, so that the token file covers the whole
        output."""
        assert self.main is not None and self.tokens is not None
        rows = self.tokens.records
        n_tokens = {str(r["id"]): str(r["n_tokens"]) for r in self.main.records}
        kept = len(rows)
        while kept and rows[kept - 1]["id"] not in n_tokens:
            kept -= 1
        stray = next((r["id"] for r in rows[:kept] if r["id"] not in n_tokens), None)
        if stray is not None or (kept < len(rows) and self.main.handle is None):
            raise DamagedOutput(
                f"{self.tokens.path} holds token rows of sentence {stray or rows[-1]['id']}, "
                f"which {self.main.path} lacks: it was written for another output. Use "
                "--overwrite or another token file."
            )
        indices: dict[str, list[str]] = {ident: [] for ident in n_tokens}
        for row in rows[:kept]:
            indices[row["id"]].append(row["token_index"])
        for ident, found in indices.items():
            count = n_tokens[ident]
            if count.isdigit() and not found and count != "0":
                self.missing_tokens.add(ident)
            elif not count.isdigit() or found != [str(i) for i in range(int(count))]:
                raise self._unmatched(
                    f"sentence {ident} has {len(found)} token rows for {count} tokens"
                )
        self._check_token_sums(rows[:kept])
        if kept < len(rows):
            self.tokens.keep_first(kept)

    def _check_token_sums(self, rows: list[dict[str, Any]]) -> None:
        """Each sentence's token rows must add up to its score under every metric: the
        token file of another model's output, with the same ids and token counts, would
        otherwise be taken for this one's."""
        assert self.main is not None and self.tokens is not None
        metrics = [c.removeprefix("lp_") for c in self.tokens.columns if c.startswith("lp_")]
        constant, per_token = TOKEN_SUM_TOLERANCE
        sums: dict[tuple[str, str], float] = {}
        for row in rows:
            for metric in metrics:
                key = (row["id"], metric)
                sums[key] = sums.get(key, 0.0) + float(row[f"lp_{metric}"])
        for record in self.main.records:
            for metric in metrics:
                total = sums.get((str(record["id"]), metric))
                score = float(record[pll_column(metric)])
                allowed = constant + per_token * int(record["n_tokens"])
                if total is not None and abs(total - score) > allowed:
                    raise self._unmatched(
                        f"the token rows of sentence {record['id']} add up to {total:.4f} "
                        f"under {metric}, its row says {score:.4f} (another model's token "
                        "file?)"
                    )

    def _unmatched(self, why: str) -> DamagedOutput:
        """The error for a token file that does not match the main file.  Its way out keeps
        the main file's scores: a token file cut short (a full disk while ``--tokens`` was
        added on a resume) is written anew from the sentences alone, where ``--overwrite``
        would score the whole output again."""
        assert self.main is not None and self.tokens is not None
        return DamagedOutput(
            f"{self.tokens.path} does not match {self.main.path}: {why}. If it is this "
            f"output's token file, remove it and run again: its token rows are written anew "
            f"and the scores in {self.main.path} are kept. Otherwise give another token "
            "file; --overwrite scores everything again."
        )

    def confirm(self, models: dict[str, str]) -> None:
        """The models' labels once they have loaded (see :meth:`RecordFile.confirm`)."""
        if self.main is not None:
            self.main.confirm(models)

    def start(self) -> None:
        """Create or trim the output files (see :meth:`RecordFile.start`)."""
        start_all([f for f in (self.main, self.tokens) if f is not None])

    def write(self, records: list[dict[str, Any]]) -> None:
        """Tokens first: a sentence row is only ever written after its token rows.  A
        sentence scored again for its missing token rows keeps its earlier row."""
        if self.tokens is not None:
            # Sentences the main file already holds first: a run stopped before the main
            # write leaves the others' rows last, where a resume cuts them off.
            ordered = sorted(records, key=lambda r: r["id"] not in self.done)
            self.tokens.append([{"id": r["id"], **t} for r in ordered for t in r["tokens"]])
            self.missing_tokens.difference_update(r["id"] for r in records)
        if self.main is not None:
            self.main.append([r for r in records if r["id"] not in self.done])
        elif self.fmt == "csv":
            # The header goes out with the first rows, once the models have loaded: an
            # error before then leaves standard output empty rather than a lone header.
            self._print(csv_text(self.columns, records, header=self._header_due))
            self._header_due = False
        else:
            self._print(jsonl_text(records))

    @staticmethod
    def _print(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def close(self) -> None:
        for record_file in (self.main, self.tokens):
            if record_file is not None:
                record_file.close()


class Scored(NamedTuple):
    """What one :func:`score_file` call scored: sentences ``new`` to the output, and sentences
    the output already held that were scored ``again`` only for the token rows that
    ``--tokens`` asked for and the token file lacked (their sentence rows stay as they
    were), so that a report can say which file got what."""

    new: int
    again: int


def score_file(
    sentences: Sequence[Sentence],
    model: str,
    output: str | Path | None = None,
    metrics: str | Sequence[str] | None = "all",
    causal: str | None = None,
    output_format: str | None = None,
    token_output: str | Path | None = None,
    chunk_size: int | None = None,
    overwrite: bool = False,
    progress: bool = True,
    device: str | None = None,
    dtype: str | None = "auto",
    max_batch_tokens: int | None = None,
    max_length: int | None = None,
    add_prefix_space: bool | None = None,
    scorers: MLMScorers | None = None,
    causal_scorer: CausalScorer | None = None,
    command: str = "score",
    started: Callable[[], None] | None = None,
) -> Scored:
    """Score ``sentences`` and write them to ``output`` (stdout when None); return how many
    this call scored (those already in ``output`` are skipped, unless ``token_output`` lacks
    their token rows: those are scored again for the token file, whose sums can then differ
    from their earlier rows by float rounding, about 1e-6).

    CSV output has one row per sentence; ``token_output`` adds a per-token CSV (one row per
    token, all metrics side by side).  JSONL output puts the tokens inside each line.

    Sentences are scored and written ``chunk_size`` at a time (default: 32 on the CPU, 1024
    on an accelerator); SIGINT and SIGTERM stop the run after the chunk being written, and
    what SIGKILL cuts short is dropped when the run is resumed.  The output files are
    locked while the run writes them: a second run on the same output is refused.
    ``started`` is called once they have started, before the first sentence is scored.
    """
    check_sizes(chunk_size=chunk_size)
    metric_list = scorers.metrics if scorers is not None else parse_metrics(metrics)
    fmt = record_format(str(output) if output else None, output_format)
    if token_output is not None and fmt != "csv":
        raise ValueError("--tokens goes with CSV output; JSONL lines already hold the tokens.")
    if output is None and token_output is not None:
        raise ValueError("--tokens needs an output file (-o).")
    if token_output is not None and record_format(str(token_output), None, "--tokens") != "csv":
        raise ValueError(f"--tokens {token_output}: the token file is CSV; name it .csv.")
    if output is not None and token_output is not None and same_file(output, token_output):
        raise ValueError(
            f"-o {output} and --tokens {token_output} are the same file; give the token "
            "file a name of its own."
        )
    if not sentences:
        raise ValueError("There are no sentences to score: the input holds none.")
    ids = [s.id for s in sentences]
    refuse_repeated_ids(ids, "Sentence", "pick another id column")
    # Before the models load, a hub model's label has no commit yet: writer.confirm adds it.
    if scorers is None:
        mlm_label = scoring_model(model, dtype, max_length, add_prefix_space)
    else:
        mlm_label = scorers.label
    if causal_scorer is None:
        causal_label = None if causal is None else model_label(causal)
    else:
        causal_label = causal_scorer.label
    with InterruptGuard() as guard:
        writer = _Output(
            Path(output) if output else None,
            fmt,
            sentence_columns(metric_list, causal is not None or causal_scorer is not None),
            Path(token_output) if token_output else None,
            token_columns(metric_list),
            overwrite,
            scoring_models(mlm_label, causal_label),
        )
        try:
            for sentence in sentences:
                seen = writer.done.get(sentence.id)
                if seen is not None and seen != sentence.text:
                    raise ValueError(
                        f"{output} already holds sentence id {sentence.id} with another text "
                        f"({seen!r}); it was written for another input. Use --overwrite or "
                        "another output file."
                    )
            foreign = writer.done.keys() - set(ids)
            if foreign:
                raise ValueError(
                    f"{output} holds {len(foreign)} sentences that this input does not have "
                    f"(e.g. id {min(foreign)}); it was written for another "
                    "input. Use --overwrite or another output file."
                )
            todo = [
                s for s in sentences if s.id not in writer.done or s.id in writer.missing_tokens
            ]
            again = sum(s.id in writer.done for s in todo)
            if not todo:
                return Scored(0, 0)
            scorers = scorers or MLMScorers(
                model,
                metric_list,
                device=device,
                dtype=dtype,
                max_batch_tokens=max_batch_tokens,
                max_length=max_length,
                add_prefix_space=add_prefix_space,
            )
            if causal_scorer is None and causal is not None:
                causal_scorer = CausalScorer(causal, device=device)
            writer.confirm(
                scoring_models(scorers.label, causal_scorer.label if causal_scorer else None)
            )
            writer.start()
            if started is not None:
                started()
            size = chunk_size or default_chunk_size(scorers.device)
            bar = scoring_bar(
                progress, len(todo) * len(metric_list), "sent×metric", done=len(writer.done) - again
            )
            unscored: list[str] = []
            try:
                for start in range(0, len(todo), size):
                    chunk = todo[start : start + size]
                    records = score_sentences(chunk, scorers, causal_scorer, bar, False)
                    unscored += [r["id"] for r in records if not r["n_tokens"]]
                    with guard.hold():
                        writer.write(records)
            finally:
                if bar is not None:
                    bar.close()
                _warn_unscored(unscored, command)
            return Scored(len(todo) - again, again)
        finally:
            writer.close()


def _warn_unscored(ids: Sequence[str], command: str, shown: int = 10) -> None:
    """Name the sentences with no token to score (only characters the tokenizer drops,
    such as a zero-width space or a byte-order mark): each gets PLL 0.0, probability 1,
    which beats every real sentence it is compared with.  ``command`` is the one the user
    ran (``diagnose`` scores its sentences through :func:`score_file` too)."""
    if not ids:
        return
    listed = ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")
    print(
        f"pll-harness {command}: warning: {len(ids)} sentences have no token to score (ids "
        f"{listed}): the tokenizer drops all their characters, so each has PLL 0.0 "
        "(n_tokens 0); drop them before comparing scores.",
        file=sys.stderr,
    )
