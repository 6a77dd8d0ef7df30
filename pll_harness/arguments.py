"""Keyword arguments that a function does not take, refused with the ones it does; the
dtype names every entry point takes (here, not beside torch, so that a command line can
list them without importing torch)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence

DTYPE_NAMES = ("auto", "float32", "bfloat16", "float16")
"""The model dtypes that can be asked for; ``auto`` keeps the checkpoint's own."""

TRANSFORMERS_ALIASES = {"torch_dtype": "dtype"}
"""transformers' names for arguments that pll_harness calls otherwise, so that a refusal
of the one names the other."""


def check_known(
    given: Iterable[str],
    known: Sequence[str],
    owner: str,
    aliases: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
) -> None:
    """Refuse names of ``given`` that are not ``known``, naming for each the known one it
    most likely means: an entry of ``aliases`` (another tool's name for the same thing,
    such as transformers' ``torch_dtype``), else the closest spelling.  A name in
    ``notes`` (another tool's argument that has no counterpart here) gets its note instead:
    the closest spelling of such a name is a guess that misleads (``device_map`` is not
    ``device``, ``add_bos_token`` not ``max_batch_tokens``)."""
    unknown = [name for name in given if name not in known]
    if not unknown:
        return
    hints = []
    for name in unknown:
        if name in (notes or {}):
            hints.append(f"{name!r} ({notes[name]})")
            continue
        meant = (aliases or {}).get(name)
        if meant is None:
            close = difflib.get_close_matches(name, known, n=1)
            meant = close[0] if close else None
        hints.append(f"{name!r}" + (f" (did you mean {meant!r}?)" if meant else ""))
    raise ValueError(
        f"{owner} has no argument {', '.join(hints)}; its arguments are: {', '.join(known)}."
    )


def check_string_pairs(pairs: Iterable[object], what: str) -> None:
    """Refuse anything but pairs of two strings, naming ``what`` a pair stands for.

    One pair given alone, or a list of plain strings, would otherwise be taken apart
    character by character (``("He", "is")`` as the pairs ``("H", "e")`` and ``("i", "s")``)
    and scored without a word; a pair of three fails far from the call."""
    for pair in pairs:
        if type(pair) is tuple and len(pair) == 2 and type(pair[0]) is type(pair[1]) is str:
            continue  # the common case first: all of BLiMP's 134,000 requests in 25 ms
        if (
            isinstance(pair, str)
            or not isinstance(pair, Sequence)
            or len(pair) != 2
            or not all(isinstance(s, str) for s in pair)
        ):
            raise TypeError(
                f"expected a sequence of {what} pairs of strings, not one pair or plain "
                f"strings; {pair!r} is not a pair of two strings."
            )
