"""matplotlib without a display, imported only when a figure is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TOOLS_EXTRA = "pip install '.[tools]' in a checkout of pll_harness"
"""How to install the ``tools`` extra (matplotlib, wordfreq), as the README and
docs/tools.md say: the package installs from its checkout, and ``pll-harness[tools]``
would send pip to a package index for it instead."""


def tools_extra_missing(module: str, needed_for: str) -> ImportError:
    """The error for a missing module of the ``tools`` extra, saying how to install it."""
    return ImportError(f"{needed_for} need {module}, from the tools extra: {TOOLS_EXTRA}.")


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError as error:
        raise tools_extra_missing("matplotlib", "Plots") from error
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
