"""Models shipped inside the package.

``pll-demo`` is a small BERT-style masked LM (see ``pll-demo/README.md``) so that the package
can score sentences offline without downloading anything.
"""

from pathlib import Path

DEMO_MODEL_NAME = "pll-demo"
DEMO_MODEL_DIR = Path(__file__).resolve().parent / DEMO_MODEL_NAME

__all__ = ["DEMO_MODEL_DIR", "DEMO_MODEL_NAME"]
