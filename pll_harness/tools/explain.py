"""``pll-harness explain``: look inside one sentence's PLL, or the difference between two.

For each token, the log-probability under every metric, grouped by word, so that the
inflation of multi-token words under ``original`` (Kauf & Ivanova 2023, Figure 2) is in
plain sight.  With two sentences, the tokens are aligned and each aligned row's share of
the score difference is shown: which tokens make one sentence more likely than the other.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pll_harness.tools.metrics import metric_colour, metric_label, parse_metrics
from pll_harness.tools.models import MLMScorers, short_model_name
from pll_harness.tools.plotting import figure_path, pyplot, save_figure
from pll_harness.tools.tables import fmt_number, text_table
from pll_harness.tools.words import word_spans, words_of


@dataclass(frozen=True)
class Explanation:
    """One sentence's tokens, words and per-token log-probabilities for each metric."""

    text: str
    tokens: tuple[str, ...]
    word_ids: tuple[int, ...]
    words: tuple[str, ...]
    """The text of each word, indexed by position in ``word_spans(word_ids)``."""
    token_logprobs: dict[str, tuple[float, ...]] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return list(self.token_logprobs)

    def total(self, metric: str) -> float:
        return math.fsum(self.token_logprobs[metric])

    @property
    def spans(self) -> list[tuple[int, int]]:
        return word_spans(self.word_ids)

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tokens": list(self.tokens),
            "word_ids": list(self.word_ids),
            "words": list(self.words),
            "token_logprobs": {m: list(v) for m, v in self.token_logprobs.items()},
            "totals": {m: self.total(m) for m in self.metrics},
        }


def explain_sentences(scorers: MLMScorers, texts: Sequence[str]) -> list[Explanation]:
    """Score ``texts`` under every metric of ``scorers`` and keep the per-token parts.

    A text with no token to score (only characters the tokenizer drops, such as a
    zero-width space) is refused: its PLL 0.0, probability 1, would win any comparison."""
    per_metric = scorers.score(list(texts))
    explanations = []
    for index, text in enumerate(texts):
        first = per_metric[scorers.metrics[0]][index]
        if not first.tokens:
            raise ValueError(
                f"{text!r} has no token to score: the tokenizer drops all its characters "
                "(such as a zero-width space or a byte-order mark), so its PLL would be 0.0."
            )
        ids = tuple(scorers.word_ids(text))
        words = tuple(word for word, _ in words_of(scorers.tokenizer, first.tokens, ids))
        explanations.append(
            Explanation(
                text=text,
                tokens=first.tokens,
                word_ids=ids,
                words=words,
                token_logprobs={m: per_metric[m][index].token_logprobs for m in scorers.metrics},
            )
        )
    return explanations


def token_table(explanation: Explanation) -> str:
    """Terminal table: word, token, and each metric's log-probability; pieces of a
    multi-token word are marked with ``┌ │ └``."""
    metrics = explanation.metrics
    rows: list[list[str]] = []
    for word_index, (start, end) in enumerate(explanation.spans):
        for t in range(start, end):
            mark = _piece_mark(t, start, end)
            word = explanation.words[word_index] if t == start else ""
            rows.append(
                [
                    word,
                    f"{mark} {explanation.tokens[t]}",
                    *(fmt_number(explanation.token_logprobs[m][t]) for m in metrics),
                ]
            )
    rows.append(["", "sum", *(fmt_number(explanation.total(m)) for m in metrics)])
    header = ["word", "token", *(metric_label(m) for m in metrics)]
    right = set(range(2, len(header)))
    return text_table(header, rows, right)


def _piece_mark(t: int, start: int, end: int) -> str:
    if end - start == 1:
        return " "
    return "┌" if t == start else ("└" if t == end - 1 else "│")


@dataclass(frozen=True)
class AlignedRow:
    """One row of two aligned sentences: a token of each (or of one side only)."""

    token_a: str
    token_b: str
    delta: dict[str, float]
    """log P(token_a) − log P(token_b) per metric; a missing side counts as 0."""


def align(a: Explanation, b: Explanation) -> list[AlignedRow]:
    """Align the two token sequences (difflib); the deltas of all rows sum to the
    sentence-level difference exactly, for every metric."""
    metrics = a.metrics
    rows = []
    matcher = difflib.SequenceMatcher(None, a.tokens, b.tokens, autojunk=False)
    for _, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            has_a, has_b = i < i2, j < j2
            rows.append(
                AlignedRow(
                    a.tokens[i] if has_a else "",
                    b.tokens[j] if has_b else "",
                    {
                        m: (a.token_logprobs[m][i] if has_a else 0.0)
                        - (b.token_logprobs[m][j] if has_b else 0.0)
                        for m in metrics
                    },
                )
            )
    return rows


