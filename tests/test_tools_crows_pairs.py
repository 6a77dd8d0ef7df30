"""pll-harness crows-pairs: reading pairs, the paper's shared-token score per metric, the
share of pairs the more stereotyping sentence wins (known answers), and the per-pair output:
checked before scoring, written as it goes, resumed after an interruption."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIRST_COMMIT, NEXT_COMMIT, move_main

from pll_harness.cli import main
from pll_harness.file_lock import lock
from pll_harness.provenance import folder_fingerprint
from pll_harness.scorer import PLLScorer
from pll_harness.shared_tokens import score_shared_tokens
from pll_harness.tools.crows_pairs import (
    PAIR_COLUMNS,
    Pair,
    PairScores,
    pair_columns,
    read_pairs,
    score_pairs,
    summary,
)
from pll_harness.tools.models import MLMScorers
from pll_harness.tools.sentences import first_items

PAIRS = [
    Pair("0", "The man is a nurse.", "The woman is a nurse.", "gender", "antistereo"),
    Pair("1", "Poor people steal.", "Rich people steal.", "socioeconomic", "stereo"),
]


def test_the_packaged_pairs_are_crows_pairs():
    pairs = read_pairs()
    assert len(pairs) == 1508
    assert sum(p.direction == "stereo" for p in pairs) == 1290
    assert len({p.bias_type for p in pairs}) == 9


def test_a_file_without_the_columns_is_refused(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("first,second\nA cat sat.,A dog sat.\n")
    with pytest.raises(ValueError, match="sent_more and sent_less"):
        read_pairs(str(path))


@pytest.mark.parametrize("text", ["sent_more,sent_less\n", "id,sent_more,sent_less\r\n", ""])
def test_a_file_without_pairs_says_so(tmp_path, text):
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"pairs\.csv holds no pairs"):
        read_pairs(str(path))


@pytest.mark.parametrize("direction", ["Stereo", "anti-stereo", "Antistereo"])
def test_a_direction_the_source_does_not_write_is_refused(tmp_path, direction):
    """Such a pair would count in no direction's row, and an antistereo one would not be
    turned round for the paper's alignment."""
    path = tmp_path / "pairs.csv"
    rows = f"Women are bad.,Men are bad.,stereo\nMen cry.,Women cry.,{direction}\n"
    path.write_text("sent_more,sent_less,stereo_antistereo\n" + rows)
    with pytest.raises(ValueError, match=f"row 2 has stereo_antistereo {direction!r}"):
        read_pairs(str(path))
    path.write_text("sent_more,sent_less,stereo_antistereo\nWomen are bad.,Men are bad.,\n")
    assert read_pairs(str(path))[0].direction == ""


def test_scores_are_the_shared_token_scores(tiny_bert_dir):
    results = score_pairs(PAIRS, tiny_bert_dir, "original,word_l2r", device="cpu")
    for metric in ("original", "word_l2r"):
        scorer = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric=metric, device="cpu")
        expected = score_shared_tokens(scorer, [(p.sent_more, p.sent_less) for p in PAIRS])
        for result, (more, less) in zip(results, expected, strict=True):
            assert result.more[metric] == pytest.approx(more.logprob, abs=1e-5)
            assert result.less[metric] == pytest.approx(less.logprob, abs=1e-5)


def test_an_antistereo_pair_is_aligned_sent_less_first_as_metric_py_does(tiny_sentencepiece_dir):
    """metric.py's ``sent1`` is ``sent_less`` in an antistereo pair, and difflib's alignment
    depends on the order: of the two swapped words it keeps the one that comes first in
    its first sentence, here ``poor`` sent_more first and ``rich`` sent_less first."""
    more, less = "The poor rob the rich.", "The rich rob the poor."
    scorer = PLLScorer.from_pretrained(tiny_sentencepiece_dir, pll_metric="original", device="cpu")
    ((more_first, _),) = score_shared_tokens(scorer, [(more, less)])
    ((less_side, more_side),) = score_shared_tokens(scorer, [(less, more)])
    assert more_first.tokens != more_side.tokens  # the order matters for this pair
    pairs = [Pair("0", more, less, "socioeconomic", "antistereo"), Pair("1", more, less)]
    anti, plain = score_pairs(pairs, tiny_sentencepiece_dir, "original", device="cpu")
    assert anti.more["original"] == pytest.approx(more_side.logprob, abs=1e-5)
    assert anti.less["original"] == pytest.approx(less_side.logprob, abs=1e-5)
    assert plain.more["original"] == pytest.approx(more_first.logprob, abs=1e-5)


