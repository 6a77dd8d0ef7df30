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
