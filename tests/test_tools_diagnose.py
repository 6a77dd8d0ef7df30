"""``pll-harness diagnose``: the desiderata numbers, the report and the plots."""

from __future__ import annotations

import csv
import importlib
import math
import re
import sys

import pytest
from conftest import NEXT_COMMIT, move_main
from tools_support import assert_png, causal_reference

from pll_harness.cli import main
from pll_harness.metrics import PLL_METRICS
from pll_harness.scorer import PLLScorer
from pll_harness.tools.causal import CausalScorer
from pll_harness.tools.diagnose import (
    WORD_CONTEXT,
    Diagnosis,
    diagnose,
    diagnose_sentences,
    plot_causal,
    plot_frequency,
    plot_length,
    report_markdown,
    write_outputs,
)
from pll_harness.tools.models import MLMScorers
from pll_harness.tools.sentences import Sentence, eventsadapt_sentences
from pll_harness.tools.statistics import pearson

PAIRS = 3  # EventsAdapt pairs: 6 sentences


@pytest.fixture(scope="module")
def diagnosis(tiny_bert_dir, tiny_gpt2):
    scorers = MLMScorers(tiny_bert_dir, list(PLL_METRICS), device="cpu")
    causal = CausalScorer(str(tiny_gpt2), device="cpu")
    return diagnose_sentences(eventsadapt_sentences(PAIRS), scorers, "eventsadapt", causal)


def test_eventsadapt_sentences():
    sentences = eventsadapt_sentences(2)
    assert len(sentences) == 4
    assert sentences[0].text == "The raider caught the illness."
    assert sentences[1].id.endswith("-bad")
    assert len(eventsadapt_sentences()) == 2 * 782


def test_numbers_match_their_definitions(diagnosis, tiny_bert_dir, tiny_gpt2):
    sentences = diagnosis.sentences
    assert len(sentences) == 2 * PAIRS
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="word_l2r", device="cpu")
    scores = scorer.score([s["text"] for s in sentences])
    for row, score in zip(sentences, scores, strict=True):
        assert row["pll_word_l2r"] == pytest.approx(score.logprob, abs=1e-4)
        assert row["n_tokens"] == len(score.tokens)
        assert row["causal_logprob"] == pytest.approx(
            causal_reference(tiny_gpt2, row["text"]), abs=1e-4
        )
    stats = diagnosis.stats["word_l2r"]
    assert stats["r_length"] == pytest.approx(
        pearson([s["n_tokens"] for s in sentences], [-s["pll_word_l2r"] for s in sentences])
    )
    assert stats["r_causal"] == pytest.approx(
        pearson([s["pll_word_l2r"] for s in sentences], [s["causal_logprob"] for s in sentences])
    )
    words = diagnosis.words
    assert words and all(w["zipf"] > 0 for w in words)
    assert {"the", "raider"} <= {w["word"] for w in words}  # sentence-initial "The" lowered
    assert stats["r_frequency"] == pytest.approx(
        pearson([w["zipf"] for w in words], [w["pll_word_l2r"] for w in words])
    )
    word = next(w for w in words if w["n_tokens"] > 1)
    (expected,) = scorer.score_requests([(WORD_CONTEXT, word["word"])])
    assert word["pll_word_l2r"] == pytest.approx(expected.logprob, abs=1e-4)
    assert len(expected.tokens) == word["n_tokens"]
    assert word["causal_logprob"] == pytest.approx(
        causal_reference(tiny_gpt2, word["word"], WORD_CONTEXT), abs=1e-4
    )
    assert set(diagnosis.stats) == {*PLL_METRICS, "causal"}


