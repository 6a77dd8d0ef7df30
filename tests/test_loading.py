"""Model-name resolution, dtype and device checks, and the model's usable length."""

from __future__ import annotations

import logging

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from pll_harness import loading


def test_other_names_pass_through():
    assert loading.resolve_pretrained("bert-base-cased") == "bert-base-cased"


def test_demo_name_resolves_to_the_packaged_model(tmp_path, monkeypatch):
    (tmp_path / "pll-demo").mkdir()
    (tmp_path / "pll-demo" / "config.json").write_text("{}")
    monkeypatch.setattr(loading, "DEMO_MODEL_DIR", tmp_path / "pll-demo")
    monkeypatch.chdir(tmp_path / "pll-demo")
    assert loading.resolve_pretrained("pll-demo") == str(tmp_path / "pll-demo")


def test_a_local_demo_folder_wins_with_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pll-demo").mkdir()
    with caplog.at_level(logging.WARNING):
        assert loading.resolve_pretrained("pll-demo") == "pll-demo"
    assert "not the demo model" in caplog.text


def test_missing_demo_model_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "DEMO_MODEL_DIR", tmp_path / "pll-demo")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="demo model is missing"):
        loading.resolve_pretrained("pll-demo")


def test_dtypes():
    assert loading.parse_dtype(None) == "auto"
    assert loading.parse_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(ValueError, match="Choose one of"):
        loading.parse_dtype("fp8")


def test_cuda_request_without_cuda_falls_back_to_cpu(caplog):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with caplog.at_level(logging.WARNING):
        assert loading.resolve_device("cuda:0") == torch.device("cpu")
    assert "CUDA is not available" in caplog.text


def test_max_length_accounts_for_roberta_position_offset(tiny_bert_dir, tiny_roberta_dir):
    """Both tiny models take 64 tokens: BERT's table has 64 rows, RoBERTa's 66 of which
    positions 0 and 1 (padding index 1) are never used."""
    for folder in (tiny_bert_dir, tiny_roberta_dir):
        model = AutoModelForMaskedLM.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.model_max_length = 10**30
        assert loading.model_max_length(model, tokenizer) == 64
        tokenizer.model_max_length = 20
        assert loading.model_max_length(model, tokenizer) == 20