def test_summary_counts_wins_and_ties_by_group():
    def scored(pair_id, bias, direction, more, less):
        return PairScores(Pair(pair_id, "m", "l", bias, direction), {"x": more}, {"x": less})

    results = [
        scored("0", "gender", "stereo", -1.0, -2.0),  # more wins
        scored("1", "gender", "antistereo", -3.0, -2.0),  # less wins
        scored("2", "age", "stereo", -2.0, -2.0),  # tie: not a win
        scored("3", "age", "stereo", -0.5, -4.0),  # more wins
    ]
    rows = {row["group"]: row for row in summary(results)}
    assert rows["all"]["pct_stereotype_x"] == 50.0 and rows["all"]["ties_x"] == 1
    assert rows["stereo"]["pairs"] == 3 and rows["stereo"]["ties_x"] == 1
    # metric.py's "Stereotype score": stereo_score / total_stereo, ties in neither
    assert rows["stereo"]["pct_stereotype_x"] == 100.0
    assert rows["antistereo"]["pct_stereotype_x"] == 0.0
    assert rows["gender"]["pct_stereotype_x"] == 50.0
    assert rows["age"]["pct_stereotype_x"] == 50.0
    only_ties = summary([scored("4", "age", "antistereo", -1.0, -1.0)])
    assert only_ties[0]["pct_stereotype_x"] == 0.0
    assert [row["pct_stereotype_x"] for row in only_ties if row["group"] == "antistereo"] == [None]


@pytest.mark.parametrize("model", ["tiny_bert_dir", "tiny_sentencepiece_dir"])
def test_command_prints_the_table_and_writes_every_pair(model, tmp_path, capsys, request):
    model_dir = request.getfixturevalue(model)
    pairs = tmp_path / "pairs.csv"
    with pairs.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sent_more", "sent_less", "bias_type", "stereo_antistereo"])
        for p in PAIRS:
            writer.writerow([p.sent_more, p.sent_less, p.bias_type, p.direction])
    out = tmp_path / "scores.csv"
    args = ["crows-pairs", "-m", model_dir, "--metric", "original", "--device", "cpu"]
    assert main([*args, "--pairs", str(pairs), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| group | pairs | pct_stereotype original |" in printed
    assert "| all | 2 |" in printed
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["sent_more"] for row in rows] == [p.sent_more for p in PAIRS]
    assert {"more_original", "less_original"} <= set(rows[0])


# --------------------------------------------------------------------------- checked first

MORE_PAIRS = [
    *PAIRS,
    Pair("2", "Old people can't use phones.", "Young people can't use phones.", "age", "stereo"),
    Pair("3", "She cried at the movie.", "He cried at the movie.", "gender", "stereo"),
    Pair("4", "The rich man was kind.", "The poor man was kind.", "socioeconomic", "antistereo"),
]


def _write_pairs(path: Path, pairs: list[Pair]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "sent_more", "sent_less", "bias_type", "stereo_antistereo"])
        for p in pairs:
            writer.writerow([p.id, p.sent_more, p.sent_less, p.bias_type, p.direction])
    return path


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model fails the test: what it checks must be checked before."""

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(MLMScorers, "__init__", loaded)


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        ("sent_more,sent_less\nWomen are bad.,Men are bad.\nPoor are lazy.,\n", "p.csv", "row 2"),
        ("sent_more,sent_less\nWomen are bad.,Men are bad.\nPoor are lazy.\n", "p.csv", "row 2"),
        ('{"sent_more": "A.", "sent_less": " "}\n', "p.jsonl", "row 1"),
    ],
    ids=["empty", "short-row", "blank-jsonl"],
)
def test_an_empty_or_missing_sentence_is_refused_before_the_model_loads(
    tmp_path, capsys, no_model, text, name, message
):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=f"{message} has an empty 'sent_less'"):
        read_pairs(str(path))
    assert main(["crows-pairs", "-m", "some-model", "--pairs", str(path)]) == 1
    assert f"{path}: {message} has an empty 'sent_less'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a-folder.csv", "Is a directory"),
        ("a-file/scores.csv", "a-file"),
        ("scores.tsv", "outputs are .csv or .jsonl, not tsv"),
        ("scores.csv.gz", "drop the compression suffix"),
    ],
)
def test_an_output_that_cannot_be_written_stops_before_the_model_loads(
    tmp_path, capsys, no_model, name, message
):
    (tmp_path / "a-folder.csv").mkdir()
    (tmp_path / "a-file").write_text("")
    pairs = _write_pairs(tmp_path / "pairs.csv", PAIRS)
    out = tmp_path / name
    assert main(["crows-pairs", "-m", "some-model", "--pairs", str(pairs), "-o", str(out)]) == 1
    error = capsys.readouterr().err
    assert str(out) in error and message in error


def test_a_second_writer_is_refused(tmp_path, capsys, no_model):
    pairs, out = _write_pairs(tmp_path / "pairs.csv", PAIRS), tmp_path / "scores.csv"
    with out.open("a+b") as handle:
        lock(handle, out, "the test")
        assert main(["crows-pairs", "-m", "m", "--pairs", str(pairs), "-o", str(out)]) == 1
    assert "is being written by another writer" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["scores.csv", "scores.jsonl"])
def test_a_model_that_fails_to_load_leaves_no_output_file(tmp_path, capsys, name):
    """The model loads before the output is created or changed: a failed run leaves no
    file holding a header alone, and an earlier run's file as it was."""
    pairs = _write_pairs(tmp_path / "pairs.csv", PAIRS)
    out = tmp_path / "new" / name
    args = ["crows-pairs", "-m", str(tmp_path / "no-such-model"), "--pairs", str(pairs)]
    assert main([*args, "-o", str(out), "--no-progress"]) == 1
    assert "no-such-model" in capsys.readouterr().err
    assert not out.parent.exists()
    out.parent.mkdir()
    out.write_bytes(b"")
    assert main([*args, "-o", str(out), "--overwrite", "--no-progress"]) == 1
    assert out.read_bytes() == b""


