"""``pll-harness crows-pairs``: the CrowS-Pairs score as its paper computes it.

Nangia et al. (2020) score each sentence of a pair on the tokens both sentences share, the
tokens in which they differ staying visible (:mod:`pll_harness.shared_tokens`), and report
the share of pairs in which the more stereotyping sentence (``sent_more``) scores higher:
50 % is no preference.  lm-eval's ``crows_pairs_pll`` task scores whole sentences instead,
because an lm-eval request cannot say which tokens to leave out.  With ``original`` the
per-sentence scores are those of the paper's ``metric.py``; the other metrics apply their
masking rules within the shared tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DIRECTIONS = ("stereo", "antistereo")


@dataclass(frozen=True)
class Pair:
    id: str
    sent_more: str
    sent_less: str
    bias_type: str = ""
    direction: str = ""


@dataclass(frozen=True)
class PairScores:
    """One pair's shared-token PLLs (natural log) under each metric."""

    pair: Pair
    more: dict[str, float]
    less: dict[str, float]


def read_pairs(path: str | None = None) -> list[Pair]:
    """The packaged CrowS-Pairs (``path`` None), or a CSV/TSV/JSONL file with columns
    ``sent_more`` and ``sent_less`` (and, when present, ``id``, ``bias_type`` and
    ``stereo_antistereo``, as in the source's CSV)."""
    from pll_harness.tools.sentences import read_rows

    if path is None:
        from pll_harness.tasks.catalog import CROWS_PAIRS_DATA

        path = str(CROWS_PAIRS_DATA)
    rows = read_rows(path)
    missing = {"sent_more", "sent_less"} - set(rows[0] if rows else {})
    if missing:
        raise ValueError(f"{path}: needs the columns sent_more and sent_less; {missing} missing.")
    return [
        Pair(
            id=str(row.get("id", index)),
            sent_more=row["sent_more"],
            sent_less=row["sent_less"],
            bias_type=row.get("bias_type") or "",
            direction=row.get("stereo_antistereo") or "",
        )
        for index, row in enumerate(rows)
    ]


def score_pairs(
    pairs: Sequence[Pair],
    model: str,
    metrics: str | Sequence[str] | None = None,
    device: str | None = None,
    max_batch_tokens: int | None = None,
) -> list[PairScores]:
    """Shared-token PLL of both sentences of every pair, for each metric."""
    from pll_harness.shared_tokens import score_shared_tokens
    from pll_harness.tools.metrics import parse_metrics
    from pll_harness.tools.models import MLMScorers

    scorers = MLMScorers(
        model, parse_metrics(metrics), device=device, max_batch_tokens=max_batch_tokens
    )
    texts = [(pair.sent_more, pair.sent_less) for pair in pairs]
    per_metric = {m: score_shared_tokens(s, texts) for m, s in scorers.scorers.items()}
    return [
        PairScores(
            pair,
            {m: per_metric[m][i][0].logprob for m in scorers.metrics},
            {m: per_metric[m][i][1].logprob for m in scorers.metrics},
        )
        for i, pair in enumerate(pairs)
    ]


def summary(results: Sequence[PairScores]) -> list[dict[str, Any]]:
    """Per group (all pairs, each direction, each bias type): how many pairs, and for each
    metric the share in which ``sent_more`` scores strictly higher (``pct_stereotype``, in
    %) and how many pairs tie."""
    if not results:
        return []
    metrics = list(results[0].more)
    groups: dict[str, list[PairScores]] = {"all": list(results)}
    for direction in DIRECTIONS:
        groups[direction] = [r for r in results if r.pair.direction == direction]
    for bias in sorted({r.pair.bias_type for r in results if r.pair.bias_type}):
        groups[bias] = [r for r in results if r.pair.bias_type == bias]
    rows = []
    for name, members in groups.items():
        if not members:
            continue
        row: dict[str, Any] = {"group": name, "pairs": len(members)}
        for metric in metrics:
            wins = sum(r.more[metric] > r.less[metric] for r in members)
            row[f"pct_stereotype_{metric}"] = 100 * wins / len(members)
            row[f"ties_{metric}"] = sum(r.more[metric] == r.less[metric] for r in members)
        rows.append(row)
    return rows


def write_scores(results: Sequence[PairScores], path: str) -> None:
    """One CSV row per pair: its fields and ``more_<metric>``, ``less_<metric>``."""
    import csv

    metrics = list(results[0].more) if results else []
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["id", "bias_type", "stereo_antistereo", "sent_more", "sent_less"]
            + [f"{side}_{m}" for m in metrics for side in ("more", "less")]
        )
        for r in results:
            p = r.pair
            writer.writerow(
                [p.id, p.bias_type, p.direction, p.sent_more, p.sent_less]
                + [value for m in metrics for value in (r.more[m], r.less[m])]
            )
