"""Where the packaged lm-eval task YAMLs and their templates live.

lm-eval finds the folder through the ``lm_eval.tasks`` entry point (pyproject.toml);
``python -m pll_harness.task_paths`` prints it, for ``--include_path`` or for including a
template by its path.
"""

from __future__ import annotations

from pathlib import Path

TASK_DIR = Path(__file__).resolve().parent / "tasks"
TEMPLATE_DIR = TASK_DIR / "templates"


if __name__ == "__main__":
    print(TASK_DIR)
