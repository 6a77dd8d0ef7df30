"""Unknown keyword arguments are refused with the known ones."""

from __future__ import annotations

import pytest

from pll_harness.arguments import check_known


def test_known_names_pass_and_unknown_ones_name_what_is_meant():
    check_known(["a_size", "dtype"], ["a_size", "dtype"], "f")
    with pytest.raises(
        ValueError,
        match=r"f has no argument 'a_sise' \(did you mean 'a_size'\?\), 'zzz'; "
        r"its arguments are: a_size, dtype\.",
    ):
        check_known(["a_sise", "zzz"], ["a_size", "dtype"], "f")
    with pytest.raises(ValueError, match=r"'torch_dtype' \(did you mean 'dtype'\?\)"):
        check_known(["torch_dtype"], ["a_size", "dtype"], "f", {"torch_dtype": "dtype"})


def test_a_note_replaces_the_closest_spelling():
    """Another tool's argument with no counterpart here gets its note, not a misleading
    guess among the known names (``device_map`` is close to ``device`` but means another
    thing)."""
    with pytest.raises(ValueError, match=r"'device_map' \(use parallelize\); its arguments"):
        check_known(
            ["device_map"], ["device", "parallelize"], "f", notes={"device_map": "use parallelize"}
        )