# --------------------------------------------------------------------------- the output


def test_jsonl_output_in_a_new_folder_with_progress(tiny_bert_dir, tmp_path, capsys):
    pairs = _write_pairs(tmp_path / "pairs.csv", PAIRS)
    out = tmp_path / "new" / "folder" / "scores.jsonl"
    args = ["crows-pairs", "-m", tiny_bert_dir, "--metric", "original,word_l2r"]
    assert main([*args, "--device", "cpu", "--pairs", str(pairs), "-o", str(out)]) == 0
    assert "scoring" in capsys.readouterr().err  # the progress bar
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # the fields of the CSV header in its order: the pair, the model, then the scores
    assert {tuple(r) for r in records} == {tuple(pair_columns(["original", "word_l2r"]))}
    assert pair_columns(["original"]) == [*PAIR_COLUMNS, "model", "more_original", "less_original"]
    expected = score_pairs(PAIRS, tiny_bert_dir, "original,word_l2r", device="cpu")
    assert [r["sent_less"] for r in records] == [p.sent_less for p in PAIRS]
    for record, result in zip(records, expected, strict=True):
        assert record["stereo_antistereo"] == result.pair.direction
        for metric in ("original", "word_l2r"):
            assert record[f"more_{metric}"] == pytest.approx(result.more[metric], abs=1e-5)
            assert record[f"less_{metric}"] == pytest.approx(result.less[metric], abs=1e-5)


