"""What results files record: PLLMaskedLM.get_model_info() and the checkpoint commit read
from the local Hugging Face cache (tests/test_lm_eval_cli.py checks that it reaches an
lm-eval results JSON)."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest
from transformers import AutoModelForMaskedLM, AutoTokenizer

import pll_harness
from pll_harness import PLLMaskedLM
from pll_harness.models import DEMO_MODEL_DIR
from pll_harness.provenance import (
    checkpoint_commit,
    folder_fingerprint,
    loaded_commit,
    model_info,
    model_label,
    scoring_model,
    split_commit,
)

MAIN = "0123456789abcdef0123456789abcdef01234567"
OLDER = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache holding two commits of ``org/tiny``, ``main`` at the newer."""
    repo = tmp_path / "models--org--tiny"
    for commit in (MAIN, OLDER):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(MAIN)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    return repo


def test_commit_of_a_cached_hub_checkpoint(hub_cache):
    assert checkpoint_commit("org/tiny") == MAIN
    assert checkpoint_commit("org/tiny", "main") == MAIN
    assert checkpoint_commit("org/tiny", OLDER) == OLDER
    assert checkpoint_commit("org/tiny", "no-such-branch") is None
    assert checkpoint_commit("org/other") is None


def test_commit_of_a_cache_snapshot_folder_and_of_other_folders(hub_cache, tmp_path):
    assert checkpoint_commit(str(hub_cache / "snapshots" / OLDER)) == OLDER
    assert checkpoint_commit(str(tmp_path)) is None
    assert checkpoint_commit(None) is None


def test_a_hub_models_label_ends_with_the_commit_it_was_loaded_from(
    hub_cache, tmp_path, tiny_bert_dir, monkeypatch
):
    """A hub name has no files here to digest: its commit tells two versions apart.  A
    folder's label keeps its ``files=`` digest alone (a cache snapshot folder's too), and a
    folder whose name looks like a commit is not read as one."""
    monkeypatch.chdir(tmp_path)  # no local folder named pll-demo
    assert loaded_commit("org/tiny") == MAIN
    label = scoring_model("org/tiny", "bfloat16", commit=MAIN)
    assert label == f"org/tiny dtype=bfloat16 commit={MAIN}"
    assert split_commit(label) == ("org/tiny dtype=bfloat16", MAIN)
    assert model_label("org/tiny", MAIN) == f"org/tiny commit={MAIN}"
    assert split_commit("org/tiny") == ("org/tiny", None)
    for folder in (str(hub_cache / "snapshots" / OLDER), tiny_bert_dir, "pll-demo"):
        assert loaded_commit(folder) is None
    assert loaded_commit("org/other") is None
    folder = tmp_path / f"model commit={MAIN}"
    folder.mkdir()
    assert split_commit(model_label(str(folder))) == (model_label(str(folder)), None)


def test_model_info_of_a_model_object(tiny_roberta_dir):
    model = AutoModelForMaskedLM.from_pretrained(tiny_roberta_dir)
    info = model_info(model, "original", 64)
    assert info["model_checkpoint"] == tiny_roberta_dir  # its name_or_path
    assert info["model_architecture"] == "RobertaForMaskedLM"
    assert info["model_sha"] is None


