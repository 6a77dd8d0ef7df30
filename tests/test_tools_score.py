"""``pll-harness score``: input formats, all metrics side by side, per-token output, the
causal column, resuming, and the console script."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIRST_COMMIT, NEXT_COMMIT, move_main
from tools_support import causal_reference

from pll_harness.cli import main
from pll_harness.metrics import PLL_METRICS
from pll_harness.provenance import folder_fingerprint
from pll_harness.scorer import PLLScorer
from pll_harness.tools.models import MLMScorers
from pll_harness.tools.resumable import csv_text
from pll_harness.tools.score import score_file
from pll_harness.tools.sentences import Sentence, read_sentences

SENTENCES = [
    "The traveler lost the souvenir.",
    "A cat sat on the mat.",
    "The keys to the cabinet are on the table.",
    "She is a nurse.",
]


@pytest.fixture(scope="module")
def bert_scorers(tiny_bert_dir) -> MLMScorers:
    return MLMScorers(tiny_bert_dir, list(PLL_METRICS), device="cpu")


def _sentences(texts=SENTENCES) -> list[Sentence]:
    return [Sentence(str(i), t) for i, t in enumerate(texts)]


def test_csv_has_every_metric_and_token_file_sums_to_it(tmp_path, tiny_bert_dir, bert_scorers):
    out, tokens = tmp_path / "scores.csv", tmp_path / "tokens.csv"
    n = score_file(
        _sentences(),
        tiny_bert_dir,
        out,
        token_output=tokens,
        scorers=bert_scorers,
        progress=False,
    )
    assert n == (len(SENTENCES), 0)
    rows = list(csv.DictReader(out.open()))
    assert [r["text"] for r in rows] == SENTENCES
    for metric in PLL_METRICS:
        expected = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric=metric, device="cpu")
        for row, score in zip(rows, expected.score(SENTENCES), strict=True):
            assert float(row[f"pll_{metric}"]) == pytest.approx(score.logprob, abs=1e-4)
            assert int(row["n_tokens"]) == len(score.tokens)
    token_rows = list(csv.DictReader(tokens.open()))
    assert len(token_rows) == sum(int(r["n_tokens"]) for r in rows)
    for row in rows:
        mine = [t for t in token_rows if t["id"] == row["id"]]
        for metric in PLL_METRICS:
            total = math.fsum(float(t[f"lp_{metric}"]) for t in mine)
            assert total == pytest.approx(float(row[f"pll_{metric}"]), abs=1e-4)
    souvenir = rows[0]
    assert int(souvenir["n_multi_token_words"]) >= 1  # s ##ou ##v ##en ##ir
    # the multi-token word is inflated under original relative to word_l2r
    assert float(souvenir["pll_original"]) > float(souvenir["pll_word_l2r"])


def test_jsonl_with_causal_column(tmp_path, tiny_roberta_dir, tiny_gpt2):
    out = tmp_path / "scores.jsonl"
    score_file(
        _sentences(),
        tiny_roberta_dir,
        out,
        metrics="original,word_l2r",
        causal=str(tiny_gpt2),
        progress=False,
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(SENTENCES)
    with pytest.raises(ValueError, match="--causal"):  # resuming without the causal column
        score_file(_sentences(), tiny_roberta_dir, out, metrics="original,word_l2r", progress=False)
    for record in records:
        assert set(record) >= {"pll_original", "pll_word_l2r", "causal_logprob", "tokens"}
        assert "pll_whole_word" not in record
        assert record["causal_logprob"] == pytest.approx(
            causal_reference(tiny_gpt2, record["text"]), abs=1e-4
        )
        assert math.fsum(record["causal_token_logprobs"]) == pytest.approx(record["causal_logprob"])
        assert len(record["tokens"]) == record["n_tokens"]
        assert math.fsum(t["lp_word_l2r"] for t in record["tokens"]) == pytest.approx(
            record["pll_word_l2r"]
        )


def test_resume_skips_written_sentences(tmp_path, tiny_bert_dir, bert_scorers):
    out = tmp_path / "scores.csv"
    first = score_file(_sentences()[:2], tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    before = out.read_text()
    # simulate a run killed in the middle of writing the next row
    out.write_text(before + "2,The keys to the cab")
    second = score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    assert (first, second) == ((2, 0), (2, 0))
    text = out.read_text()
    assert text.startswith(before)
    rows = list(csv.DictReader(out.open()))
    assert [r["id"] for r in rows] == ["0", "1", "2", "3"]
    assert score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False) == (
        0,
        0,
    )
    with pytest.raises(ValueError, match="another text"):
        score_file(
            _sentences(["Something else."]),
            tiny_bert_dir,
            out,
            scorers=bert_scorers,
            progress=False,
        )
    with pytest.raises(ValueError, match="columns"):
        score_file(_sentences(), tiny_bert_dir, out, metrics="original", progress=False)
    assert score_file(
        _sentences()[:1],
        tiny_bert_dir,
        out,
        scorers=bert_scorers,
        overwrite=True,
        progress=False,
    ) == (1, 0)
    assert len(list(csv.DictReader(out.open()))) == 1


def test_resume_trims_token_file(tmp_path, tiny_bert_dir, bert_scorers):
    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    score_file(
        _sentences()[:1],
        tiny_bert_dir,
        out,
        token_output=tokens,
        scorers=bert_scorers,
        progress=False,
    )
    n_first = len(list(csv.DictReader(tokens.open())))
    with tokens.open("a") as handle:  # token rows of a sentence whose row never made it
        handle.write("1,0,A,32,0" + ",-1.0" * len(PLL_METRICS) + "\n")
    score_file(
        _sentences(), tiny_bert_dir, out, token_output=tokens, scorers=bert_scorers, progress=False
    )
    rows = list(csv.DictReader(out.open()))
    token_rows = list(csv.DictReader(tokens.open()))
    assert len(token_rows) == sum(int(r["n_tokens"]) for r in rows) > n_first


def test_tokens_added_on_resume_cover_the_whole_output(tmp_path, tiny_bert_dir, bert_scorers):
    """The sentences an earlier run wrote without --tokens are scored again for their token
    rows; their sentence rows stay as they were."""
    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    score_file(_sentences()[:2], tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    first = out.read_text()
    n = score_file(
        _sentences()[:3],
        tiny_bert_dir,
        out,
        token_output=tokens,
        scorers=bert_scorers,
        progress=False,
    )
    assert n == (1, 2)
    rows = list(csv.DictReader(out.open()))
    assert out.read_text().startswith(first) and [r["id"] for r in rows] == ["0", "1", "2"]
    token_rows = list(csv.DictReader(tokens.open()))
    assert list(token_rows[0])[:3] == ["id", "token_index", "token"]
    for row in rows:
        mine = [t for t in token_rows if t["id"] == row["id"]]
        assert len(mine) == int(row["n_tokens"])
        total = math.fsum(float(t["lp_word_l2r"]) for t in mine)
        assert total == pytest.approx(float(row["pll_word_l2r"]), abs=1e-4)
    again = score_file(
        _sentences()[:3], tiny_bert_dir, out, token_output=tokens, scorers=bert_scorers
    )
    assert again == (0, 0)


@pytest.mark.parametrize(
    ("output", "tokens", "message"),
    [
        ("s.jsonl.gz", None, "drop the compression suffix"),
        ("s.tsv", None, "outputs are .csv or .jsonl, not tsv"),
        ("s.csv", "t.jsonl", "the token file is CSV"),
        ("s.csv", "t.csv.gz", "--tokens .*drop the compression suffix"),
    ],
)
def test_an_output_name_that_says_another_format_is_refused(
    tmp_path, tiny_bert_dir, bert_scorers, output, tokens, message
):
    with pytest.raises(ValueError, match=message):
        score_file(
            _sentences(),
            tiny_bert_dir,
            tmp_path / output,
            token_output=tmp_path / tokens if tokens else None,
            scorers=bert_scorers,
        )
    assert list(tmp_path.iterdir()) == []


def test_no_sentences_or_another_inputs_output_are_refused(tmp_path, tiny_bert_dir, bert_scorers):
    out = tmp_path / "s.csv"
    with pytest.raises(ValueError, match="no sentences to score"):
        score_file([], tiny_bert_dir, out, scorers=bert_scorers)
    score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    with pytest.raises(ValueError, match="holds 2 sentences that this input does not have"):
        score_file(_sentences()[:2], tiny_bert_dir, out, scorers=bert_scorers)


def test_ids_that_repeat_are_refused_before_anything_is_written(
    tmp_path, tiny_bert_dir, bert_scorers
):
    """Rows are resumed by id: a repeated id would pass for a finished sentence."""
    twins = [Sentence("1", "The cat sat."), Sentence("1", "A dog ran.")]
    with pytest.raises(ValueError, match="Sentence ids are not unique: '1' is there twice"):
        score_file(twins, tiny_bert_dir, tmp_path / "s.csv", scorers=bert_scorers)
    assert list(tmp_path.iterdir()) == []


def test_cli_score_stdin_and_file(tmp_path, tiny_bert_dir, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("A cat sat on the mat.\nShe is a nurse.\n"))
    assert (
        main(["score", "--model", tiny_bert_dir, "--metric", "word_l2r", "--no-progress", "-"]) == 0
    )
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["text"] for r in rows] == ["A cat sat on the mat.", "She is a nurse."]
    assert list(rows[0])[-1] == "pll_word_l2r"

    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"sentence": s, "n": i}) + "\n" for i, s in enumerate(SENTENCES))
    )
    out = tmp_path / "out.jsonl"
    assert main(["score", "-m", tiny_bert_dir, str(data), "-o", str(out)]) == 0
    assert "scoring" in capsys.readouterr().err  # the progress bar
    assert len(out.read_text().splitlines()) == len(SENTENCES)
    assert main(["score", "-m", tiny_bert_dir, str(data), "-o", str(out)]) == 0
    assert "0 sentences (4 already there)" in capsys.readouterr().err
    csv_out, tokens = tmp_path / "out.csv", tmp_path / "tokens.csv"
    assert main(["score", "-m", tiny_bert_dir, str(data), "-o", str(csv_out), "--no-progress"]) == 0
    capsys.readouterr()
    data.write_text(data.read_text() + json.dumps({"sentence": "A new one.", "n": 4}) + "\n")
    assert (
        main(["score", "-m", tiny_bert_dir, str(data), "-o", str(csv_out), "--tokens", str(tokens)])
        == 0
    )
    err = capsys.readouterr().err  # the token rows are news only to the token file
    report = f"scored 1 sentences (4 already there) -> {csv_out}; 4 of those again, for"
    assert f"{report} their token rows -> {tokens}" in err
    assert "already done" not in err  # the bar counts the 4 as its own work
    assert main(["score", "-m", tiny_bert_dir, "--metric", "bogus", str(data)]) == 1
    assert "Unknown pll_metric" in capsys.readouterr().err


def test_console_script_help(tmp_path):
    script = Path(sys.executable).with_name("pll-harness")
    if not script.exists():
        pytest.skip("package not installed (pip install .): no pll-harness script")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    for command in ("score", "explain", "diagnose", "compare"):
        assert command in done.stdout


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("option", ["--chunk-size", "--max-batch-tokens"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_cli_sizes_must_be_positive(option, value, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["score", "-m", "some-model", "-", option, value])
    assert stopped.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_chunk_size_must_be_positive(tiny_bert_dir, bert_scorers):
    with pytest.raises(ValueError, match="chunk_size=0 is not valid"):
        score_file(_sentences(), tiny_bert_dir, None, scorers=bert_scorers, chunk_size=0)


# --------------------------------------------------------------------------- resuming


def test_resume_after_a_cut_inside_a_text_with_newlines(tmp_path, tiny_bert_dir, bert_scorers):
    """CSV texts may hold newlines (quoted); a run killed inside such a row leaves a part
    of it that must be recognised as this tool's own cut row, not as another input."""
    data = tmp_path / "in.csv"
    texts = ["Stephen\nKing wrote it.", 'She said "no,\nnever".', "A cat sat on the mat."]
    data.write_text(csv_text(["sentence"], [{"sentence": t} for t in texts], header=True))
    sentences = read_sentences(str(data))
    assert [s.text for s in sentences] == texts
    out, reference = tmp_path / "scores.csv", tmp_path / "reference.csv"
    score_file(sentences, tiny_bert_dir, reference, scorers=bert_scorers, progress=False)
    whole = reference.read_bytes()
    for cut in (whole.index(b"Stephen\n") + 8, whole.index(b"never") - 2):
        out.write_bytes(whole[:cut])
        scored = score_file(sentences, tiny_bert_dir, out, scorers=bert_scorers, progress=False)
        assert scored.new >= 1
        _assert_complete_and_correct(out, list(csv.DictReader(reference.open(newline=""))))