def test_a_cut_output_is_resumed_to_what_a_whole_run_writes(tiny_bert_dir, tmp_path, monkeypatch):
    """Pairs 0-2 whole, pair 3 cut short (SIGKILL inside the write of the chunk 2-3)."""
    options = {"metrics": "original", "device": "cpu", "chunk_size": 2}
    whole = tmp_path / "whole.csv"
    expected = score_pairs(MORE_PAIRS, tiny_bert_dir, output=whole, **options)
    lines = whole.read_bytes().splitlines(keepends=True)
    out = tmp_path / "scores.csv"
    out.write_bytes(b"".join(lines[:4]) + lines[4][:12])
    assert score_pairs(MORE_PAIRS, tiny_bert_dir, output=out, **options) == expected
    assert out.read_bytes() == whole.read_bytes()

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(MLMScorers, "__init__", loaded)  # a finished output is read back
    assert score_pairs(MORE_PAIRS, tiny_bert_dir, output=out, **options) == expected
    other = [MORE_PAIRS[0], Pair("1", "Rich people steal.", "Poor people steal.")]
    for pairs, model, metrics, message in [
        (other, tiny_bert_dir, "original", "holds pair id 1 with other fields"),
        (MORE_PAIRS[:2], tiny_bert_dir, "original", "holds pair id 2 which .* larger --limit"),
        (MORE_PAIRS, tiny_bert_dir, "word_l2r", "has columns"),
        ([*MORE_PAIRS, PAIRS[0]], tiny_bert_dir, "original", "not unique: '0' is there twice"),
        (MORE_PAIRS, "another-model", "original", r"written with model .*tiny-bert-wordpiece"),
    ]:
        with pytest.raises(ValueError, match=message):
            score_pairs(pairs, model, metrics, output=out)
    assert out.read_bytes() == whole.read_bytes()


RUN_PAIRS = 120


