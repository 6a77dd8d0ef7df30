"""Unit tests of the pair loader and scorer behind every minimal-pair task (no lm-eval run)."""

from __future__ import annotations

import gzip
import io
import json
import logging
import math
import re
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest

from pll_harness.tasks import minimal_pairs as mp


def _write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_columns_are_renamed_and_kept_verbatim(tmp_path: Path) -> None:
    csv = _write_csv(
        tmp_path / "pairs.csv",
        'ok,not_ok,note\n"He said ""NA"", twice.",He say NA twice.,NA\nNA, NA ,x\n',
    )
    test = mp.load_minimal_pairs(str(csv), good="ok", bad="not_ok")[mp.SPLIT]
    assert test.column_names == ["sentence_good", "sentence_bad", "note"]
    # "NA" is a word here, not a missing value; surrounding spaces are the user's business.
    assert test[0] == {
        "sentence_good": 'He said "NA", twice.',
        "sentence_bad": "He say NA twice.",
        "note": "NA",
    }
    assert test[1]["sentence_good"] == "NA"
    assert test[1]["sentence_bad"] == " NA "


def test_tsv_and_gzipped_jsonl(tmp_path: Path) -> None:
    tsv = _write_csv(tmp_path / "pairs.tsv", "a\tb\nOne, two.\tTwo, one.\n")
    assert mp.load_minimal_pairs(str(tsv), good="a", bad="b")[mp.SPLIT][0]["sentence_good"] == (
        "One, two."
    )
    jsonl = tmp_path / "pairs.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"sentence_good": "Á b.", "sentence_bad": "B á."}) + "\n")
    assert mp.load_minimal_pairs(str(jsonl))[mp.SPLIT][0]["sentence_bad"] == "B á."


