"""Write the README's table of PLL metrics, and its references, from the metric registry.

    python scripts/render_metric_table.py          # rewrite the table in README.md
    python scripts/render_metric_table.py --check  # exit 1 when README.md is out of date

The table and the list under "## References" are the registry's rendering
(pll_harness/metrics.py): adding a metric there and running this script is the whole
documentation change; tests/test_metrics.py fails until the README shows the registry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pll_harness.metrics import DEFAULT_METRIC, METRICS

README = Path(__file__).resolve().parent.parent / "README.md"
HEADER = "| metric | masked when scoring token t | the paper's name | source | minicons' name |"
REFERENCES = "## References"


def render() -> list[str]:
    """The table's lines, header and rule included."""
    rows = [
        f"| `{m.name}`{' (default)' if m.name == DEFAULT_METRIC else ''} | {m.hidden} | "
        f"{m.label} | {m.source} | {f'`{m.minicons}`' if m.minicons else 'none'} |"
        for m in METRICS.values()
    ]
    return [HEADER, "| --- | --- | --- | --- | --- |", *rows]


def render_references() -> list[str]:
    """The heading and one line per work the metrics cite, in the registry's order."""
    works = dict.fromkeys(m.citation for m in METRICS.values())
    return [REFERENCES, "", *(f"- {work}" for work in works)]


def _replace_block(lines: list[str], first: str, body: list[str], blank_lines: int) -> list[str]:
    """``lines`` with the block that starts at the line ``first`` (up to its
    ``blank_lines``-th blank line, or the end) replaced by ``body``."""
    start = stop = lines.index(first)
    blanks = 0
    while stop < len(lines):
        if not lines[stop].strip():
            blanks += 1
            if blanks == blank_lines:
                break
        stop += 1
    return [*lines[:start], *body, *lines[stop:]]


def replace_table(text: str) -> str:
    """``text`` with the metric table (from HEADER to the next blank line) and the
    references (from their heading to the blank line after the list) rendered."""
    lines = _replace_block(text.split("\n"), HEADER, render(), 1)
    return "\n".join(_replace_block(lines, REFERENCES, render_references(), 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; change nothing")
    args = parser.parse_args()
    text = README.read_text()
    new = replace_table(text)
    if args.check:
        if new != text:
            print(
                "README.md's metric table or references are out of date: "
                "run scripts/render_metric_table.py"
            )
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