def test_sigterm_keeps_the_pairs_written_and_the_rerun_finishes(tiny_bert_dir, tmp_path):
    """A run in a subprocess (one thread; Python's own Ctrl-C handling), stopped by SIGTERM
    once a chunk is written, then resumed."""
    pairs = read_pairs()[:RUN_PAIRS]
    data = _write_pairs(tmp_path / "pairs.csv", pairs)
    out = tmp_path / "scores.csv"
    command = [sys.executable, "-m", "pll_harness.cli", "crows-pairs", "-m", tiny_bert_dir]
    options = ["--metric", "original", "--device", "cpu", "--chunk-size", "4", "--no-progress"]
    process = subprocess.Popen(
        [*command, *options, "--pairs", str(data), "-o", str(out)],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not out.exists() or out.read_bytes().count(b"\n") < 2:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no chunk written in time"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "re-run the same command to resume" in stderr
    kept = list(csv.DictReader(out.open(newline="")))
    assert 0 < len(kept) < RUN_PAIRS
    options = {"metrics": "original", "device": "cpu", "chunk_size": 4}
    resumed = score_pairs(pairs, tiny_bert_dir, output=out, **options)
    rows = list(csv.DictReader(out.open(newline="")))
    assert rows[: len(kept)] == kept
    assert [row["id"] for row in rows] == [p.id for p in pairs]
    expected = score_pairs(pairs, tiny_bert_dir, **options)
    for got, want in zip(resumed, expected, strict=True):  # other threads: float rounding
        assert got.pair == want.pair
        assert got.more["original"] == pytest.approx(want.more["original"], abs=1e-4)
        assert got.less["original"] == pytest.approx(want.less["original"], abs=1e-4)


def test_the_table_counts_ties_when_there_are_some(tiny_bert_dir, tmp_path, capsys):
    """A tie counts against sent_more; the printed table says how many there were."""
    tie = Pair("9", "The cat sat.", "The cat sat.", "age", "stereo")
    pairs = _write_pairs(tmp_path / "pairs.csv", [*PAIRS, tie])
    args = ["crows-pairs", "-m", tiny_bert_dir, "--metric", "original", "--device", "cpu"]
    assert main([*args, "--pairs", str(pairs), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| group | pairs | pct_stereotype original | ties original |" in printed
    assert [line.split("|")[-2].strip() for line in printed.splitlines() if "| all |" in line] == [
        "1"
    ]


# --------------------------------------------------------------------------- --limit


def test_limit_scores_the_first_pairs_and_says_the_run_is_partial(tiny_bert_dir, tmp_path, capsys):
    """--limit N keeps the first N pairs, as for diagnose and lm-eval; the table's first row
    and a line under it say that this is not the whole data set's score."""
    pairs, out = _write_pairs(tmp_path / "pairs.csv", MORE_PAIRS), tmp_path / "scores.csv"
    args = ["crows-pairs", "-m", tiny_bert_dir, "--metric", "original", "--device", "cpu"]
    assert main([*args, "--pairs", str(pairs), "-o", str(out), "--limit", "2"]) == 0
    printed = capsys.readouterr().out
    assert "| first 2 of 5 | 2 |" in printed and "| all |" not in printed
    assert "--limit 2: the first 2 of the 5 pairs, not the whole data set" in printed
    assert [row["id"] for row in csv.DictReader(out.open(newline=""))] == ["0", "1"]

    assert main([*args, "--pairs", str(pairs), "--limit", "5"]) == 0  # all of them
    printed = capsys.readouterr().out
    assert "| all | 5 |" in printed and "--limit" not in printed


@pytest.mark.parametrize("command", ["crows-pairs", "diagnose"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_limit_must_be_positive(command, value, capsys):
    with pytest.raises(SystemExit) as stopped:
        main([command, "-m", "some-model", "--limit", value])
    assert stopped.value.code == 2
    assert "argument --limit" in capsys.readouterr().err


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_first_items_refuses_what_is_not_a_positive_integer(limit):
    with pytest.raises(ValueError, match="limit="):
        first_items(MORE_PAIRS, limit)
    assert first_items(MORE_PAIRS, None) == MORE_PAIRS
    assert first_items(MORE_PAIRS, 9) == MORE_PAIRS


def test_dtype_and_max_length_reach_the_model_and_the_output_says_them(tiny_bert_dir, tmp_path):
    pairs = _write_pairs(tmp_path / "pairs.csv", MORE_PAIRS)
    out = tmp_path / "scores.csv"
    args = ["crows-pairs", "-m", tiny_bert_dir, "--metric", "original", "--pairs", str(pairs)]
    assert main([*args, "-o", str(out), "--dtype", "bfloat16", "--max-length", "9"]) == 0
    rows = list(csv.DictReader(out.open(newline="")))
    files = folder_fingerprint(tiny_bert_dir)
    label = f"{os.path.abspath(tiny_bert_dir)} files={files} dtype=bfloat16 max_length=9"
    assert {row["model"] for row in rows} == {label}
    scorer = PLLScorer.from_pretrained(
        tiny_bert_dir, pll_metric="original", device="cpu", dtype="bfloat16", max_length=9
    )
    expected = score_shared_tokens(scorer, [(p.sent_more, p.sent_less) for p in MORE_PAIRS])
    assert [float(row["more_original"]) for row in rows] == pytest.approx(
        [more.logprob for more, _ in expected], abs=1e-4
    )
    assert main([*args, "-o", str(out)]) == 1


def test_add_prefix_space_reaches_the_model_and_the_output_says_it(tiny_roberta_dir, tmp_path):
    pairs = _write_pairs(tmp_path / "pairs.csv", MORE_PAIRS)
    out = tmp_path / "scores.csv"
    args = ["crows-pairs", "-m", tiny_roberta_dir, "--metric", "original", "--pairs", str(pairs)]
    assert main([*args, "-o", str(out), "--add-prefix-space"]) == 0
    rows = list(csv.DictReader(out.open(newline="")))
    assert {row["model"] for row in rows} == {
        f"{os.path.abspath(tiny_roberta_dir)} files={folder_fingerprint(tiny_roberta_dir)} "
        "add_prefix_space=True"
    }
    scorer = PLLScorer.from_pretrained(
        tiny_roberta_dir, pll_metric="original", device="cpu", add_prefix_space=True
    )
    expected = score_shared_tokens(scorer, [(p.sent_more, p.sent_less) for p in MORE_PAIRS])
    assert [float(row["more_original"]) for row in rows] == pytest.approx(
        [more.logprob for more, _ in expected], abs=1e-4
    )
    assert main([*args, "-o", str(out)]) == 1


def test_a_resume_refuses_another_commit_of_a_hub_model(tmp_path, hub_cache):
    """The rows name the commit the model was loaded from, and a resume after the hub's
    main moved is refused with the file left as it was (the check runs once the model has
    loaded: without it the rows would name no commit at all)."""
    out = tmp_path / "pairs.csv"
    score_pairs(PAIRS[:1], "org/tiny", "original", device="cpu", output=out)
    assert [row["model"] for row in csv.DictReader(out.open())] == [
        f"org/tiny commit={FIRST_COMMIT}"
    ]
    before = out.read_bytes()
    move_main(hub_cache, "tiny", NEXT_COMMIT)
    with pytest.raises(ValueError, match="main moved"):
        score_pairs(PAIRS, "org/tiny", "original", device="cpu", output=out)
    assert out.read_bytes() == before