def test_a_file_with_duplicate_rows_is_not_taken_as_finished(tmp_path, tiny_bert_dir, bert_scorers):
    """What two writers at once used to leave behind: every id present, some twice."""
    out = tmp_path / "scores.csv"
    score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join([*lines, lines[2]]))
    with pytest.raises(ValueError, match="holds id 1 twice"):
        score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    data = tmp_path / "in.txt"
    data.write_text("\n".join(SENTENCES) + "\n")
    assert main(["score", "-m", tiny_bert_dir, "--no-progress", "-o", str(out), str(data)]) == 1


def test_token_rows_that_do_not_match_are_refused(tmp_path, tiny_bert_dir, bert_scorers):
    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    args = {"token_output": tokens, "scorers": bert_scorers, "progress": False}
    score_file(_sentences()[:2], tiny_bert_dir, out, **args)
    lines = tokens.read_bytes().splitlines(keepends=True)
    tokens.write_bytes(b"".join(lines[:2] + lines[3:]))  # sentence 0 loses its token 1
    with pytest.raises(ValueError, match="sentence 0 has"):
        score_file(_sentences(), tiny_bert_dir, out, **args)


def test_resume_cuts_the_token_file_without_rewriting_what_it_keeps(
    tmp_path, tiny_bert_dir, bert_scorers, monkeypatch
):
    """The token rows of a sentence whose row never made it are cut off the end of the file
    by one truncation: the rows kept are never rewritten, so a kill during the resume
    cannot lose them (the file was emptied, then written anew: killed in that write, it
    was left empty or cut short)."""
    from pll_harness.tools.resumable import RecordFile

    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    args = {"token_output": tokens, "scorers": bert_scorers, "progress": False}
    score_file(_sentences()[:2], tiny_bert_dir, out, **args)
    kept = tokens.read_bytes()
    with tokens.open("a") as handle:  # token rows of a sentence whose row never made it
        handle.write("2,0,The,32,0" + ",-1.0" * len(PLL_METRICS) + "\n")

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt  # the process stopped as it wrote to a file

    monkeypatch.setattr(RecordFile, "_append", killed)
    with pytest.raises(KeyboardInterrupt):
        score_file(_sentences(), tiny_bert_dir, out, **args)
    assert tokens.read_bytes() == kept


