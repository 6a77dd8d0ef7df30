"""Pieces shared by the researcher tools: model loading, metric lists, sentence input,
word grouping, a causal-LM scorer for comparison, Pearson r and matplotlib set-up."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METRIC_NAMES: tuple[str, ...] = ("original", "word_l2r", "whole_word", "sentence_l2r")
DEFAULT_METRIC_NAME = "word_l2r"
"""``pll_harness.masking.PLL_METRICS`` and ``DEFAULT_METRIC``, repeated here so that the
command line starts without importing torch (a test checks that they agree)."""

METRIC_LABELS = {
    "original": "PLL-original",
    "word_l2r": "PLL-word-l2r",
    "whole_word": "PLL-whole-word",
    "sentence_l2r": "PLL-sentence-l2r",
}
"""The names the paper (Kauf & Ivanova 2023) uses in its figures and tables."""

METRIC_COLORS = {
    "original": "#9e9e9e",
    "word_l2r": "#7b3294",
    "whole_word": "#41ab5d",
    "sentence_l2r": "#e08214",
    "causal": "#2166ac",
}

TEXT_COLUMNS = ("sentence", "text", "sent", "sentences")


def resolve_model_name(name: str) -> str:
    """Map a ``--model`` value to what ``from_pretrained`` loads: ``pll-demo`` becomes the
    packaged demo model, hub names and local folders pass unchanged (imported here, not at
    module level, so that ``--help`` does not load torch)."""
    from pll_harness.loading import resolve_pretrained

    return resolve_pretrained(name)


def short_model_name(name: str) -> str:
    """A local folder shows as its last component; a hub name stays as it is."""
    if name.startswith(("/", ".", "~")) or Path(name).is_dir():
        return Path(name.rstrip("/")).name or name
    return name


def parse_metrics(spec: str | Sequence[str] | None) -> list[str]:
    """``all`` (or None) means every metric; otherwise a comma-separated list (or a list
    of such strings) of metric names, checked and de-duplicated in order."""
    from pll_harness.masking import PLL_METRICS, check_metric

    if spec is None:
        return list(PLL_METRICS)
    parts = [spec] if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for part in parts:
        for name in (p.strip() for p in part.split(",")):
            if not name:
                continue
            candidates = list(PLL_METRICS) if name == "all" else [check_metric(name)]
            names.extend(c for c in candidates if c not in names)
    if not names:
        raise ValueError(f"No metric given; choose 'all' or some of: {', '.join(PLL_METRICS)}.")
    return names


# --------------------------------------------------------------------------- models


class MLMScorers:
    """One masked LM, loaded once, with one :class:`~pll_harness.scorer.PLLScorer` per
    metric (they share the model's weights)."""

    def __init__(
        self,
        model: str,
        metrics: Sequence[str],
        device: str | None = None,
        dtype: str | None = "auto",
        max_batch_tokens: int | None = None,
        tokenizer: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        from pll_harness.loading import load_masked_lm
        from pll_harness.scorer import PLLScorer

        self.name = model
        loaded = load_masked_lm(
            resolve_model_name(model),
            tokenizer=tokenizer,
            dtype=dtype,
            device=device,
            trust_remote_code=trust_remote_code,
        )
        self.tokenizer = loaded.tokenizer
        self.device = loaded.device
        self.metrics = list(metrics)
        self.scorers = {
            metric: PLLScorer(
                loaded.model,
                loaded.tokenizer,
                pll_metric=metric,
                device=loaded.device,
                max_batch_tokens=max_batch_tokens,
            )
            for metric in self.metrics
        }

    def score(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> dict[str, list[Any]]:
        """``{metric: [SentenceScore per text]}``."""
        return {m: s.score(texts, progress) for m, s in self.scorers.items()}

    def score_requests(
        self, requests: Sequence[tuple[str, str]], progress: Callable[[int], None] | None = None
    ) -> dict[str, list[Any]]:
        return {m: s.score_requests(requests, progress) for m, s in self.scorers.items()}

    def word_ids(self, text: str) -> list[int]:
        """The word index of each scored token of ``text`` (as PLL sees the words)."""
        return word_ids(self.tokenizer, text)


def word_ids(tokenizer: Any, text: str) -> list[int]:
    from pll_harness.encoding import encode_request

    return list(encode_request(tokenizer, "", text).word_ids)


def word_spans(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of equal word ids as ``(start, end)`` token spans, in order."""
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(ids) + 1):
        if index == len(ids) or ids[index] != ids[start]:
            spans.append((start, index))
            start = index
    return spans if ids else []


def is_wordlike(text: str) -> bool:
    """A word for OOV and frequency statistics holds a letter or digit (not punctuation)."""
    return any(ch.isalnum() for ch in text)


@dataclass(frozen=True)
class CausalScore:
    """log P(text | BOS) from a causal LM, with its per-token parts (natural log)."""

    text: str
    tokens: tuple[str, ...]
    token_logprobs: tuple[float, ...]

    @property
    def logprob(self) -> float:
        return math.fsum(self.token_logprobs)


class CausalScorer:
    """A causal LM (``AutoModelForCausalLM``, e.g. ``gpt2``) scoring log P(text | BOS),
    the convention of the paper and of lm-eval for an empty context."""

    def __init__(
        self,
        model: str,
        device: str | None = None,
        batch_size: int = 16,
        trust_remote_code: bool = False,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from pll_harness.loading import (
            CAUSAL_LM_HINT,
            check_model_source,
            explained_load_errors,
            resolve_device,
        )

        self.name = model
        self.device = resolve_device(device)
        check_model_source(model, "--causal", CAUSAL_LM_HINT)
        with explained_load_errors(model, CAUSAL_LM_HINT):
            self.tokenizer = AutoTokenizer.from_pretrained(
                model, trust_remote_code=trust_remote_code
            )
            loaded = AutoModelForCausalLM.from_pretrained(
                model, trust_remote_code=trust_remote_code, dtype=torch.float32
            )
        self.model = loaded.to(self.device).eval()
        tok = self.tokenizer
        self.bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        if self.bos is None:
            raise ValueError(f"The causal model {model!r} has neither a BOS nor an EOS token.")
        positions = getattr(self.model.config, "n_positions", None) or getattr(
            self.model.config, "max_position_embeddings", 1024
        )
        self.max_length = int(positions)
        self.batch_size = batch_size

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text.strip(), add_special_tokens=False)["input_ids"])

    def word_ids(self, text: str) -> list[int]:
        """Word index per token (fast tokenizers), or one word per token otherwise."""
        enc = self.tokenizer(text.strip(), add_special_tokens=False)
        try:
            return [-1 if w is None else w for w in enc.word_ids()]
        except (ValueError, AttributeError):
            return list(range(len(enc["input_ids"])))

    def score(self, texts: Sequence[str], context: str = "") -> list[CausalScore]:
        """Score each text (given an optional ``context``, visible and never scored)."""

        jobs = []
        for text in texts:
            if context:
                full = self.encode(context + text)
                prefix = self.encode(context)
                cut = _common_prefix(full, prefix)
            else:
                full, cut = self.encode(text), 0
            jobs.append((full, cut))
        results: list[CausalScore | None] = [None] * len(jobs)
        short = [i for i, (full, _) in enumerate(jobs) if len(full) < self.max_length]
        for i in (i for i in range(len(jobs)) if len(jobs[i][0]) >= self.max_length):
            full, cut = jobs[i]
            values = self._score_long(full)
            results[i] = self._result(texts[i], full[cut:], values[cut:])
        order = sorted(short, key=lambda i: len(jobs[i][0]))
        for begin in range(0, len(order), self.batch_size):
            batch = order[begin : begin + self.batch_size]
            rows = [[self.bos, *jobs[i][0]] for i in batch]
            for row_index, values in enumerate(self._forward(rows)):
                full, cut = jobs[batch[row_index]]
                results[batch[row_index]] = self._result(
                    texts[batch[row_index]], full[cut:], values[cut:]
                )
        return [r for r in results if r is not None]

    def _result(self, text: str, ids: Sequence[int], values: Sequence[float]) -> CausalScore:
        return CausalScore(
            text, tuple(self.tokenizer.convert_ids_to_tokens(list(ids))), tuple(values)
        )

    def _forward(self, rows: Sequence[Sequence[int]]) -> list[list[float]]:
        """log P(row[k] | row[:k]) for k >= 1 of each row (right-padded batch)."""
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.bos, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
        with torch.no_grad():
            logits = self.model(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
            ).logits.float()
        logprobs = logits[:, :-1].log_softmax(-1)
        gathered = logprobs.gather(2, ids[:, 1:, None].to(self.device))[..., 0].cpu()
        return [gathered[r, : len(row) - 1].tolist() for r, row in enumerate(rows)]

    def _score_long(self, full: Sequence[int]) -> list[float]:
        """A text longer than the model's window: score blocks of half a window, each
        block given the preceding tokens that fit (BOS while it fits), every token once."""
        seq = [self.bos, *full]
        stride = max(self.max_length // 2, 1)
        values: list[float] = []
        position = 1
        while position < len(seq):
            end = min(position + stride, len(seq))
            start = max(0, end - self.max_length)
            (window_values,) = self._forward([seq[start:end]])
            values += window_values[position - start - 1 :]
            position = end
        return values


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


def detect_format(path: str | None, explicit: str | None = None) -> str:
    """``txt``, ``csv``, ``tsv`` or ``jsonl`` from ``explicit`` or the file name."""
    if explicit:
        if explicit not in ("txt", "csv", "tsv", "jsonl"):
            raise ValueError(f"Unknown input format {explicit!r}: use txt, csv, tsv or jsonl.")
        return explicit
    if path is None or path == "-":
        return "txt"
    name = path.lower().removesuffix(".gz")
    for suffix, fmt in ((".csv", "csv"), (".tsv", "tsv"), (".jsonl", "jsonl"), (".json", "jsonl")):
        if name.endswith(suffix):
            return fmt
    return "txt"


def _open_text(path: str) -> io.TextIOBase:
    if path == "-":
        return sys.stdin  # type: ignore[return-value]
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")  # type: ignore[return-value]
    return open(path, encoding="utf-8", newline="")


def read_sentences(
    path: str,
    column: str | None = None,
    id_column: str | None = None,
    fmt: str | None = None,
) -> list[Sentence]:
    """Sentences from a text file (one per line; blank lines skipped), a CSV/TSV file or a
    JSONL file (``column`` names the text field; by default ``sentence`` or ``text``, or the
    only column).  ``-`` reads standard input.  Ids are ``id_column``'s values, else the
    sentence's 0-based position among the sentences read."""
    fmt = detect_format(path, fmt)
    with _open_text(path) as handle:
        if fmt == "txt":
            texts = [line.strip() for line in handle]
            return [Sentence(str(i), t) for i, t in enumerate(t for t in texts if t)]
        if fmt in ("csv", "tsv"):
            rows = list(csv.DictReader(handle, delimiter="," if fmt == "csv" else "\t"))
            fields = list(rows[0].keys()) if rows else []
        else:
            rows = [json.loads(line) for line in handle if line.strip()]
            fields = list(rows[0].keys()) if rows else []
    if not rows:
        return []
    text_column = _pick_column(fields, column, path)
    if id_column is not None and id_column not in fields:
        raise ValueError(f"{path}: no id column {id_column!r}; columns are {fields}.")
    sentences = []
    for index, row in enumerate(rows):
        text = row.get(text_column)
        if text is None or not str(text).strip():
            raise ValueError(f"{path}: row {index + 1} has an empty {text_column!r}.")
        ident = str(row[id_column]) if id_column is not None else str(index)
        sentences.append(Sentence(ident, str(text).strip()))
    return sentences


def _pick_column(fields: list[str], column: str | None, path: str) -> str:
    if column is not None:
        if column not in fields:
            raise ValueError(f"{path}: no column {column!r}; columns are {fields}.")
        return column
    for name in TEXT_COLUMNS:
        if name in fields:
            return name
    if len(fields) == 1:
        return fields[0]
    raise ValueError(
        f"{path}: which column holds the sentences? Pass --column (columns: {fields})."
    )


def eventsadapt_sentences(limit: int | None = None) -> list[Sentence]:
    """Every sentence of the packaged EventsAdapt pairs (plausible and implausible), with
    ids like ``12-active-good``; ``limit`` keeps the first pairs only."""
    from pll_harness.task_paths import TASK_DIR

    path = TASK_DIR / "data" / "eventsadapt" / "eventsadapt_pairs.jsonl.gz"
    sentences = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if limit is not None and index >= limit:
                break
            row = json.loads(line)
            stem = f"{row['ItemNum']}-{row['Voice']}-{row['NumSyn']}"
            sentences.append(Sentence(f"{stem}-good", row["sentence_good"]))
            sentences.append(Sentence(f"{stem}-bad", row["sentence_bad"]))
    return sentences


# --------------------------------------------------------------------------- statistics


def pearson(x: Iterable[float], y: Iterable[float]) -> float:
    """Pearson r; NaN when fewer than 3 points or either side is constant."""
    import numpy as np

    a, b = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def fmt_number(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


# --------------------------------------------------------------------------- plotting


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("Plots need matplotlib: pip install 'pll-harness[tools]'.") from error
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 150) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return path


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: set[int]) -> str:
    """A plain aligned table for the terminal (columns in ``right`` are right-aligned)."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])
