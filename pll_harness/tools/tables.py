"""Numbers and tables as text: markdown for reports, aligned columns for the terminal."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

DIGITS = 2
"""Decimals a table shows of a number, unless it says otherwise."""


def fmt_number(value: float | None, digits: int = DIGITS) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def best_shown(
    values: Sequence[float],
    digits: int = DIGITS,
    scale: float = 1.0,
    neutral: float | None = None,
) -> list[bool]:
    """Which of ``values`` a table marks best, judged as its reader sees them: each at the
    precision it is shown (``scale * value`` by :func:`fmt_number` to ``digits``), so that
    values shown alike are all best, whatever float noise lies below.  Best is the highest
    or, with ``neutral`` (no preference), the closest to it on either side.  NaN (shown
    "–") is never best, nor is anything in a list of one value: there is nothing to beat."""

    def shown(value: float) -> float:
        return float(fmt_number(scale * value, digits))

    def merit(value: float) -> float:
        if neutral is None:
            return shown(value)
        return -round(abs(shown(value) - shown(neutral)), digits)

    merits = [math.nan if math.isnan(v) else merit(v) for v in values]
    top = max((m for m in merits if not math.isnan(m)), default=math.nan)
    return [len(values) > 1 and m == top for m in merits]


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
