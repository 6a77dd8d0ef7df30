"""Split a token sequence that is longer than the model accepts into scoring windows.

Every target token is scored in exactly one window, and each window is as wide as the model
allows, with its targets (half the window) in the middle, so every token sees a quarter of
the window or more on each side where the text has it.  Each target needs a masked copy of
its own whatever the windows, so narrower chunks would cost no more forward passes, only
more sequences to plan (README "Request semantics").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """Tokens ``[start, end)`` go to the model; ``[target_start, target_end)`` are scored."""

    start: int
    end: int
    target_start: int
    target_end: int


def plan_windows(n_tokens: int, first_target: int, capacity: int) -> list[Window]:
    """Windows that score tokens ``[first_target, n_tokens)`` once each within ``capacity``.

    - Everything fits: one window.
    - The targets fit but not all the context: one window of the targets and as much of
      the context right before them as fits.
    - The targets alone do not fit: chunks of ``capacity // 2`` targets, each centred in a
      full-width window (clamped at the text's ends), so windows overlap by half.
    """
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 token, got {capacity}")
    if n_tokens <= capacity:
        return [Window(0, n_tokens, first_target, n_tokens)]
    if n_tokens - first_target <= capacity:
        return [Window(n_tokens - capacity, n_tokens, first_target, n_tokens)]
    stride = max(1, capacity // 2)
    windows = []
    for target_start in range(first_target, n_tokens, stride):
        target_end = min(target_start + stride, n_tokens)
        margin = (capacity - (target_end - target_start)) // 2
        start = max(0, min(target_start - margin, n_tokens - capacity))
        windows.append(Window(start, start + capacity, target_start, target_end))
    return windows