def test_oov_ratio_counts_split_words(diagnosis, tiny_bert_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    words = [w for s in diagnosis.sentences for w in s["text"].rstrip(".").split()]
    split = sum(len(tokenizer.tokenize(w)) > 1 for w in words)
    oov = diagnosis.oov["mlm"]
    assert oov["words"] == len(words)
    assert oov["ratio"] == pytest.approx(split / len(words))
    assert 0 <= diagnosis.oov["causal"]["ratio"] <= 1


def test_distinct_words_lower_case_the_first_word_as_the_word_scores_do():
    from pll_harness.tools.diagnose import _oov

    oov = _oov([[("The", 1), ("cat", 1), (".", 1)], [("the", 1), ("dog", 2), ("The", 1)]])
    assert (oov["words"], oov["types"]) == (5, 4)  # the, cat, dog, The (not sentence-initial)
    assert oov["type_ratio"] == pytest.approx(1 / 4)


def test_the_first_word_after_punctuation_is_lower_cased():
    from pll_harness.tools.diagnose import _running_words

    words = [[('"', 1), ("The", 1), ("cat", 2), (",", 1), ('"', 1), ("The", 1)]]
    assert _running_words(words) == [("the", 1), ("cat", 2), ("The", 1)]


def _sentences(*texts: str) -> list[Sentence]:
    return [Sentence(str(i), text) for i, text in enumerate(texts)]


def test_unknown_words_are_the_words_as_written(tiny_bert_dir):
    """Words the cased WordPiece vocabulary lacks become [UNK]: they are still themselves,
    with their own frequency and word score, and count as one token (not split)."""
    scorers = MLMScorers(tiny_bert_dir, ["original"], device="cpu")
    assert scorers.tokenizer.tokenize("naïve café")[0] == scorers.tokenizer.unk_token
    texts = ("The naïve girl drank café au lait.", "Zoë met Chloë in the café.")
    diag = diagnose_sentences(_sentences(*texts), scorers)
    words = {w["word"]: w for w in diag.words}
    assert {"naïve", "café", "zoë"} <= set(words)
    assert not any("unk" in word.lower() for word in words)
    (expected,) = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu").score_requests(
        [(WORD_CONTEXT, "naïve")]
    )
    assert words["naïve"]["pll_original"] == pytest.approx(expected.logprob, abs=1e-4)
    assert diag.oov["mlm"]["words"] == 13 and diag.oov["mlm"]["types"] == 11