def test_relative_paths_resolve_beside_the_yaml_then_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    _write_csv(tasks / "p.csv", "g,b\nYes.,No.\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    yaml = str(tasks / "my_task.yaml")
    loaded = mp.load_minimal_pairs("p.csv", good="g", bad="b", config_source=yaml, version=1.0)
    assert loaded[mp.SPLIT]["sentence_good"] == ["Yes."]
    _write_csv(elsewhere / "q.csv", "g,b\nHere.,There.\n")
    assert mp.load_minimal_pairs("q.csv", good="g", bad="b", config_source=yaml)[mp.SPLIT][0] == {
        "sentence_good": "Here.",
        "sentence_bad": "There.",
    }
    with pytest.raises(FileNotFoundError, match=r"missing\.csv"):
        mp.load_minimal_pairs("missing.csv", config_source=yaml)


def test_an_inline_task_reads_relative_files_beside_the_yaml_the_hook_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--tasks path/to/task.yaml`` makes lm-eval mark the task "inline": the YAML that the
    start-up hook recorded is where relative files are read, not a namesake in the cwd."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    _write_csv(tasks / "p.csv", "g,b\nRight.,B.\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    _write_csv(elsewhere / "p.csv", "g,b\nWrong.,B.\n")
    monkeypatch.chdir(elsewhere)
    recorded = {"config_source": "inline", mp.TASK_YAML_KEY: str(tasks / "my_task.yaml")}
    loaded = mp.load_minimal_pairs("p.csv", good="g", bad="b", version=1.0, **recorded)
    assert loaded[mp.SPLIT]["sentence_good"] == ["Right."]
    # A YAML found by name: lm-eval's own config_source stands.
    found = {"config_source": str(tasks / "my_task.yaml"), mp.TASK_YAML_KEY: "/elsewhere.yaml"}
    loaded = mp.load_minimal_pairs("p.csv", good="g", bad="b", **found)
    assert loaded[mp.SPLIT]["sentence_good"] == ["Right."]
    with pytest.raises(FileNotFoundError, match=r"missing\.csv.*give data_files as an absolute"):
        mp.load_minimal_pairs("missing.csv", good="g", bad="b", config_source="inline")


def test_only_a_pair_tasks_config_records_its_yaml(tmp_path: Path) -> None:
    """What the start-up hook calls for every YAML that lm-eval loads at the top."""
    yaml = tmp_path / "task.yaml"
    for loader in mp.PAIR_LOADERS:
        cfg = {"custom_dataset": loader, "metadata": {"version": 1.0}}
        mp.record_task_yaml(cfg, yaml)
        assert cfg["metadata"] == {"version": 1.0, mp.TASK_YAML_KEY: str(yaml.resolve())}
    cfg = {"custom_dataset": mp.load_minimal_pairs}
    mp.record_task_yaml(cfg, yaml)
    assert cfg["metadata"] == {mp.TASK_YAML_KEY: str(yaml.resolve())}
    others = [
        {"task": "hellaswag", "metadata": {"version": 1.0}},
        {"custom_dataset": mp.as_documents},
        {"custom_dataset": f"{tmp_path}/pll_harness.tasks.minimal_pairs.load_minimal_pairs"},
        {"custom_dataset": mp.load_minimal_pairs, "metadata": "not a dict"},
    ]
    for cfg in others:
        before = repr(cfg)
        mp.record_task_yaml(cfg, yaml)
        assert repr(cfg) == before


def test_where_filters_rows_in_file_order(tmp_path: Path) -> None:
    csv = _write_csv(tmp_path / "p.csv", "g,b,kind\nA1.,B1.,x\nA2.,B2.,y\nA3.,B3.,x\nA4.,B4.,z\n")
    only_x = mp.load_minimal_pairs(str(csv), good="g", bad="b", where={"kind": "x"})[mp.SPLIT]
    assert only_x["sentence_good"] == ["A1.", "A3."]
    x_or_z = mp.load_minimal_pairs(str(csv), good="g", bad="b", where={"kind": ["x", "z"]})
    assert x_or_z[mp.SPLIT]["sentence_good"] == ["A1.", "A3.", "A4."]
    with pytest.raises(ValueError, match="keeps no rows"):
        mp.load_minimal_pairs(str(csv), good="g", bad="b", where={"kind": "w"})
    with pytest.raises(KeyError, match="nope"):
        mp.load_minimal_pairs(str(csv), good="g", bad="b", where={"nope": 1})
    numbers = _write_csv(tmp_path / "n.csv", "g,b,n\nA1.,B1.,1\nA2.,B2.,2\n")
    with pytest.raises(ValueError, match=r"keeps no rows .*'n': 'int'"):
        mp.load_minimal_pairs(str(numbers), good="g", bad="b", where={"n": "1"})


def test_an_empty_sentence_is_named_by_its_row_in_the_file(tmp_path: Path) -> None:
    """Rows count in the file as read (before ``where``), in the file's column names."""
    csv = _write_csv(tmp_path / "p.csv", "g,b,k\nA1.,B1.,x\nA2.,B2.,y\nA3.,B3.,x\n,B4.,x\n")
    with pytest.raises(ValueError, match=r"p\.csv: data row 4 has no sentence in 'g'"):
        mp.load_minimal_pairs(str(csv), good="g", bad="b", where={"k": "x"})


@pytest.mark.parametrize(
    ("loader", "options", "match"),
    [
        (mp.load_minimal_pairs, {"wehre": {"k": "x"}}, "did you mean 'where'"),
        (mp.load_minimal_pairs, {"data_fromat": "csv"}, "did you mean 'data_format'"),
        (mp.load_minimal_pairs, {"first": "g"}, "other pair template"),
        (mp.load_pair_preferences, {"good": "g"}, "other pair template"),
    ],
)
def test_a_misspelt_or_foreign_option_is_refused(tmp_path: Path, loader, options, match) -> None:
    """lm-eval passes metadata beside the options, so only near misses can be told."""
    csv = _write_csv(tmp_path / "p.csv", "g,b,k\nA1.,B1.,x\nA2.,B2.,y\n")
    with pytest.raises(ValueError, match=match):
        loader(str(csv), **options)
    assert len(mp.load_minimal_pairs(str(csv), "g", "b", version=1.0, seed=3)[mp.SPLIT]) == 2


@pytest.mark.parametrize(
    ("text", "kwargs", "error", "match"),
    [
        ("g,b\nA.,B.\n", {"good": "g", "bad": "bad"}, KeyError, "bad"),
        ("g,b\nA.,\n", {"good": "g", "bad": "b"}, ValueError, "data row 1 .* in 'b'"),
        ("g,b\nA.,   \n", {"good": "g", "bad": "b"}, ValueError, "data row 1 .* in 'b'"),
        ("g,sentence_bad,b\nA.,x,B.\n", {"good": "g", "bad": "b"}, ValueError, "already has"),
        ("g,b\nA.,B.\n", {"good": "g", "bad": "g"}, ValueError, "two different"),
        ("g,b\n", {"good": "g", "bad": "b"}, ValueError, "p.csv: no sentence pairs"),
    ],
)
def test_bad_files_fail_at_load_time(
    tmp_path: Path, text: str, kwargs: dict, error: type[Exception], match: str
) -> None:
    csv = _write_csv(tmp_path / "p.csv", text)
    with pytest.raises(error, match=match):
        mp.load_minimal_pairs(str(csv), **kwargs)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("pairs.csv", ""),
        ("pairs.tsv", "g\tb\n"),
        ("pairs.jsonl", ""),
        ("pairs.jsonl", "\n  \n"),
        ("pairs.jsonl.gz", ""),
        ("pairs.parquet", None),
    ],
)
def test_a_file_without_records_is_named(tmp_path: Path, name: str, content: str | None) -> None:
    """datasets fails on these with "corresponds to no data", a DatasetGenerationError or a
    bare StopIteration; the user is told which file is empty."""
    path = tmp_path / name
    if content is None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(
            pa.table({"g": pa.array([], pa.string()), "b": pa.array([], pa.string())}), path
        )
    elif name.endswith(".gz"):
        path.write_bytes(gzip.compress(content.encode()))
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{re.escape(name)}: no sentence pairs"):
        mp.load_minimal_pairs(str(path), good="g", bad="b")


