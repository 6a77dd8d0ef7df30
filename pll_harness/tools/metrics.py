"""The PLL metrics as the tools name, label and colour them, and the ``--metric`` parser.

Everything comes from the registry (:mod:`pll_harness.metrics`), which costs no torch to
import; only the causal LM's colour, for the plots that show it beside the PLL metrics,
is the tools' own."""

from __future__ import annotations

from collections.abc import Sequence

from pll_harness.metrics import METRICS, PLL_METRICS, minicons_hint

CAUSAL = "causal"
"""The causal LM's series name, where the tools show it beside the PLL metrics."""

CAUSAL_COLOUR = "#2166ac"


def metric_label(name: str) -> str:
    """The paper's name of a metric (PLL-word-l2r, ...)."""
    return METRICS[name].label


def metric_colour(name: str) -> str:
    """A metric's colour in every plot; ``causal`` is the causal LM's."""
    return CAUSAL_COLOUR if name == CAUSAL else METRICS[name].colour


def parse_metrics(spec: str | Sequence[str] | None) -> list[str]:
    """``all`` (or None) means every metric; otherwise a comma-separated list (or a list
    of such strings) of metric names, checked and de-duplicated in order."""
    if spec is None:
        return list(PLL_METRICS)
    parts = [spec] if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for part in parts:
        for name in (p.strip() for p in part.split(",")):
            if not name:
                continue
            candidates = list(PLL_METRICS) if name == "all" else [_known_metric(name)]
            names.extend(c for c in candidates if c not in names)
    if not names:
        raise ValueError(f"No metric given; choose 'all' or some of: {', '.join(PLL_METRICS)}.")
    return names


def _known_metric(name: str) -> str:
    """``name`` if it is a metric, else an error that names the tools' default, ``all``:
    the registry's own error names pll-mlm's default (word_l2r), which a ``pll-harness``
    user, whose ``--help`` says 'all', would take for the command's."""
    if name in METRICS:
        return name
    raise ValueError(
        f"Unknown pll_metric {name!r} in --metric{minicons_hint(name)}. Choose one of: 'all' "
        "(the default) or "
        f"a comma-separated list of {', '.join(PLL_METRICS)}."
    )
