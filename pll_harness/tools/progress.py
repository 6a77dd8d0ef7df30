"""The progress bar of a tool's scoring, on standard error so that standard output stays
the tool's own table."""

from __future__ import annotations

import sys
from typing import Any


def scoring_bar(enabled: bool, total: int, unit: str, what: str = "", done: int = 0) -> Any:
    """A tqdm bar of ``total`` steps (None when not ``enabled``), saying what it scores and
    how many items an earlier run already did."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    desc = " ".join(["scoring", *([what] if what else [])])
    if done:
        desc += f" ({done} already done)"
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)