def test_model_info_names_the_tokenizer_of_a_model_object(tiny_bert_dir, tmp_path):
    """A model passed to lm-eval as an object leaves no model_args in the results file:
    the tokenizer, which changes every score, must be named there all the same."""
    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir)
    shutil.copytree(tiny_bert_dir, tmp_path / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    lm = PLLMaskedLM(pretrained=model, tokenizer=tokenizer, device="cpu")
    assert lm.get_model_info()["model_tokenizer"] == str(tmp_path / "tokenizer")
    by_name = PLLMaskedLM(pretrained="pll-demo", device="cpu")
    assert by_name.get_model_info()["model_tokenizer"] == "pll-demo"
    tokenizer.name_or_path = ""  # built in memory: no name to record
    nameless = PLLMaskedLM(pretrained=model, tokenizer=tokenizer, device="cpu")
    # one fact: the cache's settings name the tokenizer as the results file does
    assert nameless.get_model_info()["model_tokenizer"] is None
    assert nameless._scoring_settings["tokenizer"] is None
    assert lm._scoring_settings["tokenizer"] == str(tmp_path / "tokenizer")


def test_a_folder_is_recorded_as_its_absolute_path(tiny_bert_dir, monkeypatch):
    folder = Path(tiny_bert_dir)
    monkeypatch.chdir(folder.parent)
    model = AutoModelForMaskedLM.from_pretrained(folder.name)
    info = model_info(model, "original", 64, checkpoint=folder.name + "/")
    assert info["model_checkpoint"] == str(folder.resolve())
    assert model_info(model, "original", 64, checkpoint="org/name")["model_checkpoint"] == (
        "org/name"
    )


def test_get_model_info(tiny_bert_dir):
    lm = PLLMaskedLM(
        pretrained=tiny_bert_dir, device="cpu", pll_metric="whole_word", dtype="bfloat16"
    )
    model = lm.scorer.model
    assert lm.get_model_info() == {
        "pll_metric": "whole_word",
        "pll_max_length": 64,
        "pll_device": "cpu",
        "pll_add_prefix_space": None,
        "pll_harness_version": pll_harness.__version__,
        "model_checkpoint": tiny_bert_dir,
        "model_tokenizer": tiny_bert_dir,
        "model_architecture": "BertForMaskedLM",
        "model_revision": None,
        "model_sha": None,
        "model_files": folder_fingerprint(tiny_bert_dir),
        "model_dtype": "torch.bfloat16",
        "model_num_parameters": sum(p.numel() for p in model.parameters()),
    }


def test_the_model_files_recorded_are_those_loaded(tiny_bert_dir, tmp_path):
    """A model saved again into its folder while a run scores (a training job writing its
    next checkpoint there) does not change what the results file says was scored, nor
    what an lm-eval cache is keyed by."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    as_loaded = folder_fingerprint(str(folder))
    lm = PLLMaskedLM(pretrained=str(folder), device="cpu")
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")
    assert folder_fingerprint(str(folder)) != as_loaded
    assert lm.get_model_info()["model_files"] == as_loaded
    assert lm._scoring_settings["model_files"] == as_loaded
    lm.get_model_info()["model_files"] = "changed by the caller"
    assert lm.get_model_info()["model_files"] == as_loaded


def test_the_packaged_demo_model_is_recorded_by_its_files(monkeypatch, tmp_path):
    """Its name stays pll-demo from one version of the package to the next, and it has no
    commit: the digest of its files tells a retrained one apart.  A model built in memory
    has no files."""
    from transformers import BertConfig

    monkeypatch.chdir(tmp_path)
    model = AutoModelForMaskedLM.from_pretrained(DEMO_MODEL_DIR)
    info = model_info(model, "word_l2r", 512, checkpoint="pll-demo")
    assert info["model_checkpoint"] == "pll-demo"
    assert info["model_files"] == folder_fingerprint(str(DEMO_MODEL_DIR)) is not None
    built = AutoModelForMaskedLM.from_config(
        BertConfig(
            vocab_size=50,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=8,
        )
    )
    assert model_info(built, "original", 64)["model_files"] is None


def test_a_folder_fingerprint_ignores_what_runs_write_beside_the_model(tiny_bert_dir, tmp_path):
    """An output resumed inside the model's folder (scores, plots, lm-eval's cache) made
    the folder another model to the next run; a changed model file still does."""
    import shutil

    from pll_harness.provenance import folder_fingerprint

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    before = folder_fingerprint(str(folder))
    written = ("scores.csv", "tokens.jsonl", "length.png", "cache_rank0.db", "README.md", "NOTICE")
    for name in written:
        (folder / name).write_text("written by a run")
    assert folder_fingerprint(str(folder)) == before
    config = folder / "config.json"
    config.write_text(config.read_text().replace("}", ', "note": 1}', 1))
    assert folder_fingerprint(str(folder)) != before


def test_the_packaged_demo_model_is_recorded_with_its_files(monkeypatch, tmp_path):
    """A later version of the package ships pll-demo trained again under the same name:
    an output resumed across that upgrade must not mix the two models' scores.  A hub
    name, which has no files here, reads as given."""
    monkeypatch.chdir(tmp_path)  # no local folder named pll-demo
    label = f"pll-demo files={folder_fingerprint(str(DEMO_MODEL_DIR))}"
    assert scoring_model("pll-demo") == scoring_model(str(DEMO_MODEL_DIR)) == label
    assert scoring_model("bert-base-cased", "bfloat16") == "bert-base-cased dtype=bfloat16"


def test_the_dtype_a_local_checkpoint_declares_is_its_default(tiny_bert_dir, tmp_path):
    """``--dtype float32`` on a float32 checkpoint scores what ``auto`` scores: the two
    label the same, so that writing the default out resumes the output; another dtype
    does not, nor does a hub name's (whose config is not read)."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)  # its config.json declares float32
    assert scoring_model(str(folder), "float32") == scoring_model(str(folder), "auto")
    assert scoring_model(str(folder), "bfloat16").endswith(" dtype=bfloat16")
    assert scoring_model("pll-demo", "float32") == scoring_model("pll-demo")
    assert scoring_model("org/name", "float32") == "org/name dtype=float32"


