"""``pll-harness score``: input formats, all metrics side by side, per-token output, the
causal column, resuming, and the console script."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tools_support import build_tiny_gpt2, causal_reference

from pll_harness.metrics import PLL_METRICS
from pll_harness.scorer import PLLScorer
from pll_harness.tools.cli import main
from pll_harness.tools.common import (
    MLMScorers,
    Sentence,
    parse_metrics,
    read_sentences,
    resolve_model_name,
)
from pll_harness.tools.score import score_file

SENTENCES = [
    "The traveler lost the souvenir.",
    "A cat sat on the mat.",
    "The keys to the cabinet are on the table.",
    "She is a nurse.",
]


@pytest.fixture(scope="module")
def bert_scorers(tiny_bert_dir) -> MLMScorers:
    return MLMScorers(tiny_bert_dir, list(PLL_METRICS), device="cpu")


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2") / "tiny-gpt2")


def _sentences(texts=SENTENCES) -> list[Sentence]:
    return [Sentence(str(i), t) for i, t in enumerate(texts)]


def test_resolve_model_name_passes_hub_names_and_folders():
    assert resolve_model_name("bert-base-cased") == "bert-base-cased"
    assert resolve_model_name("some/folder") == "some/folder"


def test_resolve_model_name_knows_the_demo_model(tmp_path, monkeypatch):
    from pll_harness import loading

    (tmp_path / "pll-demo").mkdir()
    (tmp_path / "pll-demo" / "config.json").write_text("{}")
    monkeypatch.setattr(loading, "DEMO_MODEL_DIR", tmp_path / "pll-demo")
    monkeypatch.chdir(tmp_path / "pll-demo")
    assert resolve_model_name("pll-demo") == str(tmp_path / "pll-demo")


def test_parse_metrics():
    assert parse_metrics("all") == list(PLL_METRICS)
    assert parse_metrics(None) == list(PLL_METRICS)
    assert parse_metrics(["original,word_l2r", "original"]) == ["original", "word_l2r"]
    with pytest.raises(ValueError, match="Choose one of"):
        parse_metrics("l2r")


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
    assert n == len(SENTENCES)
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
    assert (first, second) == (2, 2)
    text = out.read_text()
    assert text.startswith(before)
    rows = list(csv.DictReader(out.open()))
    assert [r["id"] for r in rows] == ["0", "1", "2", "3"]
    assert score_file(_sentences(), tiny_bert_dir, out, scorers=bert_scorers, progress=False) == 0
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
    assert (
        score_file(
            _sentences()[:1],
            tiny_bert_dir,
            out,
            scorers=bert_scorers,
            overwrite=True,
            progress=False,
        )
        == 1
    )
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


def test_tokens_added_on_resume_get_a_header(tmp_path, tiny_bert_dir, bert_scorers):
    out, tokens = tmp_path / "s.csv", tmp_path / "t.csv"
    score_file(_sentences()[:1], tiny_bert_dir, out, scorers=bert_scorers, progress=False)
    score_file(
        _sentences()[:2],
        tiny_bert_dir,
        out,
        token_output=tokens,
        scorers=bert_scorers,
        progress=False,
    )
    token_rows = list(csv.DictReader(tokens.open()))
    assert {r["id"] for r in token_rows} == {"1"}
    assert list(token_rows[0])[:3] == ["id", "token_index", "token"]


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


def test_cli_metric_names_match_engine():
    from pll_harness.metrics import DEFAULT_METRIC
    from pll_harness.tools.common import DEFAULT_METRIC_NAME, METRIC_NAMES

    assert METRIC_NAMES == PLL_METRICS
    assert DEFAULT_METRIC_NAME == DEFAULT_METRIC


def test_causal_scores_long_texts_in_windows(tiny_gpt2):
    import torch

    from pll_harness.tools.common import CausalScorer

    scorer = CausalScorer(str(tiny_gpt2), device="cpu")
    long_text = " ".join(SENTENCES * 6)
    ids = scorer.encode(long_text)
    assert len(ids) > scorer.max_length  # 64 positions
    short, long = scorer.score(["A cat sat.", long_text])
    assert short.logprob == pytest.approx(causal_reference(tiny_gpt2, "A cat sat."), abs=1e-4)
    assert len(long.token_logprobs) == len(ids)
    assert all(math.isfinite(v) for v in long.token_logprobs)
    # the first half-window sees BOS and everything before it: same as one plain pass
    head = [scorer.bos, *ids[:40]]
    with torch.no_grad():
        logprobs = scorer.model(torch.tensor([head])).logits[0, :-1].log_softmax(-1)
    expected = logprobs.gather(1, torch.tensor(head[1:])[:, None])[:, 0].tolist()
    assert list(long.token_logprobs[:32]) == pytest.approx(expected[:32], abs=1e-4)
