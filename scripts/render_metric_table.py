"""Write the README's table of PLL metrics from the metric registry.

    python scripts/render_metric_table.py          # rewrite the table in README.md
    python scripts/render_metric_table.py --check  # exit 1 when README.md is out of date

The table is the registry's rendering (pll_harness/metrics.py): adding a metric there and
running this script is the whole documentation change; tests/test_masking.py fails until
the README shows the registry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pll_harness.metrics import DEFAULT_METRIC, METRICS

README = Path(__file__).resolve().parent.parent / "README.md"
HEADER = "| metric | masked when scoring token t | the paper's name | source |"


def render() -> list[str]:
    """The table's lines, header and rule included."""
    rows = [
        f"| `{m.name}`{' (default)' if m.name == DEFAULT_METRIC else ''} | {m.hidden} | "
        f"{m.label} | {m.source} |"
        for m in METRICS.values()
    ]
    return [HEADER, "| --- | --- | --- | --- |", *rows]


def replace_table(text: str) -> str:
    """``text`` with the table that starts at HEADER (up to the next blank line) rendered."""
    lines = text.split("\n")
    start = lines.index(HEADER)
    stop = start
    while stop < len(lines) and lines[stop].strip():
        stop += 1
    return "\n".join([*lines[:start], *render(), *lines[stop:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; change nothing")
    args = parser.parse_args()
    text = README.read_text()
    new = replace_table(text)
    if args.check:
        if new != text:
            print("README.md's metric table is out of date: run scripts/render_metric_table.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
