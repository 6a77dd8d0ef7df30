"""The one table from file names to data formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from pll_harness.file_formats import format_from_name


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("pairs.csv", "csv"),
        ("pairs.TSV", "tsv"),
        ("pairs.json", "jsonl"),
        ("pairs.jsonl.gz", "jsonl"),
        ("pairs.v2.parquet", "parquet"),
        ("pairs.csv.zst", "csv"),
        (Path("data.d/pairs.jsonl.xz"), "jsonl"),
        ("pairs.txt", None),
        ("pairs", None),
        ("pairs.gz", None),
    ],
)
def test_format_from_name(name, fmt):
    assert format_from_name(name) == fmt


def test_only_the_given_compressions_are_set_aside():
    assert format_from_name("pairs.csv.bz2", compressions=(".gz",)) is None
    assert format_from_name("pairs.jsonl.gz", compressions=()) is None