QUOTED_CELLS = [
    ['"Stop!" he said.', '"Stop!" he say.'],
    ['She said "hi" to me.', 'She say "hi" to me.'],
    ["One, two;\tthree.", "Line\nbreak."],
    ['"', '""'],
]
"""Cells with quotes, delimiters and a line break, as the csv module and pandas quote them."""


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.csv", "pairs.tsv.gz"])
@pytest.mark.parametrize("writer", ["csv", "pandas"])
def test_cells_quoted_as_csv_writers_quote_them_are_read_verbatim(
    tmp_path: Path, name: str, writer: str
) -> None:
    import csv

    import pandas as pd

    delimiter = "," if ".csv" in name else "\t"
    buffer = io.StringIO(newline="")
    if writer == "csv":
        csv.writer(buffer, delimiter=delimiter).writerows([["g", "b"], *QUOTED_CELLS])
    else:
        pd.DataFrame(QUOTED_CELLS, columns=["g", "b"]).to_csv(buffer, sep=delimiter, index=False)
    data = buffer.getvalue().encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    loaded = mp.load_minimal_pairs(str(path), good="g", bad="b")[mp.SPLIT]
    assert [[row["sentence_good"], row["sentence_bad"]] for row in loaded] == QUOTED_CELLS


def test_quotes_inside_an_unquoted_cell_and_a_quoted_header_after_a_bom_are_read(
    tmp_path: Path,
) -> None:
    """Only a cell that starts with a quote is a quoted cell; pandas drops a byte-order mark
    before it reads the first cell, and so does the check of the quoting."""
    tsv = _write_csv(tmp_path / "p.tsv", '\ufeff"g"\tb\nShe said "hi".\tShe say "hi"\n')
    loaded = mp.load_minimal_pairs(str(tsv), good="g", bad="b")[mp.SPLIT]
    assert loaded[0] == {"sentence_good": 'She said "hi".', "sentence_bad": 'She say "hi"'}


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        # pandas scored this row as `Stop! he said.` / `Stop! he say.`
        ("p.tsv", 'g\tb\nA.\tB.\n"Stop!" he said.\t"Stop!" he say.\n', 3),
        ("p.csv", 'g,b\n"Stop!" he said.,B.\n', 2),
        # an unclosed quote: pandas ran it on over the next row, to the next quote
        ("p.tsv", 'g\tb\n"Stop! he said.\tB.\nC.\t"D."\nE.\tF.\n', 2),
        ("p.csv", 'g,b\nA.,B.\n\nC.,"D.\n', 4),
        ("p.tsv.gz", 'g\tb\n"Stop!" he said.\tB.\n', 2),
    ],
)
def test_malformed_quoting_is_refused_naming_the_file_and_line(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(ValueError) as error:
        mp.load_minimal_pairs(str(path), good="g", bad="b")
    message = str(error.value)
    assert message.startswith(f"{path}: the row that starts on line {line} is not well-formed")
    assert '"""Hi,"" she said.' in message and "JSON Lines" in message


def test_a_cell_longer_than_the_csv_modules_default_limit_is_read(tmp_path: Path) -> None:
    """The quoting check read with the csv module's 128 KiB field limit, and refused such a
    cell as malformed CSV, though pandas reads it."""
    long = "A " + "very " * 30_000 + "long sentence."
    path = _write_csv(tmp_path / "p.csv", f"g,b\n{long},B.\n")
    loaded = mp.load_minimal_pairs(str(path), good="g", bad="b")[mp.SPLIT]
    assert loaded[0] == {"sentence_good": long, "sentence_bad": "B."}


def test_a_reader_error_is_not_hidden_by_the_check_for_records(tmp_path: Path) -> None:
    """A file the reader cannot read (not UTF-8) keeps the reader's error, not one from the
    check for an empty file that runs after it."""
    latin = tmp_path / "latin.csv"
    latin.write_bytes("g,b\nCaf\xe9.,B.\n".encode("latin-1"))
    with pytest.raises(datasets.exceptions.DatasetGenerationError) as error:
        mp.load_minimal_pairs(str(latin), good="g", bad="b")
    assert isinstance(error.value.__cause__, UnicodeDecodeError)


def test_an_empty_file_among_several_is_named(tmp_path: Path) -> None:
    full = _write_csv(tmp_path / "full.csv", "g,b\nA.,B.\n")
    empty = _write_csv(tmp_path / "empty.csv", "")
    with pytest.raises(ValueError, match=r"^empty\.csv: no sentence pairs"):
        mp.load_minimal_pairs([str(full), str(empty)], good="g", bad="b")


def test_unknown_format_asks_for_data_format(tmp_path: Path) -> None:
    odd = _write_csv(tmp_path / "pairs.txt", "g,b\nA.,B.\n")
    with pytest.raises(ValueError, match="data_format"):
        mp.load_minimal_pairs(str(odd), good="g", bad="b")
    loaded = mp.load_minimal_pairs(str(odd), good="g", bad="b", data_format="csv")
    assert loaded[mp.SPLIT][0]["sentence_bad"] == "B."
    lines = _write_csv(tmp_path / "pairs.dat", '{"g": "A.", "b": "B."}\n')
    for fmt in ("json", "jsonl"):
        loaded = mp.load_minimal_pairs(str(lines), good="g", bad="b", data_format=fmt)
        assert loaded[mp.SPLIT][0]["sentence_bad"] == "B."


def test_preference_pairs_use_their_own_column_names(tmp_path: Path) -> None:
    csv = _write_csv(tmp_path / "s.csv", "stereo,anti\nShe is a nurse.,He is a nurse.\n")
    doc = mp.load_pair_preferences(str(csv), first="stereo", second="anti")[mp.SPLIT][0]
    assert mp.preference_pair_choices(doc) == ["She is a nurse.", "He is a nurse."]


@pytest.mark.parametrize("suffix", ["csv", "tsv", "jsonl", "jsonl.gz", "parquet"])
def test_every_format_loads_without_asking_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """``datasets.load_dataset`` sends a download-count request for every call, even for
    local files; the loader must not (67 of them cost 5-10 s of BLiMP where the Hub is out of
    reach)."""
    import datasets
    import datasets.load
    import pandas as pd

    rows = pd.DataFrame({"g": ["NA", "Two."], "b": ["No.", "Too."]})
    path = tmp_path / f"pairs.{suffix}"
    if suffix == "parquet":
        rows.to_parquet(path)
    elif suffix.startswith("jsonl"):
        rows.to_json(path, orient="records", lines=True)
    else:
        rows.to_csv(path, sep="\t" if suffix == "tsv" else ",", index=False)
    requests: list[str] = []
    monkeypatch.setattr(datasets.load, "increase_load_count", requests.append)
    loaded = mp.load_minimal_pairs(str(path), good="g", bad="b")[mp.SPLIT]
    assert loaded["sentence_good"] == ["NA", "Two."]  # a word, not a missing value
    assert loaded["sentence_bad"] == ["No.", "Too."]
    assert requests == []


def test_several_files_are_read_in_order_as_one_split(tmp_path: Path) -> None:
    first = _write_csv(tmp_path / "a.csv", "g,b\nA1.,B1.\nA2.,B2.\n")
    second = _write_csv(tmp_path / "b.csv", "g,b\nA3.,B3.\n")
    loaded = mp.load_minimal_pairs([str(second), str(first)], good="g", bad="b")[mp.SPLIT]
    assert loaded["sentence_good"] == ["A3.", "A1.", "A2."]


def test_documents_are_the_rows_as_dicts_with_their_features(tmp_path: Path) -> None:
    csv = _write_csv(tmp_path / "p.csv", "g,b,n\nA.,B.,1\nC.,D.,2\n")
    split = mp.load_minimal_pairs(str(csv), good="g", bad="b")[mp.SPLIT]
    docs = mp.as_documents(split)
    assert docs == split.to_list()
    assert docs[1] == {"sentence_good": "C.", "sentence_bad": "D.", "n": 2}
    assert docs.features == split.features
    # lm-eval asks at every read of eval_docs: one list per split, not one per read.
    assert mp.as_documents(split) is docs
    assert mp.as_documents(split.select([1])) == [docs[1]]


def test_minimal_pair_choices_are_verbatim() -> None:
    doc = {"sentence_good": "It's {{ fine }}.", "sentence_bad": " 'Tis not."}
    assert mp.minimal_pair_choices(doc) == ["It's {{ fine }}.", " 'Tis not."]


@pytest.mark.parametrize(
    ("good", "bad", "acc"),
    [(-1.0, -2.0, 1.0), (-2.0, -1.0, 0.0), (-1.5, -1.5, 0.0), (0.0, -0.0, 0.0)],
)
def test_strict_accuracy_counts_ties_as_wrong(good: float, bad: float, acc: float) -> None:
    out = mp.process_minimal_pair({}, [(good, False), (bad, True)])
    assert out == {"acc": acc, "score_diff": good - bad}


def test_nan_scores_are_wrong_not_right_and_said_once(monkeypatch, caplog) -> None:
    monkeypatch.setattr(mp, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness"):
        assert mp.process_minimal_pair({}, [(-2.0, False), (-1.0, False)])["acc"] == 0.0
        assert caplog.text == ""
        out = mp.process_minimal_pair({}, [(math.nan, False), (-1.0, False)])
        mp.process_stereotype_pair({}, [(-1.0, False), (math.nan, False)])
    assert out["acc"] == 0.0
    assert math.isnan(out["score_diff"])
    assert caplog.text.count("NaN log-likelihood") == 1


@pytest.mark.parametrize("results", [[], [(-1.0, False)], [(-1.0, False)] * 3])
def test_a_pair_without_two_scores_is_an_error_that_says_why(results) -> None:
    """lm-eval gives a document no answers when its request cache holds other documents
    (a run with --samples filled it): that cause is named."""
    with pytest.raises(ValueError, match=f"expected scores for 2 sentences, got {len(results)}"):
        mp.process_minimal_pair({}, results)
    if not results:
        with pytest.raises(ValueError, match="--cache_requests refresh"):
            mp.process_stereotype_pair({}, results)


def test_preference_counts_strictly_first() -> None:
    assert mp.process_pair_preference({}, [(-1.0, False), (-3.0, False)]) == {
        "first_preferred": 1.0,
        "score_diff": 2.0,
    }
    assert mp.process_pair_preference({}, [(-1.0, False), (-1.0, False)])["first_preferred"] == 0


def test_pair_scores_wants_exactly_two() -> None:
    with pytest.raises(ValueError, match="2 sentences"):
        mp.pair_scores([(-1.0, False)])


def _spied_json_reads(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The keyword arguments of every ``Dataset.from_json`` call from now on."""
    calls: list[dict] = []
    from_json = datasets.Dataset.from_json

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return from_json(*args, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "from_json", spy)
    return calls


PACKAGED_DATA = Path(mp.__file__).parent / "data"


def _default_read(paths: list[Path]) -> datasets.Dataset:
    """What the JSON builder makes of ``paths``, with its own settings."""
    return datasets.Dataset.from_json([str(p) for p in paths], split=mp.SPLIT)


def _assert_same_split(read: datasets.Dataset, default: datasets.Dataset) -> None:
    assert read.features == default.features
    assert read.to_list() == default.to_list()


def _write_json_lines(path: Path, rows: list[dict], prefix: bytes = b"") -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows).encode()
    path.write_bytes(gzip.compress(prefix + text) if path.suffix == ".gz" else prefix + text)
    return path


PLAIN_ROWS = [
    {"g": "A cat sat.", "b": "A cat sit.", "n": 1, "ok": True, "w": 0.5, "note": None},
    {"g": "Dogs bark.", "b": "Dogs barks.", "n": 2, "ok": False, "w": 1.5, "note": "x"},
]


def test_every_packaged_pair_file_is_read_in_memory_as_the_builder_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """All 142 packaged files (BLiMP, CLAMS, CrowS-Pairs, EventsAdapt, Zorro): no builder
    call, and the split the builder makes, features and rows."""
    files = sorted(PACKAGED_DATA.glob("*/**/*.jsonl.gz"))
    assert len(files) == 142
    for path in files:
        default = _default_read([path])
        calls = _spied_json_reads(monkeypatch)
        _assert_same_split(mp._read([path], "json"), default)
        monkeypatch.undo()
        assert calls == [], path


def test_plain_json_lines_are_read_in_memory_as_the_builder_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strings, integers, booleans, floats and nulls; one file, gzipped, and several files
    with the same columns, in the order given."""
    plain = _write_json_lines(tmp_path / "plain.jsonl", PLAIN_ROWS)
    zipped = _write_json_lines(tmp_path / "zipped.jsonl.gz", PLAIN_ROWS[::-1])
    for paths in ([plain], [zipped], [zipped, plain]):
        default = _default_read(paths)
        calls = _spied_json_reads(monkeypatch)
        read = mp._read(paths, "json")
        monkeypatch.undo()
        assert calls == []
        _assert_same_split(read, default)
    assert mp._read([plain], "json")._fingerprint != mp._read([zipped], "json")._fingerprint


def _with_a_byte_order_mark(tmp_path: Path) -> list[Path]:
    return [_write_json_lines(tmp_path / "bom.jsonl", PLAIN_ROWS, b"\xef\xbb\xbf")]


def _one_json_array(tmp_path: Path) -> list[Path]:
    path = tmp_path / "array.json"
    path.write_text(json.dumps(PLAIN_ROWS), encoding="utf-8")
    return [path]


def _a_zip_of_two_files(tmp_path: Path) -> list[Path]:
    import zipfile

    path = tmp_path / "pairs.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for index, rows in enumerate((PLAIN_ROWS, PLAIN_ROWS[::-1])):
            archive.writestr(f"part{index}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return [path]


def _other_columns_in_the_second(tmp_path: Path) -> list[Path]:
    first = _write_json_lines(tmp_path / "a.jsonl", PLAIN_ROWS)
    return [first, _write_json_lines(tmp_path / "b.jsonl", [{"g": "C.", "b": "D.", "z": 3}])]


def _named_gzip_but_plain(tmp_path: Path) -> list[Path]:
    path = tmp_path / "plain.jsonl.gz"
    path.write_text('{"g": "A.", "b": "B."}\n', encoding="utf-8")
    return [path]


def _rows_without_columns(tmp_path: Path) -> list[Path]:
    return [_write_json_lines(tmp_path / "empty_rows.jsonl", [{}, {}])]


def _an_agents_trace_columns(tmp_path: Path) -> list[Path]:
    row = {"type": "session", "id": "s1", "version": 1, "cwd": "/", "g": "A.", "b": "B."}
    return [_write_json_lines(tmp_path / "droid.jsonl", [row])]


def _outcome(read: Callable[[], datasets.Dataset]) -> tuple:
    """A read's split (features and rows), or the type of its error."""
    try:
        split = read()
    except Exception as error:  # the builder's own errors are among the outcomes compared
        return ("error", type(error))
    return ("split", split.features, split.to_list())


@pytest.mark.parametrize(
    "files",
    [
        _with_a_byte_order_mark,
        _one_json_array,
        _a_zip_of_two_files,
        _other_columns_in_the_second,
        _named_gzip_but_plain,
        _rows_without_columns,
        _an_agents_trace_columns,
    ],
)
def test_what_the_in_memory_read_does_not_take_the_builder_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Callable[[Path], list[Path]]
) -> None:
    """Files the builder treats in ways of its own (a byte-order mark, a JSON array, an
    archive of several files, an agent's traces) or cannot read (columns that differ
    between files, a gzip name on a plain file, rows without columns): the builder's split,
    or its error."""
    paths = files(tmp_path)
    expected = _outcome(lambda: _default_read(paths))
    calls = _spied_json_reads(monkeypatch)
    assert _outcome(lambda: mp._read(paths, "json")) == expected
    assert len(calls) == 1


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_a_file_name_is_not_a_glob_pattern(tmp_path: Path, suffix: str) -> None:
    """The builders glob their paths: `pairs[1].csv` read `pairs1.csv` beside it.  The
    JSON Lines file here has a nested column, so that the builder reads it."""
    for name, sentence in (("pairs[1]", "Right."), ("pairs1", "Wrong.")):
        if suffix == "csv":
            _write_csv(tmp_path / f"{name}.csv", f"g,b,n\n{sentence},B.,1\n")
        else:
            row = {"g": sentence, "b": "B.", "n": [1]}
            _write_json_lines(tmp_path / f"{name}.{suffix}", [row])
    loaded = mp.load_minimal_pairs(str(tmp_path / f"pairs[1].{suffix}"), good="g", bad="b")
    assert loaded[mp.SPLIT]["sentence_good"] == ["Right."]


def test_files_larger_in_all_than_the_in_memory_limit_are_read_by_the_builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file within a chunk, but more bytes in all than an in-memory read takes: the
    builder's memory-mapped split, as it makes it."""
    paths = [_write_json_lines(tmp_path / f"part{index}.jsonl", PLAIN_ROWS) for index in range(3)]
    default = _default_read(paths)
    monkeypatch.setattr(mp, "MAX_IN_MEMORY_BYTES", 2 * paths[0].stat().st_size)
    calls = _spied_json_reads(monkeypatch)
    read = mp._read(paths, "json")
    assert len(calls) == 1
    _assert_same_split(read, default)
    monkeypatch.undo()
    calls = _spied_json_reads(monkeypatch)
    mp._read(paths[:2], "json")
    assert calls == []


def test_a_file_larger_than_the_builders_chunk_is_read_by_the_builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The builder parses a file chunk by chunk, each chunk's types inferred on their own,
    so only a file within one chunk is read in memory."""
    from datasets.packaged_modules.json.json import JsonConfig

    path = _write_json_lines(tmp_path / "long.jsonl", PLAIN_ROWS)
    default = _default_read([path])
    # The in-memory read takes the chunk size from the config's default; the builder's
    # configs keep theirs (10 MB), so it still reads the file as before.
    monkeypatch.setattr(JsonConfig.__dataclass_fields__["chunksize"], "default", 64)
    calls = _spied_json_reads(monkeypatch)
    read = mp._read([path], "json")
    assert len(calls) == 1
    _assert_same_split(read, default)


@pytest.mark.parametrize(
    "meta",
    [
        [{"a": 1}, {"b": "x"}],  # an object whose keys vary: JSON text by default
        [{"a": 1}, "x"],  # an object in one row, a string in the next
        [[1, 2], [3]],  # a list: nested, so read the default way to be sure
    ],
)
def test_json_with_a_nested_field_is_read_the_default_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meta: list
) -> None:
    path = tmp_path / "nested.jsonl"
    rows = [{"g": "A.", "b": "B.", "meta": meta[0]}, {"g": "C.", "b": "D.", "meta": meta[1]}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    default = datasets.Dataset.from_json(str(path), split=mp.SPLIT)
    calls = _spied_json_reads(monkeypatch)
    read = mp._read([path], "json")
    assert calls[-1] == {"split": mp.SPLIT}
    assert read.features == default.features and read.to_list() == default.to_list()


@pytest.mark.parametrize(
    "metadata",
    [
        {"where": {"kind": "x"}},
        {"data_files": "other.csv"},
        {"good": "b", "bad": "g"},
        {"data_file": "other.csv", "max_seq_lengths": [4096]},
    ],
    ids=["where", "data_files", "columns", "near_miss"],
)
def test_metadata_keys_never_reach_a_pair_loader_as_its_options(
    metadata, tmp_path, monkeypatch, caplog
) -> None:
    """lm-eval hands every task's loader ``--metadata`` (and ``--model_args``) beside its
    ``dataset_kwargs``: a key the YAML also sets used to stop the run with "got multiple
    values for keyword argument", one it leaves out used to filter or swap what is scored
    without a word, and a near miss stopped the run as a misspelt ``dataset_kwargs`` key.
    The YAML's options stand, the keys are named once, and other keys pass."""
    from lm_eval.tasks import TaskManager

    monkeypatch.setattr(mp, "_warned", set())
    _write_csv(tmp_path / "p.csv", "g,b,kind\nA1.,B1.,x\nA2.,B2.,y\n")
    _write_csv(tmp_path / "other.csv", "g,b,kind\nWrong.,B.,x\n")
    (tmp_path / "meta_pairs.yaml").write_text(
        "task: meta_pairs\ninclude: pll_harness:minimal_pair.yaml\n"
        "dataset_kwargs: {data_files: p.csv, good: g, bad: b}\n",
        encoding="utf-8",
    )
    manager = TaskManager(include_defaults=False, include_path=str(tmp_path), metadata=metadata)
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness"):
        task = manager.load(["meta_pairs"])["tasks"]["meta_pairs"]
    assert [doc["sentence_good"] for doc in task.eval_docs] == ["A1.", "A2."]
    assert [doc["sentence_bad"] for doc in task.eval_docs] == ["B1.", "B2."]
    assert caplog.text.count("ignores") == 1
    options = [key for key in metadata if key != "max_seq_lengths"]
    assert all(f"{key}=" in caplog.text for key in options)
    assert "max_seq_lengths" not in caplog.text
    assert task.config.metadata["version"] == 1.0
    assert task.config.metadata.get("max_seq_lengths") == metadata.get("max_seq_lengths")


def test_a_stereotype_pairs_difference_is_more_minus_less() -> None:
    """CrowS-Pairs' ``score_diff`` reads as BLiMP's does: positive where the more
    stereotyping sentence scores higher, which is what ``pct_stereotype`` counts."""
    assert mp.process_stereotype_pair({}, [(-1.0, False), (-3.0, False)]) == {
        "pct_stereotype": 1.0,
        "score_diff": 2.0,
    }
    assert mp.process_stereotype_pair({}, [(-3.0, False), (-1.0, False)]) == {
        "pct_stereotype": 0.0,
        "score_diff": -2.0,
    }
