"""Where the packaged lm-eval task YAMLs live, for discovery and for ``--include_path``."""

from __future__ import annotations

from pathlib import Path

TASK_DIR = Path(__file__).resolve().parent / "tasks"
TEMPLATE_DIR = TASK_DIR / "templates"


def extend_include_path(include_path: str | Path | list | tuple | None) -> list:
    """Return ``include_path`` as a list with our task folder appended once.

    Our task names are unique (each starts with one of the benchmark names of
    :mod:`pll_harness.tasks.catalog`, such as ``blimp_pll``, or with ``pll_example``), so
    the folder's position cannot shadow anybody's tasks.
    """
    if include_path is None:
        paths: list = []
    elif isinstance(include_path, (list, tuple)):
        paths = list(include_path)
    else:
        paths = [include_path]
    if TASK_DIR.is_dir() and all(Path(p).resolve() != TASK_DIR for p in paths):
        paths.append(TASK_DIR)
    return paths


if __name__ == "__main__":
    print(TASK_DIR)
