"""``pll-harness score``: sentence and token scores for a file of sentences, every requested
metric side by side, optionally beside a causal LM's log-likelihood.

Output is written in chunks and can be resumed: re-running with the same output file skips
the sentences it already holds (matched by id and text).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from pll_harness.tools.common import (
    CausalScorer,
    MLMScorers,
    Sentence,
    parse_metrics,
    word_spans,
)

SENTENCE_FIELDS = ("id", "text", "n_tokens", "n_words", "n_multi_token_words")


def sentence_columns(metrics: Sequence[str], causal: bool) -> list[str]:
    columns = [*SENTENCE_FIELDS, *(f"pll_{m}" for m in metrics)]
    if causal:
        columns += ["causal_logprob", "causal_n_tokens"]
    return columns


def token_columns(metrics: Sequence[str]) -> list[str]:
    return ["id", "token_index", "token", "token_id", "word_index", *(f"lp_{m}" for m in metrics)]


def score_sentences(
    sentences: Sequence[Sentence],
    scorers: MLMScorers,
    causal: CausalScorer | None = None,
    progress: Any = None,
) -> list[dict[str, Any]]:
    """One record per sentence: sentence-level scores plus per-token lists.

    The record holds ``pll_<metric>`` (summed natural-log PLL), ``causal_logprob`` when a
    causal model is given, and under ``tokens`` one dict per token with its word index and
    ``lp_<metric>`` log-probabilities.
    """
    texts = [s.text for s in sentences]
    per_metric = scorers.score(texts, progress.update if progress is not None else None)
    causal_scores = causal.score(texts) if causal is not None else None
    records = []
    for index, sentence in enumerate(sentences):
        first = per_metric[scorers.metrics[0]][index]
        words = scorers.word_ids(sentence.text)
        spans = word_spans(words)
        record: dict[str, Any] = {
            "id": sentence.id,
            "text": sentence.text,
            "n_tokens": len(first.tokens),
            "n_words": len(spans),
            "n_multi_token_words": sum(1 for a, b in spans if b - a > 1),
        }
        for metric in scorers.metrics:
            record[f"pll_{metric}"] = per_metric[metric][index].logprob
        if causal_scores is not None:
            record["causal_logprob"] = causal_scores[index].logprob
            record["causal_n_tokens"] = len(causal_scores[index].tokens)
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


class _Writer:
    """Appends records to a CSV (plus an optional per-token CSV) or a JSONL file and tells
    which sentences an earlier run already wrote."""

    def __init__(
        self,
        path: Path | None,
        fmt: str,
        columns: list[str],
        token_path: Path | None,
        token_cols: list[str],
        overwrite: bool,
    ) -> None:
        self.path, self.fmt, self.columns = path, fmt, columns
        self.token_path, self.token_cols = token_path, token_cols
        self.done: dict[str, str] = {}
        if path is not None and path.exists() and path.stat().st_size > 0 and not overwrite:
            self.done = self._read_done()
        if token_path is not None:
            self._trim_token_file(overwrite)
        mode = "a" if self.done else "w"
        self.handle: TextIO = open(path, mode, encoding="utf-8", newline="") if path else sys.stdout  # noqa: SIM115
        new_tokens = token_path is not None and (
            not self.done or not token_path.exists() or token_path.stat().st_size == 0
        )
        self.tokens: TextIO | None = None
        if token_path is not None:
            self.tokens = open(token_path, "w" if new_tokens else "a", encoding="utf-8", newline="")  # noqa: SIM115
        if fmt == "csv":
            self.csv = csv.DictWriter(self.handle, columns, extrasaction="ignore")
            if not self.done:
                self.csv.writeheader()
            if self.tokens is not None:
                self.token_csv = csv.DictWriter(self.tokens, token_cols, extrasaction="ignore")
                if new_tokens:
                    self.token_csv.writeheader()

    def _read_done(self) -> dict[str, str]:
        assert self.path is not None
        text = self.path.read_text(encoding="utf-8")
        if not text.endswith("\n"):  # the last line was cut short by an interrupted run
            text = text[: text.rfind("\n") + 1]
            self.path.write_text(text, encoding="utf-8")
        if self.fmt == "csv":
            reader = csv.DictReader(io.StringIO(text, newline=""))
            if reader.fieldnames != self.columns:
                raise ValueError(
                    f"{self.path} has columns {reader.fieldnames}, but this run writes "
                    f"{self.columns} (other metrics or --causal?). Use another output "
                    "file or --overwrite."
                )
            rows = list(reader)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            if rows:
                present = [k for k in rows[0] if k != "tokens" and not k.startswith("causal_tok")]
                if set(present) != set(self.columns):
                    raise ValueError(
                        f"{self.path} has fields {present}, but this run writes "
                        f"{self.columns} (other metrics or --causal?). Use another output "
                        "file or --overwrite."
                    )
        return {str(row["id"]): str(row["text"]) for row in rows}

    def _trim_token_file(self, overwrite: bool) -> None:
        """Keep only the token rows of sentences the main file holds (a run stopped between
        the two writes leaves extra rows)."""
        path = self.token_path
        if path is None or overwrite or not self.done or not path.exists():
            return
        with open(path, encoding="utf-8", newline="") as handle:
            rows = [r for r in csv.DictReader(handle) if r["id"] in self.done]
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, self.token_cols)
            writer.writeheader()
            writer.writerows(rows)

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            if self.fmt == "csv":
                if self.tokens is not None:
                    for token in record["tokens"]:
                        self.token_csv.writerow({"id": record["id"], **token})
                self.csv.writerow(record)
            else:
                self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.tokens is not None:
            self.tokens.flush()
        self.handle.flush()

    def close(self) -> None:
        if self.handle is not sys.stdout:
            self.handle.close()
        if self.tokens is not None:
            self.tokens.close()


def _output_format(path: str | None, explicit: str | None) -> str:
    if explicit:
        if explicit not in ("csv", "jsonl"):
            raise ValueError(f"Unknown output format {explicit!r}: use csv or jsonl.")
        return explicit
    if path and path.lower().endswith((".jsonl", ".json")):
        return "jsonl"
    return "csv"


def score_file(
    sentences: Sequence[Sentence],
    model: str,
    output: str | Path | None = None,
    metrics: str | Sequence[str] | None = "all",
    causal: str | None = None,
    output_format: str | None = None,
    token_output: str | Path | None = None,
    chunk_size: int = 256,
    overwrite: bool = False,
    progress: bool = True,
    device: str | None = None,
    dtype: str | None = "auto",
    max_batch_tokens: int | None = None,
    scorers: MLMScorers | None = None,
    causal_scorer: CausalScorer | None = None,
) -> int:
    """Score ``sentences`` and write them to ``output`` (stdout when None); return how many
    sentences this call scored (those already in ``output`` are skipped).

    CSV output has one row per sentence; ``token_output`` adds a per-token CSV (one row per
    token, all metrics side by side).  JSONL output puts the tokens inside each line.
    """
    metric_list = scorers.metrics if scorers is not None else parse_metrics(metrics)
    fmt = _output_format(str(output) if output else None, output_format)
    if token_output is not None and fmt != "csv":
        raise ValueError("token_output goes with CSV output; JSONL lines already hold tokens.")
    if output is None and token_output is not None:
        raise ValueError("token_output needs an output file.")
    ids = [s.id for s in sentences]
    if len(set(ids)) != len(ids):
        raise ValueError("Sentence ids are not unique; pick another id column.")
    writer = _Writer(
        Path(output) if output else None,
        fmt,
        sentence_columns(metric_list, causal is not None or causal_scorer is not None),
        Path(token_output) if token_output else None,
        token_columns(metric_list),
        overwrite,
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
        todo = [s for s in sentences if s.id not in writer.done]
        if not todo:
            return 0
        scorers = scorers or MLMScorers(
            model, metric_list, device=device, dtype=dtype, max_batch_tokens=max_batch_tokens
        )
        if causal_scorer is None and causal is not None:
            causal_scorer = CausalScorer(causal, device=device)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=len(todo) * len(metric_list),
                desc=f"scoring ({len(writer.done)} already done)" if writer.done else "scoring",
                unit="sent×metric",
                file=sys.stderr,
            )
        try:
            for start in range(0, len(todo), chunk_size):
                writer.write(
                    score_sentences(todo[start : start + chunk_size], scorers, causal_scorer, bar)
                )
        finally:
            if bar is not None:
                bar.close()
        return len(todo)
    finally:
        writer.close()
