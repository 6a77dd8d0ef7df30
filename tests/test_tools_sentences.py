"""Sentence input: text, CSV/TSV and JSONL files, columns and ids."""

from __future__ import annotations

import pytest

from pll_harness.tools.sentences import detect_format, read_sentences


def test_read_sentences_formats(tmp_path):
    (tmp_path / "s.txt").write_text("First one.\n\n  Second one.  \n")
    assert [(s.id, s.text) for s in read_sentences(str(tmp_path / "s.txt"))] == [
        ("0", "First one."),
        ("1", "Second one."),
    ]
    (tmp_path / "s.csv").write_text('item,sentence\na,"Hello, world."\nb,Bye.\n')
    rows = read_sentences(str(tmp_path / "s.csv"), id_column="item")
    assert [(s.id, s.text) for s in rows] == [("a", "Hello, world."), ("b", "Bye.")]
    (tmp_path / "s.jsonl").write_text('{"x": "One.", "y": 1}\n{"x": "Two.", "y": 2}\n')
    with pytest.raises(ValueError, match="--column"):
        read_sentences(str(tmp_path / "s.jsonl"))
    assert [s.text for s in read_sentences(str(tmp_path / "s.jsonl"), column="x")] == [
        "One.",
        "Two.",
    ]
    with pytest.raises(ValueError, match="no column"):
        read_sentences(str(tmp_path / "s.csv"), column="nope")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.csv", "csv"),
        ("a.TSV.gz", "tsv"),
        ("a.json", "jsonl"),
        ("a.jsonl.gz", "jsonl"),
        ("a.parquet", "txt"),
        ("a.csv.bz2", "txt"),
        ("sentences", "txt"),
        ("-", "txt"),
    ],
)
def test_detect_format_from_the_name(name, fmt):
    assert detect_format(name) == fmt
    assert detect_format(name, "tsv") == "tsv"
    with pytest.raises(ValueError, match="Unknown input format"):
        detect_format(name, "xml")