def test_sentencepiece_words_leave_their_punctuation_out(tiny_sentencepiece_dir):
    """Metaspace pre-tokenizes at whitespace only ("nurse." is one of its words): the word
    is "nurse", and it is split or not as "nurse" alone is."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    texts = ("He is a nurse.", "The cat sat on the mat.")
    scorers = MLMScorers(tiny_sentencepiece_dir, ["original"], device="cpu")
    diag = diagnose_sentences(_sentences(*texts), scorers)
    assert {"nurse", "mat"} <= {w["word"] for w in diag.words}
    assert not any(w["word"].endswith(".") for w in diag.words)
    words = [w for text in texts for w in text.rstrip(".").split()]
    split = sum(len(tokenizer.tokenize(w)) > 1 for w in words)
    assert diag.oov["mlm"]["words"] == len(words)
    assert diag.oov["mlm"]["ratio"] == pytest.approx(split / len(words))


def test_a_column_of_a_plain_text_file_is_refused_in_diagnose_terms(tmp_path, capsys):
    data = tmp_path / "one.txt"
    data.write_text("A cat sat on the mat.\n")
    args = ["diagnose", "-m", "some-model", "--dataset", str(data), "--column", "x"]
    assert main([*args, "-o", str(tmp_path / "diag")]) == 1
    error = capsys.readouterr().err
    assert "--column does not apply" in error and "--input-format" not in error
    assert not (tmp_path / "diag").exists()


def test_plots_have_one_panel_per_score_and_one_dot_per_item(diagnosis):
    n_series = len(PLL_METRICS) + 1
    fig = plot_length(diagnosis)
    assert len(fig.axes) == n_series
    for ax in fig.axes:
        (dots,) = ax.collections
        assert len(dots.get_offsets()) == len(diagnosis.sentences)
    fig = plot_frequency(diagnosis)
    assert len(fig.axes) == n_series
    for ax in fig.axes:
        assert sum(len(c.get_offsets()) for c in ax.collections) == len(diagnosis.words)
    fig = plot_causal(diagnosis)
    assert len(fig.axes) == len(PLL_METRICS)
    for ax in fig.axes:
        (dots,) = ax.collections
        assert len(dots.get_offsets()) == len(diagnosis.sentences)


def test_report_and_files(diagnosis, tmp_path):
    report = write_outputs(diagnosis, tmp_path / "diag")
    text = report.read_text()
    for name in ("PLL-original", "PLL-word-l2r", "PLL-whole-word", "PLL-sentence-l2r"):
        assert f"| {name} |" in text
    assert "r(PLL, causal LL)" in text and "Out-of-vocabulary" in text
    for name in ("length", "frequency", "causal"):
        assert f"]({name}.png)" in text
        assert_png(tmp_path / "diag" / f"{name}.png")
    rows = list(csv.DictReader((tmp_path / "diag" / "sentences.csv").open()))
    assert len(rows) == len(diagnosis.sentences)
    assert len(list(csv.DictReader((tmp_path / "diag" / "words.csv").open()))) == len(
        diagnosis.words
    )


@pytest.mark.parametrize("tables", [True, False])
def test_tables_a_run_is_writing_are_refused(diagnosis, tmp_path, tables):
    """write_outputs emptied and wrote sentences.csv under a diagnose run that held it,
    whose later chunks then went on after its rows: two writers of one file.  Without
    the tables (a diagnosis that wrote them as it went), its report would have gone beside
    the tables of the run now writing them (another model's, with --overwrite)."""
    from pll_harness.tools.resumable import RecordFile

    folder = tmp_path / "diag"
    folder.mkdir()
    table = folder / "sentences.csv"
    table.write_bytes(b"id,text\r\n0,A cat sat.\r\n")
    running = RecordFile(table, "csv", ["id", "text"], ("id",))  # holds its lock
    with pytest.raises(ValueError, match="being written by another writer"):
        write_outputs(diagnosis, folder, tables=tables)
    running.close()
    assert table.read_bytes() == b"id,text\r\n0,A cat sat.\r\n"
    assert not (folder / "report.md").exists()


def test_the_best_metric_is_bold_at_the_precision_shown():
    """Two metrics that show the same r are both best, as in ``compare``; the causal model
    is not a candidate."""
    diag = Diagnosis("m", "data", ["original", "word_l2r", "whole_word"], "gpt2")
    diag.oov["mlm"] = {"words": 3, "ratio": 0.1, "types": 3, "type_ratio": 0.1}
    for name, r in (("original", 0.304), ("word_l2r", 0.301), ("whole_word", 0.2), ("causal", 0.9)):
        diag.stats[name] = {"r_length": r, "r_frequency": -r, "r_causal": r, "mean": -10.0}
    report = report_markdown(diag, {})
    assert "| PLL-original | **0.30** | -0.30 | **0.30** | -10.00 |" in report
    assert "| PLL-word-l2r | **0.30** | -0.30 | **0.30** | -10.00 |" in report
    assert "| PLL-whole-word | 0.20 | **-0.20** | 0.20 | -10.00 |" in report
    assert "| causal LL (gpt2) | 0.90 | -0.90 | – | -10.00 |" in report
    # the word test is English whatever the sentences' language: the report says so
    assert "English context “My word is _” against English frequencies" in report


def test_diagnose_file_without_causal_and_cli(tiny_roberta_dir, tmp_path, capsys):
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked.\nShe is a nurse today.\nHi.\n")
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "causal.png").write_bytes(b"an earlier run's plot")
    diag = diagnose(tiny_roberta_dir, str(data), tmp_path / "d1", metrics="original,word_l2r")
    assert diag.causal is None and set(diag.stats) == {"original", "word_l2r"}
    assert not (tmp_path / "d1" / "causal.png").exists()
    assert_png(tmp_path / "d1" / "length.png")
    assert "r(PLL, causal LL)" not in (tmp_path / "d1" / "report.md").read_text()

    out = tmp_path / "d2"
    assert (
        main(
            [
                "diagnose",
                "-m",
                tiny_roberta_dir,
                "--limit",
                "2",
                "--metric",
                "word_l2r",
                "-o",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "# PLL diagnosis" in capsys.readouterr().out
    assert len(list(csv.DictReader((out / "sentences.csv").open()))) == 4


def test_a_sentence_with_no_token_is_named_in_diagnoses_own_words(tiny_bert_dir, tmp_path, capsys):
    """diagnose scores through score_file, whose warning names the command run."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\n\u200b\nThe dog barked.\n")
    diagnose(tiny_bert_dir, str(data), tmp_path / "d", metrics="original")
    warned = capsys.readouterr().err
    assert "pll-harness diagnose: warning: 1 sentences have no token to score" in warned


@pytest.mark.parametrize("name", ["a-file", "a-file/diag"])
def test_an_output_dir_that_cannot_be_written_stops_before_the_model_loads(
    tmp_path, capsys, monkeypatch, name
):
    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(MLMScorers, "__init__", loaded)
    data = tmp_path / "a-file"
    data.write_text("A cat sat on the mat.\nThe dog barked.\n")
    out = tmp_path / name
    assert main(["diagnose", "-m", "some-model", "--dataset", str(data), "-o", str(out)]) == 1
    error = capsys.readouterr().err
    assert str(out) in error and "a-file" in error
    assert data.read_text() == "A cat sat on the mat.\nThe dog barked.\n"


def test_a_causal_model_that_fails_to_load_leaves_no_output_folder(tiny_bert_dir, tmp_path, capsys):
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked.\n")
    out = tmp_path / "diag"
    args = ["diagnose", "-m", tiny_bert_dir, "--dataset", str(data), "-o", str(out)]
    assert main([*args, "--causal", str(tmp_path / "no-such-lm"), "--no-progress"]) == 1
    assert "no-such-lm" in capsys.readouterr().err
    assert not out.exists()


def test_without_wordfreq_the_error_says_how_to_install_it(tiny_bert_dir, tmp_path, monkeypatch):
    """Word frequencies come from the tools extra too: a missing wordfreq says how to
    install it, as the docs do, rather than only that the module is missing."""
    monkeypatch.setitem(sys.modules, "wordfreq", None)
    out = tmp_path / "diag"
    with pytest.raises(ImportError, match=re.escape("wordfreq, from the tools extra: pip")):
        diagnose(tiny_bert_dir, "eventsadapt", out, metrics="original", limit=1)
    assert not out.exists()


def test_without_matplotlib_nothing_is_scored_or_written(tmp_path, monkeypatch):
    """The plots come last, but matplotlib (the tools extra) is checked first."""
    import importlib

    module = importlib.import_module("pll_harness.tools.diagnose")  # not the function

    def missing():
        raise ImportError("Plots need matplotlib")

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(module, "pyplot", missing)
    monkeypatch.setattr(MLMScorers, "__init__", loaded)
    out = tmp_path / "diag"
    with pytest.raises(ImportError, match="matplotlib"):
        diagnose("some-model", "eventsadapt", out, limit=1)
    assert not out.exists()


class _StopAfter:
    """A scoring method of MLMScorers whose first ``calls`` calls go through and whose
    next one is interrupted, as Ctrl-C would interrupt it."""

    def __init__(self, name: str, calls: int) -> None:
        self.original, self.calls = getattr(MLMScorers, name), calls

    def method(self):
        def scoring(scorers, *args, **kwargs):
            if self.calls == 0:
                raise KeyboardInterrupt
            self.calls -= 1
            return self.original(scorers, *args, **kwargs)

        return scoring


@pytest.mark.parametrize("phase", ["score", "score_requests"])
def test_an_interrupted_diagnosis_resumes_to_the_same_files(
    tiny_bert_dir, tmp_path, monkeypatch, phase
):
    """Interrupted in the sentence phase (``score``) or the word phase (``score_requests``)
    after one chunk, a re-run scores only the rest and ends with the files and numbers of
    an uninterrupted run."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked loudly.\nShe is a nurse.\nHi.\n")
    settings = {"metrics": "original,word_l2r", "chunk_size": 2}
    whole = diagnose(tiny_bert_dir, str(data), tmp_path / "whole", **settings)

    out = tmp_path / "resumed"
    with monkeypatch.context() as patch:
        patch.setattr(MLMScorers, phase, _StopAfter(phase, 1).method())
        with pytest.raises(KeyboardInterrupt):
            diagnose(tiny_bert_dir, str(data), out, **settings)
    table = "sentences.csv" if phase == "score" else "words.csv"
    partial = list(csv.DictReader((out / table).open()))
    assert len(partial) == 2
    assert not (out / "report.md").exists()

    counted = _StopAfter("score_requests", 10**6)
    monkeypatch.setattr(MLMScorers, "score_requests", counted.method())
    resumed = diagnose(tiny_bert_dir, str(data), out, **settings)
    for name in ("sentences.csv", "words.csv"):
        assert (out / name).read_text() == (tmp_path / "whole" / name).read_text()
    assert resumed.stats == whole.stats
    assert resumed.sentences == whole.sentences and resumed.words == whole.words
    scored_again = 10**6 - counted.calls
    assert scored_again == math.ceil((len(whole.words) - (2 if table == "words.csv" else 0)) / 2)


def test_a_sentence_table_saved_with_a_byte_order_mark_resumes(tiny_bert_dir, tmp_path):
    """A sentences.csv that a spreadsheet saved again starts with a byte-order mark, which
    the resume reads past; the table read back after scoring must read past it too (it
    stopped the run with a KeyError on ``id``)."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nShe is a nurse.\n")
    settings = {"metrics": "original", "chunk_size": 1}
    whole = diagnose(tiny_bert_dir, str(data), tmp_path / "whole", **settings)
    table = tmp_path / "whole" / "sentences.csv"
    table.write_bytes("\ufeff".encode() + table.read_bytes())
    resumed = diagnose(tiny_bert_dir, str(data), tmp_path / "whole", **settings)
    assert resumed.sentences == whole.sentences and resumed.words == whole.words


def test_an_overwrite_stopped_early_leaves_nothing_of_the_earlier_run_and_resumes(
    tiny_bert_dir, tiny_roberta_dir, tmp_path, monkeypatch
):
    """Stopped in its sentence phase, a run with --overwrite left the earlier model's
    words.csv, report and plots beside its own sentences: the report described other
    scores, and the folder could be neither resumed (another model's words) nor finished
    but by starting over."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked loudly.\nShe is a nurse.\nHi.\n")
    settings = {"metrics": "original", "chunk_size": 2}
    out = tmp_path / "diag"
    diagnose(tiny_bert_dir, str(data), out, **settings)
    assert (out / "report.md").exists() and (out / "length.png").exists()
    with monkeypatch.context() as patch:
        patch.setattr(MLMScorers, "score", _StopAfter("score", 1).method())
        with pytest.raises(KeyboardInterrupt):
            diagnose(tiny_roberta_dir, str(data), out, overwrite=True, **settings)
    assert not (out / "report.md").exists() and not (out / "length.png").exists()
    assert list(csv.DictReader((out / "words.csv").open())) == []
    resumed = diagnose(tiny_roberta_dir, str(data), out, **settings)
    whole = diagnose(tiny_roberta_dir, str(data), tmp_path / "whole", **settings)
    assert resumed.sentences == whole.sentences and resumed.words == whole.words
    assert (out / "report.md").exists()


@pytest.mark.parametrize("phase", ["score", "score_requests"])
def test_a_resume_that_adds_items_and_stops_leaves_no_finished_looking_report(
    tiny_bert_dir, tmp_path, monkeypatch, phase
):
    """A finished diagnosis of 2 sentences, resumed with a larger --limit and stopped in
    its sentence or word phase, left the 2-sentence report and plots beside the larger
    tables, looking finished.  A resume with nothing to add keeps them."""
    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked loudly.\nShe is a nurse.\nHi.\n")
    settings = {"metrics": "original", "chunk_size": 1}
    out = tmp_path / "diag"
    diagnose(tiny_bert_dir, str(data), out, limit=2, **settings)
    report = (out / "report.md").read_text()
    diagnose(tiny_bert_dir, str(data), out, limit=2, **settings)
    assert (out / "report.md").read_text() == report and (out / "length.png").exists()
    calls = 0 if phase == "score" else 1
    with monkeypatch.context() as patch:
        patch.setattr(MLMScorers, phase, _StopAfter(phase, calls).method())
        with pytest.raises(KeyboardInterrupt):
            diagnose(tiny_bert_dir, str(data), out, **settings)
    assert not (out / "report.md").exists() and not (out / "length.png").exists()


def test_an_overwrite_that_fails_as_it_starts_leaves_the_earlier_folder(
    tiny_bert_dir, tmp_path, monkeypatch
):
    """The earlier run's words, report and plots go only once sentences.csv has started."""
    from pll_harness.tools.resumable import RecordFile

    data = tmp_path / "s.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked loudly.\n")
    out = tmp_path / "diag"
    diagnose(tiny_bert_dir, str(data), out, metrics="original")
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    start = RecordFile.start

    def refused(self):
        if self.path.name == "sentences.csv":
            raise ValueError("sentences.csv cannot start")
        start(self)

    monkeypatch.setattr(RecordFile, "start", refused)
    with pytest.raises(ValueError, match="cannot start"):
        diagnose(tiny_bert_dir, str(data), out, metrics="original", overwrite=True)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before


def test_a_diagnosis_folder_of_other_sentences_is_refused_or_overwritten(tiny_bert_dir, tmp_path):
    from pll_harness.provenance import folder_fingerprint

    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("A cat sat on the mat.\nThe dog barked.\n")
    second.write_text("Birds sing at dawn.\nThe dog barked.\n")
    out = tmp_path / "diag"
    diagnose(tiny_bert_dir, str(first), out, metrics="original")
    written = (out / "sentences.csv").read_bytes()
    with pytest.raises(ValueError, match=r"another (input|dataset)"):
        diagnose(tiny_bert_dir, str(second), out, metrics="original")
    assert (out / "sentences.csv").read_bytes() == written
    (out / "sentences.csv").unlink()
    with pytest.raises(ValueError, match=r"another dataset, or .*a larger --limit"):
        diagnose(tiny_bert_dir, str(second), out, metrics="original")
    # words.csv is checked before any sentence is scored and written
    assert not (out / "sentences.csv").exists()
    fresh = diagnose(tiny_bert_dir, str(second), out, metrics="original", overwrite=True)
    rows = list(csv.DictReader((out / "words.csv").open()))
    assert [row["word"] for row in rows] == [word["word"] for word in fresh.words]
    files = folder_fingerprint(tiny_bert_dir)
    assert {row["model"] for row in rows} == {f"{tiny_bert_dir} files={files}"}


def test_a_diagnosis_folder_of_another_causal_model_is_refused(
    tiny_bert_dir, tiny_gpt2, tiny_llama, tmp_path
):
    data = tmp_path / "a.txt"
    data.write_text("A cat sat on the mat.\nThe dog barked.\n")
    out = tmp_path / "diag"
    diagnose(tiny_bert_dir, str(data), out, metrics="original", causal=str(tiny_gpt2))
    (out / "sentences.csv").unlink()  # the words' table must say so too
    with pytest.raises(ValueError, match="was written with causal_model"):
        diagnose(tiny_bert_dir, str(data), out, metrics="original", causal=str(tiny_llama))


def test_the_packaged_dataset_is_found_in_any_case(monkeypatch, tmp_path):
    """``--dataset EventsAdapt`` was read as a file name and not found."""
    module = importlib.import_module("pll_harness.tools.diagnose")

    class Packaged(Exception):
        pass

    def packaged(limit):
        raise Packaged(limit)

    monkeypatch.setattr(module, "eventsadapt_sentences", packaged)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Packaged):
        diagnose("some-model", dataset="EventsAdapt", output_dir=tmp_path / "d", limit=2)


def test_a_resume_refuses_another_commit_of_a_hub_model(tmp_path, hub_cache):
    """A diagnosis folder resumed after the hub's main moved is refused, every file in it
    left as it was."""
    data, out = tmp_path / "s.txt", tmp_path / "diagnosis"
    data.write_text("A cat sat on the mat.\nThe dog barked loudly.\n")
    diagnose("org/tiny", str(data), out, metrics="original", limit=1)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    move_main(hub_cache, "tiny", NEXT_COMMIT)
    with pytest.raises(ValueError, match="main moved"):
        diagnose("org/tiny", str(data), out, metrics="original")
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
