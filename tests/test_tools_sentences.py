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
        ("a.txt", "txt"),
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


@pytest.mark.parametrize("name", ["a.parquet", "a.csv.bz2", "a.txt.xz", "a.jsonl.zst", "a.xlsx"])
def test_binary_formats_are_refused_as_unsupported(tmp_path, name):
    """Read as text, they would fail with "not UTF-8 text ... Save it as UTF-8"."""
    path = tmp_path / name
    path.write_bytes(b"PAR1\x15\x04\x15\xff\xfe")
    for explicit in (None, "tsv"):
        with pytest.raises(ValueError, match=r"not supported.*\.csv, \.tsv.*\.jsonl.*\.gz"):
            read_sentences(str(path), fmt=explicit)


@pytest.mark.parametrize(("fmt", "sep"), [("csv", ","), ("tsv", "\t")])
def test_cells_follow_csv_quoting(tmp_path, fmt, sep):
    """A cell that starts with a double quote is quoted, its quotes doubled, as the csv
    module and pandas write it; quotes inside an unquoted cell are text."""
    path = tmp_path / f"s.{fmt}"
    path.write_text(f'id{sep}sentence\n1{sep}"""Hi,"" she said."\n2{sep}It is 5"2 tall.\n')
    rows = read_sentences(str(path), id_column="id")
    assert [s.text for s in rows] == ['"Hi," she said.', 'It is 5"2 tall.']


@pytest.mark.parametrize(("fmt", "sep"), [("csv", ","), ("tsv", "\t")])
@pytest.mark.parametrize(
    ("cell", "line"),
    [('"Hi," she said.', 3), ('"Wait', 3)],
    ids=["text-after-closing-quote", "never-closed"],
)
def test_malformed_quoting_is_refused_with_its_line(tmp_path, fmt, sep, cell, line):
    """Read leniently, the first loses its quotes and the second swallows every later row."""
    path = tmp_path / f"s.{fmt}"
    path.write_text(f"id{sep}sentence\n1{sep}Fine.\n2{sep}{cell}\n3{sep}The dog ran.\n4{sep}Bye.\n")
    with pytest.raises(ValueError, match=rf"s.{fmt}: line {line}: .*JSON Lines") as error:
        read_sentences(str(path), id_column="id")
    assert '"""Hi,"" she said."' in str(error.value) and "\n" not in str(error.value)


def test_duplicate_columns_and_extra_fields_are_refused(tmp_path):
    (tmp_path / "dup.csv").write_text("sentence,sentence\nA b.,C d.\n")
    with pytest.raises(ValueError, match=r"dup.csv: the header names 'sentence' twice"):
        read_sentences(str(tmp_path / "dup.csv"))
    (tmp_path / "dup.jsonl").write_text('{"text": "A b.", "text": "C d."}\n')
    with pytest.raises(ValueError, match=r"dup.jsonl: line 1 names 'text' twice"):
        read_sentences(str(tmp_path / "dup.jsonl"))
    (tmp_path / "ragged.csv").write_text("id,sentence\n1,A b.\n2,C d.,extra\n")
    with pytest.raises(ValueError, match=r"ragged.csv: line 3 has 3 fields, .* 2 columns"):
        read_sentences(str(tmp_path / "ragged.csv"))


@pytest.mark.parametrize("value", ['["a", "b"]', '{"x": 1}', "42", "true"])
def test_a_text_that_is_not_a_string_is_refused(tmp_path, value):
    path = tmp_path / "s.jsonl"
    path.write_text(f'{{"text": "Fine."}}\n{{"text": {value}}}\n')
    with pytest.raises(ValueError, match=r"s.jsonl: row 2: 'text' is .*, not a string"):
        read_sentences(str(path))


def test_ids_are_strings_or_integers(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "A.", "id": 7}\n{"text": "B.", "id": "b"}\n')
    assert [s.id for s in read_sentences(str(path), id_column="id")] == ["7", "b"]
    for value in ("1.0", "true", "null", "[1]"):
        path.write_text(f'{{"text": "A.", "id": 7}}\n{{"text": "B.", "id": {value}}}\n')
        with pytest.raises(ValueError, match=r"row 2: the id .* is not a string or an integer"):
            read_sentences(str(path), id_column="id")


def test_a_row_without_the_id_field_is_named(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "A.", "id": 1}\n{"text": "B.", "id": 2}\n{"text": "C."}\n')
    with pytest.raises(ValueError, match=r"s.jsonl: row 3 has no 'id'"):
        read_sentences(str(path), id_column="id")


def test_a_lone_surrogate_is_refused_with_its_row(tmp_path):
    """The tokenizer cannot read it (a TypeError deep inside), nor can UTF-8 hold it."""
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "The cat."}\n{"text": "a\\ud800b"}\n')
    with pytest.raises(ValueError, match=r"s.jsonl: row 2: .*not UTF-8.*surrogate"):
        read_sentences(str(path))


def test_eventsadapt_limit_keeps_that_many_pairs():
    """``--limit 3`` keeps the first three pairs, as lm-eval's ``--limit`` keeps three
    items: one pair more would make a limited run's numbers match no lm-eval run."""
    from pll_harness.tools.sentences import eventsadapt_sentences

    kept = eventsadapt_sentences(limit=3)
    assert len(kept) == 6
    assert [s.id for s in kept] == [s.id for s in eventsadapt_sentences()[:6]]
