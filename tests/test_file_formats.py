"""The one table from file names to data formats."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pll_harness.file_formats import MalformedCSV, format_from_name, strict_csv_rows


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


def test_strict_csv_rows_gives_each_row_with_the_line_it_starts_on():
    """A quoted cell may hold line breaks, so a row's line is not its index; a blank line is
    an empty row; a cell longer than the csv module's default limit (128 KiB) is read."""
    long = "x" * 200_000
    text = f'a,b\n"two\nlines",c\n\n{long},d\n'
    rows = list(strict_csv_rows(io.StringIO(text, newline=""), ","))
    assert rows == [(1, ["a", "b"]), (2, ["two\nlines", "c"]), (4, []), (5, [long, "d"])]


@pytest.mark.parametrize(
    ("text", "line", "fault"),
    [
        (
            'a\tb\nA.\tB.\n"Stop!" he said.\tC.\n',
            3,
            "text follows the closing quote of a quoted cell",
        ),
        ('a\tb\n"Stop!\tC.\nD.\tE.\n', 2, "a quoted cell is never closed"),
    ],
)
def test_strict_csv_rows_names_the_line_and_the_fault_of_malformed_quoting(text, line, fault):
    rows = strict_csv_rows(io.StringIO(text, newline=""), "\t")
    with pytest.raises(MalformedCSV) as error:
        list(rows)
    assert (error.value.line, error.value.fault) == (line, fault)


def test_jsonl_text_keeps_non_ascii_text_as_written():
    """A JSONL output is read by people and by other tools: a sentence in French or German
    reads as written, not as ``\\u00e9`` escapes."""
    from pll_harness.file_formats import jsonl_text

    assert jsonl_text([{"text": "Ça a été écrit"}, {"text": "Straße"}]) == (
        '{"text": "Ça a été écrit"}\n{"text": "Straße"}\n'
    )
