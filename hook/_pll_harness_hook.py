"""Make lm-eval find pll_harness's model and tasks without importing either at start-up.

lm-eval 0.4.13 discovers models only through its in-process registry and tasks only
through the folders handed to ``TaskManager``.  A ``.pth`` file installed beside this
module calls :func:`install` when the interpreter starts; that adds one import
watcher to ``sys.meta_path`` and nothing else (no torch, no lm_eval, no pll_harness).
Only when lm-eval itself imports ``lm_eval.models`` or ``lm_eval.tasks.manager`` do
we register the lazy ``pll-mlm`` placeholder and our task folder, and let task YAMLs
include our templates by name.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType

MODEL_NAME = "pll-mlm"
MODEL_TARGET = "pll_harness.lm:PLLMaskedLM"


def _register_model(module: ModuleType) -> None:
    from lm_eval.api.registry import model_registry

    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME, target=MODEL_TARGET)


def _add_task_folder(module: ModuleType) -> None:
    task_manager = module.TaskManager
    if getattr(task_manager, "_pll_harness_patched", False):
        return
    original_init = task_manager.__init__

    def __init__(self, *args, include_path=None, **kwargs):
        from pll_harness.task_paths import extend_include_path

        original_init(self, *args, include_path=extend_include_path(include_path), **kwargs)

    task_manager.__init__ = __init__
    task_manager._pll_harness_patched = True


TEMPLATE_PREFIX = "pll_harness:"


def _resolve_template_includes(module: ModuleType) -> None:
    """Let task YAMLs write ``include: pll_harness:minimal_pair.yaml`` for our templates.

    lm-eval resolves an include relative to the including file, so a user's YAML could
    only reach an installed template by its absolute path.  ``load_yaml`` calls itself for
    each include through the module global, so wrapping that global covers every include.
    """
    original = module.load_yaml
    if getattr(original, "_pll_harness_patched", False):
        return

    def load_yaml(path, *args, **kwargs):
        from pathlib import Path

        name = Path(path).name
        if name.startswith(TEMPLATE_PREFIX):
            from pll_harness.task_paths import TEMPLATE_DIR

            path = TEMPLATE_DIR / name[len(TEMPLATE_PREFIX) :]
        return original(path, *args, **kwargs)

    load_yaml._pll_harness_patched = True
    module.load_yaml = load_yaml


_AFTER_IMPORT: dict[str, Callable[[ModuleType], None]] = {
    "lm_eval.models": _register_model,
    "lm_eval.tasks.manager": _add_task_folder,
    "lm_eval.tasks._yaml_loader": _resolve_template_includes,
}


class _ExecThenCall(importlib.abc.Loader):
    """Delegate to the real loader, then run our callback on the finished module."""

    def __init__(self, loader: importlib.abc.Loader, callback: Callable[[ModuleType], None]):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._callback(module)


class _Watcher(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        callback = _AFTER_IMPORT.get(fullname)
        if callback is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ExecThenCall(spec.loader, callback)
        return spec


def install() -> None:
    """Add the watcher once; if lm-eval is already imported, register right away."""
    if any(isinstance(finder, _Watcher) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _Watcher())
    for name, callback in _AFTER_IMPORT.items():
        if name in sys.modules:
            callback(sys.modules[name])