def test_a_folder_named_like_a_commit_outside_the_cache_has_none(tmp_path):
    """Only a Hugging Face cache snapshot is named by its commit: a user's own folder that
    happens to be named by 40 hex digits (a git hash as a run name) recorded as
    ``model_sha`` would claim a hub commit it never was."""
    folder = tmp_path / MAIN
    folder.mkdir()
    assert checkpoint_commit(str(folder)) is None


def test_a_folder_fingerprint_tells_a_renamed_file(tmp_path):
    """Which file a folder's weights are in decides what loads (``model.safetensors``
    before ``pytorch_model.bin``): the same bytes under another name are another model."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "pytorch_model.bin").write_bytes(b"weights")
    before = folder_fingerprint(str(folder))
    (folder / "pytorch_model.bin").rename(folder / "model.safetensors")
    assert folder_fingerprint(str(folder)) != before


def test_a_large_file_saved_again_at_the_same_size_changes_the_fingerprint(tmp_path, monkeypatch):
    """A model trained again into its folder keeps its architecture, so its weights file
    keeps its size: past :data:`HASHED_FILE_BYTES`, the modification time is what tells
    the new weights from the old."""
    import os

    import pll_harness.provenance as provenance

    monkeypatch.setattr(provenance, "HASHED_FILE_BYTES", 4)
    folder = tmp_path / "model"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"old weights")
    os.utime(weights, ns=(1_000_000_000, 1_000_000_000))
    before = folder_fingerprint(str(folder))
    weights.write_bytes(b"new weights")
    os.utime(weights, ns=(2_000_000_000, 2_000_000_000))
    assert folder_fingerprint(str(folder)) != before


def test_add_prefix_space_is_part_of_the_label_and_the_model_info(tiny_roberta_dir):
    """``add_prefix_space`` changes a byte-level BPE model's scores: a resumed output must
    not mix scores with and without it, and a results file must say which it was."""
    assert scoring_model("org/name", add_prefix_space=True) == "org/name add_prefix_space=True"
    assert scoring_model("org/name", add_prefix_space=False) == "org/name add_prefix_space=False"
    model = AutoModelForMaskedLM.from_pretrained(tiny_roberta_dir)
    assert model_info(model, "original", 64, add_prefix_space=True)["pll_add_prefix_space"]


def test_a_transformers_4_torch_dtype_is_the_checkpoints_default_too(tmp_path):
    """A checkpoint saved by transformers 4 declares its dtype as ``torch_dtype``: writing
    that dtype out must resume the output that ``auto`` wrote, as with ``dtype``."""
    import json

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"torch_dtype": "float16"}))
    assert scoring_model(str(folder), "float16") == scoring_model(str(folder), "auto")
    assert scoring_model(str(folder), "float32").endswith(" dtype=float32")
