"""Statistics for the desiderata reports."""

from __future__ import annotations

from collections.abc import Iterable


def pearson(x: Iterable[float], y: Iterable[float]) -> float:
    """Pearson r; NaN when fewer than 3 points or either side is constant."""
    import numpy as np

    a, b = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])
