"""Sentence input: text, CSV/TSV and JSONL files, columns and ids."""

from __future__ import annotations

import csv

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


def test_a_byte_order_mark_is_not_text(tmp_path):
    """Spreadsheet programs start their UTF-8 exports with one."""
    bom = "\ufeff"
    (tmp_path / "s.csv").write_text(f"{bom}id,sentence\na,One.\n", encoding="utf-8")
    (tmp_path / "s.jsonl").write_text(f'{bom}{{"sentence": "One."}}\n', encoding="utf-8")
    (tmp_path / "s.txt").write_text(f"{bom}One.\n", encoding="utf-8")
    assert [(s.id, s.text) for s in read_sentences(str(tmp_path / "s.csv"), id_column="id")] == [
        ("a", "One.")
    ]
    for name in ("s.jsonl", "s.txt"):
        assert [s.text for s in read_sentences(str(tmp_path / name))] == ["One."]


def test_unreadable_inputs_name_the_file_and_what_to_do(tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.txt is not UTF-8 text .*Save it as UTF-8"):
        read_sentences(str(latin))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"sentence": "One."}\n\n{"sentence": "Two."}\n{sentence: "Three."}\n')
    with pytest.raises(ValueError, match=r"broken.jsonl: line 4 is not JSON"):
        read_sentences(str(broken))
    (tmp_path / "list.jsonl").write_text('["One."]\n')
    with pytest.raises(ValueError, match="line 1 is not a JSON object"):
        read_sentences(str(tmp_path / "list.jsonl"))


def test_columns_of_a_plain_text_file_are_refused(tmp_path):
    """A table under a name that does not say so would be read line by line, header and
    ids included, as sentences."""
    data = tmp_path / "data.txt"
    data.write_text("item\tsentence\n1\tThe cat sat on the mat.\n")
    for option in ({"column": "sentence"}, {"id_column": "item"}):
        with pytest.raises(ValueError, match="--input-format csv, tsv or jsonl"):
            read_sentences(str(data), **option)
    rows = read_sentences(str(data), column="sentence", id_column="item", fmt="tsv")
    assert [(s.id, s.text) for s in rows] == [("1", "The cat sat on the mat.")]


def test_a_text_longer_than_the_csv_modules_default_field_limit(tmp_path):
    long_text = "word " * 40_000  # 200 KB, past csv's 128 KiB default
    (tmp_path / "long.csv").write_text(f'sentence\n"{long_text}"\n')
    previous = csv.field_size_limit(128 * 1024)  # as a fresh process has it
    try:
        (sentence,) = read_sentences(str(tmp_path / "long.csv"))
    finally:
        csv.field_size_limit(previous)
    assert sentence.text == long_text.strip()


def test_a_missing_id_column_or_an_empty_text_is_named(tmp_path):
    table = tmp_path / "s.csv"
    table.write_text("item,sentence\na,The cat sat.\nb,\n")
    with pytest.raises(ValueError, match=r"s.csv: no id column 'id'; columns are"):
        read_sentences(str(table), id_column="id")
    with pytest.raises(ValueError, match=r"s.csv: row 2 has an empty 'sentence'"):
        read_sentences(str(table), id_column="item")
    (tmp_path / "h.csv").write_text("item,sentence\n")
    assert read_sentences(str(tmp_path / "h.csv")) == []
