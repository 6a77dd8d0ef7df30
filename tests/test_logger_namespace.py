"""Every logger of the package is a child of lm-eval's, so `lm_eval --verbosity` (which
sets the level of the ``lm_eval`` logger) governs every message pll_harness logs."""

from __future__ import annotations

import importlib
import logging
import pkgutil

import pytest

import pll_harness


def module_loggers() -> list[tuple[str, logging.Logger]]:
    found = []
    for info in pkgutil.walk_packages(pll_harness.__path__, "pll_harness."):
        module = importlib.import_module(info.name)
        found += [
            (f"{info.name}.{name}", value)
            for name, value in vars(module).items()
            if isinstance(value, logging.Logger)
        ]
    return found


def test_the_package_has_loggers_to_check():
    names = {logger.name for _, logger in module_loggers()}
    assert {"lm_eval.pll_harness.scorer", "lm_eval.pll_harness.heads"} <= names


@pytest.mark.parametrize(
    "logger", [pytest.param(logger, id=where) for where, logger in module_loggers()]
)
def test_logger_follows_lm_evals_verbosity(logger):
    assert logger.name.startswith("lm_eval."), f"{logger.name} logs outside lm-eval's namespace"
    lm_eval_logger = logging.getLogger("lm_eval")
    saved = lm_eval_logger.level
    try:
        for level in (logging.ERROR, logging.DEBUG):
            lm_eval_logger.setLevel(level)
            assert logger.getEffectiveLevel() == level
    finally:
        lm_eval_logger.setLevel(saved)