def difference_report(a: Explanation, b: Explanation, top: int = 3) -> str:
    """Aligned tokens with their score differences, then the tokens that carry most of
    the difference under each metric."""
    metrics = a.metrics
    rows = align(a, b)
    header = ["A token", "B token", *(f"Δ {metric_label(m)}" for m in metrics)]
    body = [
        [r.token_a or "·", r.token_b or "·", *(f"{r.delta[m]:+.2f}" for m in metrics)] for r in rows
    ]
    body.append(["sum", "", *(f"{a.total(m) - b.total(m):+.2f}" for m in metrics)])
    lines = [
        f"A: {a.text}",
        f"B: {b.text}",
        "Δ = log P(A token) − log P(B token); positive favours A; · = no counterpart.",
        "",
        text_table(header, body, set(range(2, len(header)))),
        "",
    ]
    for m in metrics:
        total = a.total(m) - b.total(m)
        mass = math.fsum(abs(r.delta[m]) for r in rows) or 1.0
        ranked = sorted(rows, key=lambda r: -abs(r.delta[m]))[:top]
        parts = [f"{_pair(r)} {r.delta[m]:+.2f} ({abs(r.delta[m]) / mass:.0%})" for r in ranked]
        verdict = "A" if total > 0 else ("B" if total < 0 else "neither")
        lines.append(
            f"{metric_label(m)}: PLL(A) − PLL(B) = {total:+.2f} nats, favours "
            f"{verdict}; largest shares: " + "; ".join(parts)
        )
    return "\n".join(lines)


def _pair(row: AlignedRow) -> str:
    if row.token_a == row.token_b:
        return repr(row.token_a)
    return f"{row.token_a or '·'!r}/{row.token_b or '·'!r}"


def plot_explanations(explanations: Sequence[Explanation], title: str | None = None) -> Any:
    """Figure 2 of Kauf & Ivanova (2023), for any sentence: per-token log-probabilities,
    one bar group per token with one bar per metric; the pieces of a multi-token word sit
    on a shaded band labelled with the word.  One panel per sentence (shared y axis).

    Returns the matplotlib Figure; each panel's bars are in ``ax.containers`` (one
    BarContainer per metric, one bar per token).  Texts are drawn as written
    (``parse_math=False``): matplotlib would read a sentence's ``$5 or $6`` as TeX.
    """
    plt = pyplot()
    n = len(explanations)
    widest = max(len(e.tokens) for e in explanations)
    floor = min([-1.0, *(v for e in explanations for m in e.metrics for v in e.token_logprobs[m])])
    fig, axes = plt.subplots(
        n, 1, figsize=(max(6.0, 0.85 * widest + 3.5), 3.2 * n), sharey=True, squeeze=False
    )
    for ax, explanation in zip(axes[:, 0], explanations, strict=True):
        _draw_panel(ax, explanation, floor)
    if title:
        fig.suptitle(title, fontsize=10, parse_math=False)
    fig.tight_layout()
    return fig


def _draw_panel(ax: Any, explanation: Explanation, floor: float) -> None:
    metrics = explanation.metrics
    n_tokens = len(explanation.tokens)
    width = 0.8 / max(len(metrics), 1)
    headroom = -0.14 * floor
    for word_index, (start, end) in enumerate(explanation.spans):
        if end - start > 1:
            ax.axvspan(start - 0.48, end - 0.52, color="#fde0ef", zorder=0, lw=0)
            ax.text(
                (start + end - 1) / 2,
                headroom / 2,
                explanation.words[word_index],
                ha="center",
                va="center",
                fontsize=9,
                fontstyle="italic",
                color="#8e0152",
                parse_math=False,
            )
    for k, metric in enumerate(metrics):
        offsets = [t - 0.4 + width * (k + 0.5) for t in range(n_tokens)]
        ax.bar(
            offsets,
            explanation.token_logprobs[metric],
            width=width,
            color=metric_colour(metric),
            label=f"{metric_label(metric)}: {explanation.total(metric):.2f}",
            zorder=2,
        )
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(n_tokens))
    ax.set_xticklabels(
        explanation.tokens, rotation=0 if n_tokens < 12 else 45, fontsize=9, parse_math=False
    )
    ax.set_xlim(-0.6, n_tokens - 0.4)
    ax.set_ylim(floor * 1.05, headroom)
    ax.set_ylabel("token log-prob (nats)")
    ax.set_title(explanation.text, fontsize=10, parse_math=False)
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        title="sentence PLL",
        title_fontsize=8,
        frameon=False,
    )


def check_sentences(sentences: Sequence[str]) -> None:
    """One sentence, or two to compare, each with something to score: an empty one would
    show an empty table and, beside another, win with 0.0 (probability 1)."""
    if not 1 <= len(sentences) <= 2:
        raise ValueError("explain takes one sentence, or two to compare.")
    for sentence in sentences:
        if not sentence.strip():
            raise ValueError(f"explain needs words to score; {sentence!r} has none.")


def explain(
    sentences: Sequence[str],
    model: str | None = None,
    metrics: str | Sequence[str] | None = "all",
    plot: str | Path | None = None,
    device: str | None = None,
    scorers: MLMScorers | None = None,
) -> str:
    """Per-token tables for one or two sentences (and their difference for two); with
    ``plot``, also save the bar chart there.  Returns the text shown in the terminal."""
    check_sentences(sentences)
    if plot is not None:
        figure_path(plot)
    if scorers is None:
        if model is None:
            raise ValueError("Give a model (or ready scorers).")
        scorers = MLMScorers(model, parse_metrics(metrics), device=device)
    explanations = explain_sentences(scorers, sentences)
    parts = []
    for label, explanation in zip("AB", explanations, strict=False):
        prefix = f"{label}: " if len(explanations) == 2 else ""
        parts += [f"{prefix}{explanation.text}", token_table(explanation), ""]
    if len(explanations) == 2:
        parts.append(difference_report(*explanations))
    if plot is not None:
        fig = plot_explanations(explanations, title=short_model_name(scorers.name))
        saved = save_figure(fig, plot)
        parts.append(f"plot: {saved}")
    return "\n".join(parts).rstrip() + "\n"