def test_a_run_stopped_between_its_two_writes_resumes_beside_rescored_sentences(
    tmp_path, tiny_bert_dir, bert_scorers, monkeypatch
):
    """A chunk's token rows hold sentences new to the output and sentences scored again for
    their missing token rows; in input order, a stop before the sentence rows left new
    sentences' rows before kept ones, which a resume refused as another output's."""
    from pll_harness.tools.resumable import RecordFile

    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    score_file(_sentences()[2:3], tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    args = {"token_output": tokens, "scorers": bert_scorers, "progress": False}
    append, calls = RecordFile.append, []

    def stopped_before_the_sentence_rows(self, rows):
        calls.append(self.path)
        if self.path == out:
            raise KeyboardInterrupt
        append(self, rows)

    with monkeypatch.context() as patch:
        patch.setattr(RecordFile, "append", stopped_before_the_sentence_rows)
        with pytest.raises(KeyboardInterrupt):
            score_file(_sentences(), tiny_bert_dir, out, **args)
    assert calls == [tokens, out]
    assert score_file(_sentences(), tiny_bert_dir, out, **args) == (3, 0)  # 2 has its rows
    rows = list(csv.DictReader(out.open()))
    assert len(list(csv.DictReader(tokens.open()))) == sum(int(r["n_tokens"]) for r in rows)


def test_a_token_file_cut_short_is_refused_with_a_way_out_that_keeps_the_scores(
    tmp_path, tiny_bert_dir, bert_scorers
):
    """--tokens added on a resume writes the token rows of sentences the output already
    holds; a full disk (or a kill) that cut that write short leaves the first rows of a
    written sentence last.  That cannot be told from another output's token file, so it is
    refused untouched, and the advice, which once was --overwrite (losing the finished
    output), is to remove the token file: the next run writes it anew and keeps the
    scores."""
    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    finished = out.read_bytes()
    args = {"token_output": tokens, "scorers": bert_scorers, "progress": False}
    score_file(_sentences(), tiny_bert_dir, out, **args)
    whole = tokens.read_bytes()
    lines = whole.splitlines(keepends=True)
    first_of_3 = next(i for i, line in enumerate(lines) if line.startswith(b"3,"))
    cut = b"".join(lines[: first_of_3 + 2])
    tokens.write_bytes(cut)  # the write stopped there
    with pytest.raises(ValueError, match="sentence 3 has 2 token rows") as error:
        score_file(_sentences(), tiny_bert_dir, out, **args)
    assert "remove it and run again" in str(error.value)
    assert tokens.read_bytes() == cut and out.read_bytes() == finished
    tokens.unlink()
    assert score_file(_sentences(), tiny_bert_dir, out, **args) == (0, len(_sentences()))
    assert out.read_bytes() == finished
    assert tokens.read_bytes() == whole


def test_a_token_file_of_another_output_is_refused_untouched(tmp_path, tiny_bert_dir, bert_scorers):
    """Another output file beside a token file that already holds rows: the rows were cut
    off as a stopped run's, and that output lost its token rows for good.  Stray rows
    before kept ones are no stopped run's either."""
    tokens = tmp_path / "t.csv"
    args = {"token_output": tokens, "scorers": bert_scorers, "progress": False}
    score_file(_sentences()[:2], tiny_bert_dir, tmp_path / "a.csv", **args)
    before = tokens.read_bytes()
    with pytest.raises(ValueError, match=r"t.csv holds token rows of sentence 1, which .*b.csv"):
        score_file(_sentences()[1:3], tiny_bert_dir, tmp_path / "b.csv", **args)
    assert tokens.read_bytes() == before and not (tmp_path / "b.csv").exists()
    out = tmp_path / "a.csv"
    rows = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(rows[0] + rows[2])  # sentence 0's row is gone, its token rows are not
    with pytest.raises(ValueError, match=r"t.csv holds token rows of sentence 0, which"):
        score_file(_sentences()[:2], tiny_bert_dir, out, **args)


def test_a_score_edited_into_words_is_refused_naming_the_file(
    tmp_path, tiny_bert_dir, bert_scorers
):
    out = tmp_path / "s.csv"
    score_file(_sentences()[:2], tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    rows = list(csv.DictReader(out.open()))
    rows[1]["pll_original"] = "n/a"
    out.write_text(csv_text(list(rows[0]), rows, header=True))
    with pytest.raises(ValueError, match=r"s.csv holds id 1 with pll_original 'n/a', which is not"):
        score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False)


def test_a_token_file_of_another_models_output_is_refused(tmp_path, tiny_bert_dir):
    """Same ids and the same token counts, other scores: it was taken for this output's."""
    settings = {"metrics": "original", "progress": False}
    ours, theirs = tmp_path / "ours.csv", tmp_path / "theirs.csv"
    tokens, other = tmp_path / "t.csv", tmp_path / "other.csv"
    score_file(_sentences()[:2], tiny_bert_dir, ours, token_output=tokens, **settings)
    score_file(_sentences()[:2], tiny_bert_dir, theirs, token_output=other, **settings)
    rows = list(csv.DictReader(other.open()))
    for row in rows:  # another model's scores for the same tokens
        row["lp_original"] = repr(float(row["lp_original"]) - 0.5)
    other.write_text(csv_text(list(rows[0]), rows, header=True))
    with pytest.raises(ValueError, match=r"other.csv does not match .*ours.csv: the token rows"):
        score_file(_sentences(), tiny_bert_dir, ours, token_output=other, **settings)
    rows = list(csv.DictReader(tokens.open()))
    for row in rows:  # bfloat16's drift when a sentence is scored again in other batches
        row["lp_original"] = repr(float(row["lp_original"]) - 1e-3)
    tokens.write_text(csv_text(list(rows[0]), rows, header=True))
    assert score_file(_sentences(), tiny_bert_dir, ours, token_output=tokens, **settings) == (2, 0)


# --------------------------------------------------------------------------- interrupted runs
# A run of 200 sentences in a subprocess, stopped by a signal or shared with a second
# writer, ends in a complete and correct file or a clear refusal.

INTERRUPT_SENTENCES = 200


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    from tiny_corpus import corpus_sentences

    path = tmp_path_factory.mktemp("corpus") / "sentences.txt"
    path.write_text("\n".join(corpus_sentences(INTERRUPT_SENTENCES, seed=7)) + "\n")
    return path


@pytest.fixture(scope="module")
def word_l2r_scorers(tiny_bert_dir) -> MLMScorers:
    return MLMScorers(tiny_bert_dir, ["word_l2r"], device="cpu")


@pytest.fixture(scope="module")
def reference_rows(tmp_path_factory, corpus_file, tiny_bert_dir, word_l2r_scorers) -> list[dict]:
    out = tmp_path_factory.mktemp("reference") / "scores.csv"
    score_file(
        read_sentences(str(corpus_file)),
        tiny_bert_dir,
        out,
        scorers=word_l2r_scorers,
        progress=False,
    )
    return list(csv.DictReader(out.open(newline="")))


def _start_score(model: str, data: Path, out: Path, *options: str) -> subprocess.Popen:
    """``pll-harness score`` in a subprocess with Python's own Ctrl-C handling (even where
    the tests run with SIGINT ignored) and one thread (the machine may be shared)."""
    import signal

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "pll_harness.cli", "score", "-m", model]
    return subprocess.Popen(
        [*command, "--metric", "word_l2r", "--no-progress", str(data), "-o", str(out), *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _rows_written(out: Path) -> int:
    return out.read_bytes().count(b"\n") - 1 if out.exists() else 0


def _wait_for_rows(process: subprocess.Popen, out: Path, timeout: float = 120) -> int:
    """Block until ``out`` holds a finished chunk, while the process still runs."""
    import time

    deadline = time.monotonic() + timeout
    while _rows_written(out) < 1:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no chunk written in time"
        time.sleep(0.01)
    return _rows_written(out)


def _assert_complete_and_correct(out: Path, reference: list[dict]) -> None:
    """The same rows in the same order; scores within 1e-4 nats (float32 sums depend a
    little on which sentences shared a forward pass, which resuming changes)."""
    rows = list(csv.DictReader(out.open(newline="")))
    assert len(rows) == len(reference)
    for row, expected in zip(rows, reference, strict=True):
        assert row.keys() == expected.keys()
        for column, value in expected.items():
            if column.startswith("pll_"):
                assert float(row[column]) == pytest.approx(float(value), abs=1e-4)
            else:
                assert row[column] == value


@pytest.mark.parametrize(
    ("signal_name", "options", "exit_code"),
    [
        ("SIGTERM", (), 128 + 15),  # the default chunk size writes as it goes
        ("SIGINT", ("--chunk-size", "16"), 128 + 2),
        ("SIGKILL", ("--chunk-size", "16"), -9),
    ],
)
def test_an_interrupted_run_keeps_its_chunks_and_resumes(
    tmp_path,
    tiny_bert_dir,
    corpus_file,
    word_l2r_scorers,
    reference_rows,
    signal_name,
    options,
    exit_code,
):
    import signal

    out = tmp_path / "scores.csv"
    process = _start_score(tiny_bert_dir, corpus_file, out, *options)
    _wait_for_rows(process, out)
    process.send_signal(getattr(signal, signal_name))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == exit_code, stderr[-3000:]
    if signal_name != "SIGKILL":
        assert f"stopped by {signal_name}; re-run the same command to resume" in stderr
    kept = read_sentences(str(corpus_file))[: _rows_written(out)]
    assert 0 < len(kept) < INTERRUPT_SENTENCES
    scored = score_file(
        read_sentences(str(corpus_file)),
        tiny_bert_dir,
        out,
        scorers=word_l2r_scorers,
        progress=False,
    )
    assert scored.new <= INTERRUPT_SENTENCES - len(kept) + 1  # SIGKILL may cut one row short
    _assert_complete_and_correct(out, reference_rows)


def test_a_second_writer_is_refused_and_the_first_finishes(
    tmp_path, tiny_bert_dir, corpus_file, reference_rows
):
    """The second run starts while the first one is paused (SIGSTOP) with a chunk
    written: a deterministic overlap, however fast the machine is."""
    import signal

    out = tmp_path / "scores.csv"
    first = _start_score(tiny_bert_dir, corpus_file, out, "--chunk-size", "16")
    _wait_for_rows(first, out)
    first.send_signal(signal.SIGSTOP)
    try:
        second = _start_score(tiny_bert_dir, corpus_file, out)
        _, stderr = second.communicate(timeout=120)
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 1
    assert "is being written by another writer" in stderr
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr[-3000:]
    _assert_complete_and_correct(out, reference_rows)


def test_a_resumed_output_is_scored_by_one_model(
    tmp_path, tiny_bert_dir, tiny_roberta_dir, monkeypatch
):
    """Resuming with another --model would mix two models' scores in one file; the same
    folder written another way is the same model, but not once a model is saved again into
    it (it was resumed as the same model)."""
    import shutil

    from safetensors.torch import load_file, save_file

    from pll_harness.provenance import folder_fingerprint

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    out = tmp_path / "s.csv"
    score_file(_sentences()[:2], str(folder), out, metrics="original", progress=False)
    files = folder_fingerprint(str(folder))
    assert {r["model"] for r in csv.DictReader(out.open())} == {f"{folder} files={files}"}
    with pytest.raises(ValueError, match=r"was written with model .*model files="):
        score_file(_sentences(), tiny_roberta_dir, out, metrics="original", progress=False)
    monkeypatch.chdir(tmp_path)
    assert score_file(_sentences()[:3], "model/", out, metrics="original", progress=False) == (1, 0)
    weights = load_file(folder / "model.safetensors")
    save_file({k: v * 0.5 for k, v in weights.items()}, folder / "model.safetensors")
    with pytest.raises(ValueError, match=rf"files={files}, but this run has model .* files="):
        score_file(_sentences(), "model", out, metrics="original", progress=False)


def test_a_resumed_output_is_scored_by_one_causal_model(
    tmp_path, tiny_bert_dir, tiny_gpt2, tiny_llama
):
    """The causal columns of another --causal model would mix with the first's as well."""
    from pll_harness.provenance import folder_fingerprint

    out = tmp_path / "s.csv"
    settings = {"metrics": "original", "progress": False}
    score_file(_sentences()[:2], tiny_bert_dir, out, causal=str(tiny_gpt2), **settings)
    rows = list(csv.DictReader(out.open()))
    files = folder_fingerprint(str(tiny_gpt2))
    assert {r["causal_model"] for r in rows} == {f"{Path(tiny_gpt2).resolve()} files={files}"}
    with pytest.raises(ValueError, match=r"was written with causal_model .*tiny-gpt2"):
        score_file(_sentences(), tiny_bert_dir, out, causal=str(tiny_llama), **settings)
    assert score_file(_sentences(), tiny_bert_dir, out, causal=str(tiny_gpt2), **settings) == (2, 0)


def test_standard_output_stays_empty_when_the_model_fails_to_load(tmp_path, capsys):
    """The CSV header goes out with the first rows, not before the model has loaded."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat.\n")
    assert main(["score", "--model", str(tmp_path / "no-such-model"), str(data)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "no-such-model" in captured.err


def test_tokens_need_a_csv_output_file(tmp_path, tiny_bert_dir):
    with pytest.raises(ValueError, match="--tokens goes with CSV"):
        score_file(
            _sentences(), tiny_bert_dir, tmp_path / "o.jsonl", token_output=tmp_path / "t.csv"
        )
    with pytest.raises(ValueError, match="--tokens needs an output file"):
        score_file(_sentences(), tiny_bert_dir, None, token_output=tmp_path / "t.csv")


def test_a_causal_model_that_fails_to_load_leaves_no_output_file(tmp_path, tiny_bert_dir, capsys):
    """Loading every model comes before the output is created: a failed run leaves no
    file holding a header alone, and an earlier run's file as it was."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat.\nShe is a nurse.\n")
    out, tokens = tmp_path / "new" / "s.csv", tmp_path / "new" / "t.csv"
    args = ["score", "-m", tiny_bert_dir, str(data), "--causal", str(tmp_path / "no-such-lm")]
    assert main([*args, "-o", str(out), "--tokens", str(tokens), "--no-progress"]) == 1
    assert "no-such-lm" in capsys.readouterr().err
    assert not out.parent.exists()

    earlier = tmp_path / "earlier.jsonl"
    score_file(_sentences()[:1], tiny_bert_dir, earlier, metrics="original", progress=False)
    cut = earlier.read_bytes()[:-5]  # a record cut short, as SIGKILL leaves it
    earlier.write_bytes(cut)
    args = [*args, "--metric", "original", "-o", str(earlier), "--no-progress"]
    for overwrite in ((), ("--overwrite",)):
        assert main([*args, *overwrite]) == 1
        assert earlier.read_bytes() == cut


def test_a_refused_token_file_leaves_no_output_file(tmp_path, capsys, monkeypatch):
    """Every lock is taken before any output is created: with the --tokens file held by
    another writer, the run stops (before the model loads) and -o is not created."""
    from pll_harness.file_lock import lock

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(MLMScorers, "__init__", loaded)
    data, out, tokens = tmp_path / "s.txt", tmp_path / "s.csv", tmp_path / "t.csv"
    data.write_text("A cat sat.\n")
    with tokens.open("a+b") as handle:
        lock(handle, tokens, "the test")
        args = ["score", "-m", "some-model", str(data), "-o", str(out), "--tokens", str(tokens)]
        assert main(args) == 1
    assert "is being written by another writer" in capsys.readouterr().err
    assert not out.exists()


def test_dtype_and_max_length_reach_the_model_and_a_resumed_file_keeps_them(
    tmp_path, tiny_bert_dir, capsys
):
    """--dtype and --max-length change the numbers, so the model field says them (and
    nothing when they are the defaults: files written before still resume) and a resume
    under other settings is refused before anything is scored."""
    import os

    data = tmp_path / "in.txt"
    long = "The traveler lost the souvenir that the hooligan wrecked in the town square."
    data.write_text("\n".join([*SENTENCES, long]) + "\n")
    out = tmp_path / "out.csv"
    args = ["score", "-m", tiny_bert_dir, "--metric", "original", "--no-progress", str(data)]
    assert main([*args, "-o", str(out), "--dtype", "bfloat16", "--max-length", "12"]) == 0
    rows = list(csv.DictReader(out.open()))
    files = folder_fingerprint(tiny_bert_dir)
    label = f"{os.path.abspath(tiny_bert_dir)} files={files} dtype=bfloat16 max_length=12"
    assert {row["model"] for row in rows} == {label}
    bf16 = PLLScorer.from_pretrained(
        tiny_bert_dir, pll_metric="original", device="cpu", dtype="bfloat16", max_length=12
    ).score([*SENTENCES, long])
    assert [float(row["pll_original"]) for row in rows] == pytest.approx(
        [score.logprob for score in bf16], abs=1e-4
    )
    plain = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="original", device="cpu")
    assert float(rows[-1]["pll_original"]) != pytest.approx(plain.score(long)[0].logprob, abs=1e-3)
    capsys.readouterr()
    assert main([*args, "-o", str(out), "--dtype", "bfloat16"]) == 1
    assert f"but this run has model {label[: -len(' max_length=12')]};" in capsys.readouterr().err
    default = tmp_path / "default.csv"
    assert main([*args, "-o", str(default)]) == 0
    assert {row["model"] for row in csv.DictReader(default.open())} == {
        f"{os.path.abspath(tiny_bert_dir)} files={files}"
    }


def test_an_unknown_dtype_is_a_usage_error(tiny_bert_dir, capsys):
    with pytest.raises(SystemExit):
        main(["score", "-m", tiny_bert_dir, "--dtype", "bf16", "-"])
    assert "invalid choice: 'bf16'" in capsys.readouterr().err


@pytest.mark.parametrize("tokens", ["s.csv", "./s.csv", "link.csv"])
def test_an_output_and_a_token_file_that_are_one_file_are_refused(
    tmp_path, monkeypatch, capsys, tokens
):
    """Before the model loads: both would be written into one file, which a re-run then
    cannot read back."""

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(MLMScorers, "__init__", loaded)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.csv").symlink_to(tmp_path / "s.csv")
    (tmp_path / "in.txt").write_text("A cat sat.\n")
    assert main(["score", "-m", "some-model", "in.txt", "-o", "s.csv", "--tokens", tokens]) == 1
    assert "-o s.csv and --tokens" in capsys.readouterr().err
    assert not (tmp_path / "s.csv").exists()


def test_a_row_with_no_token_to_score_is_named_in_a_warning(
    tmp_path, tiny_bert_dir, bert_scorers, capsys, caplog
):
    """A zero-width space or a byte-order mark alone: the tokenizer drops it, and its PLL
    0.0 (probability 1) would beat every sentence.  The tool names them by id, once: the
    scorer's own count of them is not logged beside it."""
    texts = ["A cat sat.", "\u200b", "She is a nurse.", "\ufeff"]
    out = tmp_path / "s.csv"
    with caplog.at_level(logging.WARNING, logger="pll_harness"):
        score_file(_sentences(texts), tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    warning = capsys.readouterr().err
    assert "warning: 2 sentences have no token to score" in warning
    assert "ids 1, 3" in warning
    assert "no token to score" not in caplog.text
    counts = [r["n_tokens"] for r in csv.DictReader(out.open())]
    assert [count == "0" for count in counts] == [False, True, False, True]
    # scored outside score_file (diagnose from Python, say), nothing else names them
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness"):
        MLMScorers(tiny_bert_dir, ["original"], device="cpu").score(texts)
    assert "2 of 4 distinct texts have no token to score" in caplog.text


def test_add_prefix_space_reaches_the_tokenizer_and_a_resumed_file_keeps_it(
    tmp_path, tiny_roberta_dir, capsys
):
    """A byte-level BPE tokenizer splits a text's first word otherwise without it (BabyBERTa
    needs it), so the scores change, the model field says it, and a resume without it is
    refused."""
    import os

    data = tmp_path / "in.txt"
    data.write_text("\n".join(SENTENCES) + "\n")
    out = tmp_path / "out.csv"
    args = ["score", "-m", tiny_roberta_dir, "--metric", "word_l2r", "--no-progress", str(data)]
    assert main([*args, "-o", str(out), "--add-prefix-space"]) == 0
    rows = list(csv.DictReader(out.open()))
    files = folder_fingerprint(tiny_roberta_dir)
    label = f"{os.path.abspath(tiny_roberta_dir)} files={files} add_prefix_space=True"
    assert {row["model"] for row in rows} == {label}
    spaced = PLLScorer.from_pretrained(
        tiny_roberta_dir, pll_metric="word_l2r", device="cpu", add_prefix_space=True
    )
    plain = PLLScorer.from_pretrained(tiny_roberta_dir, pll_metric="word_l2r", device="cpu")
    assert spaced.tokenizer.tokenize("The cat")[0] == "Ġ" != plain.tokenizer.tokenize("The")[0]
    expected = [score.logprob for score in spaced.score(SENTENCES)]
    assert [float(row["pll_word_l2r"]) for row in rows] == pytest.approx(expected, abs=1e-4)
    assert [s.logprob for s in plain.score(SENTENCES)] != pytest.approx(expected, abs=1e-3)
    capsys.readouterr()
    assert main([*args, "-o", str(out)]) == 1
    assert "but this run has model" in capsys.readouterr().err


def test_the_unscored_warning_counts_the_ids_it_leaves_out(capsys):
    """Ten ids are named in full, with no "and 0 more" that would send the user looking
    for sentences that are not there; past ten, the count of the others is given."""
    from pll_harness.tools.score import _warn_unscored

    _warn_unscored([str(i) for i in range(10)], "score")
    named_all = capsys.readouterr().err
    assert "ids 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)" in named_all
    assert "more" not in named_all
    _warn_unscored([str(i) for i in range(12)], "score")
    assert "ids 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more)" in capsys.readouterr().err


# --------------------------------------------------------------------------- hub commits


def test_a_resume_refuses_another_commit_of_a_hub_model(tmp_path, hub_cache, capsys):
    """The hub's main moved between a run and its resume (here in the cache, as an online
    load moves it): the file would hold two versions' scores under one name.  The commit
    is only known once the model has loaded, and the file is left as it was."""
    data, out = tmp_path / "in.txt", tmp_path / "out.csv"
    data.write_text("\n".join(SENTENCES) + "\n")
    args = ["score", "-m", "org/tiny", "--metric", "original", "--no-progress", str(data)]
    assert main([*args, "-o", str(out), "--chunk-size", "2"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert {row["model"] for row in rows} == {f"org/tiny commit={FIRST_COMMIT}"}
    out.write_text(csv_text(list(rows[0]), rows[:2], header=True))  # an interrupted run
    written = out.read_bytes()
    move_main(hub_cache, "tiny", NEXT_COMMIT)
    capsys.readouterr()
    assert main([*args, "-o", str(out)]) == 1
    error = capsys.readouterr().err
    assert (
        f"was written with model org/tiny at commit {FIRST_COMMIT}, but this run loaded "
        f"commit {NEXT_COMMIT}: the hub's main moved between the two runs"
    ) in error
    assert out.read_bytes() == written


def test_a_resume_refuses_another_commit_of_a_hub_causal_model(tmp_path, tiny_bert_dir, hub_cache):
    """``--causal`` names its model the same way, commit included."""
    out = tmp_path / "out.csv"
    settings = {"metrics": "original", "causal": "org/gpt", "progress": False}
    score_file(_sentences()[:2], tiny_bert_dir, out, **settings)
    rows = list(csv.DictReader(out.open()))
    assert {row["causal_model"] for row in rows} == {f"org/gpt commit={FIRST_COMMIT}"}
    move_main(hub_cache, "gpt", NEXT_COMMIT)
    with pytest.raises(ValueError, match=f"causal_model org/gpt at commit {FIRST_COMMIT}"):
        score_file(_sentences(), tiny_bert_dir, out, **settings)


def test_a_resume_at_the_same_commit_of_a_hub_model_goes_on(tmp_path, hub_cache, capsys):
    """Every row names the commit that scored it, and a resume that loads it again adds
    the missing rows without a word."""
    out = tmp_path / "out.jsonl"
    settings = {"metrics": "original", "progress": False}
    assert score_file(_sentences()[:2], "org/tiny", out, **settings) == (2, 0)
    assert score_file(_sentences(), "org/tiny", out, **settings) == (2, 0)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["0", "1", "2", "3"]
    assert {r["model"] for r in records} == {f"org/tiny commit={FIRST_COMMIT}"}
    assert "warning" not in capsys.readouterr().err


def test_a_hub_model_file_written_without_commits_still_resumes(tmp_path, hub_cache, capsys):
    """A file written before records named the commit cannot be checked: it resumes with
    a warning, and the rows this run adds name their commit."""
    out = tmp_path / "out.csv"
    settings = {"metrics": "original", "progress": False}
    score_file(_sentences()[:2], "org/tiny", out, **settings)
    out.write_text(out.read_text().replace(f" commit={FIRST_COMMIT}", ""))  # as before
    move_main(hub_cache, "tiny", NEXT_COMMIT)
    capsys.readouterr()
    assert score_file(_sentences(), "org/tiny", out, **settings) == (2, 0)
    assert [row["model"] for row in csv.DictReader(out.open())] == [
        "org/tiny",
        "org/tiny",
        f"org/tiny commit={NEXT_COMMIT}",
        f"org/tiny commit={NEXT_COMMIT}",
    ]
    warning = capsys.readouterr().err
    assert (
        f"{out} was written before records named a hub model's commit, so whether its rows "
        f"were scored by model org/tiny at commit {NEXT_COMMIT}, as this run's are, cannot be "
        "checked"
    ) in warning
    assert score_file(_sentences(), "org/tiny", out, **settings) == (0, 0)  # finished, as it was
