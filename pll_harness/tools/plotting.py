"""matplotlib without a display, imported only when a figure is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("Plots need matplotlib: pip install 'pll-harness[tools]'.") from error
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def figure_path(path: str | Path) -> Path:
    """The file a figure asked for at ``path`` goes to (matplotlib adds ``.png`` to a name
    without a suffix, and the path reported must be that file); a folder is refused, which
    a command checks before its model loads."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(
            f"{path} is a folder; give the plot a file name, e.g. {path / 'plot.png'}."
        )
    return path if path.suffix else path.with_name(path.name + ".png")


def save_figure(fig: Any, path: str | Path, dpi: int = 150) -> Path:
    """Save ``fig`` and return the file written (:func:`figure_path`)."""
    path = figure_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return path
