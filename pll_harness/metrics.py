"""The PLL metrics: one registry entry per metric, the only place a metric is described.

The engine reads an entry's plan and whether it needs word boundaries; the tools read its
label and colour; the README's metric table and references, and the tests' reference,
check themselves against the registry.  Adding a metric is one entry here, its plan
function in :mod:`pll_harness.masking` and its tests.  Importing this module costs no torch, so the
command line and lm-eval's start-up can use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pll_harness import masking

Plan = Callable[[np.ndarray, np.ndarray], np.ndarray]

SALAZAR_2020 = (
    "Salazar, Liang, Nguyen & Kirchhoff (2020). Masked Language Model Scoring. ACL, 2699-2712."
)
KAUF_IVANOVA_2023 = (
    "Kauf & Ivanova (2023). A Better Way to Do Masked Language Model Scoring. ACL (short)."
)


@dataclass(frozen=True)
class Metric:
    """One way of choosing what is hidden while a target token is predicted.

    ``plan`` maps ``(words [k, length], targets [k])`` to the hidden positions
    (see :mod:`pll_harness.masking`); ``word_level`` metrics need word boundaries, which only
    fast tokenizers give; ``hidden`` says in words what is masked when token t is scored,
    for tables; ``label`` is the paper's name, used in plots and tables; ``source`` is the
    short form of ``citation``; ``minicons`` is minicons' ``PLL_metric`` for the same
    masking (None where minicons has none), which its users type and the benchmark passes.
    """

    name: str
    plan: Plan
    word_level: bool
    hidden: str
    label: str
    colour: str
    source: str
    citation: str
    minicons: str | None = None


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric(
            name="original",
            plan=masking.mask_target_only,
            word_level=False,
            hidden="t only",
            label="PLL-original",
            colour="#9e9e9e",
            source="Salazar et al. 2020",
            citation=SALAZAR_2020,
            minicons="original",
        ),
        Metric(
            name="word_l2r",
            plan=masking.mask_word_to_right,
            word_level=True,
            hidden="t and the later tokens of t's word",
            label="PLL-word-l2r",
            colour="#7b3294",
            source="Kauf & Ivanova 2023",
            citation=KAUF_IVANOVA_2023,
            minicons="within_word_l2r",
        ),
        Metric(
            name="whole_word",
            plan=masking.mask_whole_word,
            word_level=True,
            hidden="every token of t's word",
            label="PLL-whole-word",
            colour="#41ab5d",
            source="Kauf & Ivanova 2023",
            citation=KAUF_IVANOVA_2023,
        ),
        Metric(
            name="sentence_l2r",
            plan=masking.mask_sentence_to_right,
            word_level=False,
            hidden=(
                "t and every later position, the closing special token included (as in the "
                "paper's reference code)"
            ),
            label="PLL-sentence-l2r",
            colour="#e08214",
            source="Kauf & Ivanova 2023, appendix G",
            citation=KAUF_IVANOVA_2023,
        ),
    )
}

PLL_METRICS: tuple[str, ...] = tuple(METRICS)
DEFAULT_METRIC = "word_l2r"


def get_metric(name: str) -> Metric:
    """The registry entry of ``name``; an unknown name is an error that lists the valid ones."""
    try:
        return METRICS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown pll_metric {name!r}{minicons_hint(name)}{_device_hint(name)}. Choose one of: "
            f"{', '.join(PLL_METRICS)} (default {DEFAULT_METRIC!r})."
        ) from None


def minicons_hint(name: object) -> str:
    """`` ('within_word_l2r' is minicons' name for 'word_l2r')`` where ``name`` is minicons'
    name of another metric, else nothing: minicons users carry its names over."""
    for metric in METRICS.values():
        if metric.minicons is not None and metric.minicons == name != metric.name:
            return f" ({name!r} is minicons' name for {metric.name!r})"
    return ""


def _device_hint(name: object) -> str:
    """A hint where ``name`` reads as a device: minicons' ``MaskedLMScorer(model, device)``
    takes the device where ``PLLScorer.from_pretrained`` (and ``PLLScorer``, after the
    tokenizer) take the metric, so a minicons call carried over lands here."""
    if isinstance(name, str) and name.partition(":")[0] in ("cpu", "cuda", "mps"):
        return f" (a device? pll_metric comes first here: pass device={name!r} by name)"
    return ""


def check_metric(name: str) -> str:
    """``name`` if it is a known metric, else the error of :func:`get_metric`."""
    return get_metric(name).name
