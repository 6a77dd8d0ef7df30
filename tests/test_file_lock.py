"""One writer per output file."""

from __future__ import annotations

import pytest

from pll_harness.file_lock import lock


def test_a_second_handle_is_refused_until_the_first_closes(tmp_path):
    path = tmp_path / "out.jsonl"
    first = open(path, "ab")  # noqa: SIM115
    lock(first, path, "the first test handle")
    refused = r"another writer \(the first test handle\?\)"
    with open(path, "ab") as second, pytest.raises(ValueError, match=refused):
        lock(second, path, "the first test handle")
    first.close()
    with open(path, "ab") as third:
        lock(third, path, "the first test handle")
