"""Model-name resolution, dtype and device checks, and the model's usable length."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

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


@pytest.mark.parametrize("file", loading.MODEL_FILES)
def test_a_local_demo_folder_wins_with_a_warning(tmp_path, monkeypatch, caplog, file):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pll-demo").mkdir()
    (tmp_path / "pll-demo" / file).write_text("{}")
    with caplog.at_level(logging.WARNING):
        assert loading.resolve_pretrained("pll-demo") == "pll-demo"
    assert "not the demo model" in caplog.text
    assert loading.model_identity("pll-demo") == str(tmp_path / "pll-demo")


def test_a_local_demo_folder_without_a_model_is_passed_over(tmp_path, monkeypatch, caplog):
    """``lm_eval --model_args pretrained=pll-demo --output_path .`` writes its results into
    ./pll-demo; the next run in that folder took it for the model and failed on it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pll-demo").mkdir()
    (tmp_path / "pll-demo" / "results_2026-11-27T22-00-00.json").write_text("{}")
    with caplog.at_level(logging.WARNING):
        assert loading.resolve_pretrained("pll-demo") == str(loading.DEMO_MODEL_DIR)
    assert "holds no model" in caplog.text
    assert loading.model_identity("pll-demo") == "pll-demo"


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


@pytest.mark.parametrize("device", ["mps", "xpu:0"])
def test_a_device_this_machine_lacks_is_refused_before_loading(device, monkeypatch):
    """An MPS or XPU device that is not there would otherwise fail as a raw torch error
    once the model has loaded (``PyTorch is not linked with support for mps devices``).
    Stood in for where the machine has it, so that the test means the same everywhere."""
    kind = device.partition(":")[0]
    monkeypatch.setattr(getattr(torch, kind), "is_available", lambda: False)
    with pytest.raises(ValueError, match=f"has no {kind} device"):
        loading.resolve_device(device)
    monkeypatch.setattr(getattr(torch, kind), "is_available", lambda: True)
    assert loading.resolve_device(device) == torch.device(device)
    assert loading.resolve_device("cpu") == torch.device("cpu")


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


@pytest.mark.parametrize(
    "name", ["./no/such/folder", "/no/such/folder", "~/no/such/folder", "my_model/"]
)
def test_a_missing_folder_is_named_plainly(name):
    with pytest.raises(ValueError, match=r"no such folder\. .*a masked LM") as error:
        loading.load_masked_lm(name, device="cpu")
    assert error.value.__cause__ is None


def test_a_folder_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match=r"folder without config\.json"):
        loading.load_masked_lm(str(tmp_path), device="cpu")
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="is a file"):
        loading.load_masked_lm(str(tmp_path / "weights.bin"), device="cpu")


@pytest.mark.parametrize("fixture", ["tiny_bert_dir", "tiny_roberta_dir"])
def test_a_checkpoint_without_its_tokenizer_files_is_refused(fixture, request, tmp_path):
    """transformers builds a tokenizer of special tokens only from such a folder, which
    reads every word as the unknown token: every pair of a task would tie."""
    source = request.getfixturevalue(fixture)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(Path(source) / name, tmp_path / name)
    with pytest.raises(ValueError, match=r"holds no tokenizer files.*tokenizer="):
        loading.load_masked_lm(str(tmp_path), device="cpu")
    loaded = loading.load_masked_lm(str(tmp_path), tokenizer=source, device="cpu")
    assert loaded.tokenizer.tokenize("The cat sat.")[0] == "The"


@pytest.mark.parametrize("saved_as", ["AutoModel", "AutoModelForSequenceClassification"])
@pytest.mark.parametrize("fixture", ["tiny_bert_dir", "tiny_roberta_dir"])
def test_a_checkpoint_saved_without_its_mlm_head_is_refused(fixture, saved_as, request, tmp_path):
    """A base model or a classifier loads as a masked LM with a random head, which
    transformers only reports in a load report: every score would be noise."""
    import transformers

    source = request.getfixturevalue(fixture)
    getattr(transformers, saved_as).from_pretrained(source).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(source).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"no trained weights .*not saved as a masked LM"):
        loading.load_masked_lm(str(tmp_path), device="cpu")


def test_a_masked_lm_saved_whole_is_taken(tiny_bert_dir, tmp_path):
    """Its decoder shares the embeddings' weights, which the file need not hold twice."""
    AutoModelForMaskedLM.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path)
    assert loading.load_masked_lm(str(tmp_path), device="cpu").model.training is False


def test_a_tokenizer_whose_vocabulary_is_all_added_tokens_is_taken():
    """A character vocabulary added token by token reads words: it is not a folder
    without tokenizer files, though it too has no token but added ones."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({}, unk_token="[UNK]"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", mask_token="[MASK]"
    )
    tokenizer.add_tokens(list("Thecatsonm. "))
    assert len(tokenizer) == len(tokenizer.added_tokens_decoder)
    loading.refuse_a_tokenizer_without_vocabulary(tokenizer, "characters")


def test_a_revision_of_a_local_folder_is_refused(tiny_bert_dir):
    """transformers ignores ``revision`` for a folder: the run would record a revision it
    never loaded."""
    with pytest.raises(ValueError, match=r"revision='v1' picks a commit .* local folder"):
        loading.load_masked_lm(tiny_bert_dir, revision="v1", device="cpu")
    assert loading.load_masked_lm(tiny_bert_dir, revision="main", device="cpu").model is not None


def test_a_hub_name_offline_and_not_cached_is_one_short_error(monkeypatch, tiny_bert_dir):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    name = "pll-harness-tests/not-a-model"
    for kwargs in ({"pretrained": name}, {"pretrained": tiny_bert_dir, "tokenizer": name}):
        with pytest.raises(ValueError, match=r"switched off.*not in the local") as error:
            loading.load_masked_lm(**kwargs, device="cpu")
        assert error.value.__suppress_context__  # no chain of tracebacks behind it
        assert "bert-base-cased" in str(error.value)  # the kind of model that is needed


def _hub_failure(kind: type[Exception]) -> Exception:
    """One of huggingface_hub's errors without the HTTP response that the Hub would send
    (only its class is read)."""
    error = kind.__new__(kind)
    Exception.__init__(error, "what the Hub answered")
    return error


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("RepositoryNotFoundError", r"neither a local folder nor a model on the Hugging Face"),
        ("GatedRepoError", r"gated on the Hugging Face Hub: log in"),  # a subclass of the above
        ("RevisionNotFoundError", r"has no such revision"),
    ],
)
def test_hub_failures_are_one_short_error(kind, says):
    """transformers raises an OSError whose cause is the Hub's error; users with the Hub
    see these, so they are checked here without it."""
    from huggingface_hub import errors

    explained = loading.explained_load_errors("someone/some-model")
    with pytest.raises(ValueError, match=says) as error, explained:
        raise OSError("transformers' wrapper") from _hub_failure(getattr(errors, kind))
    assert error.value.__suppress_context__
    explained = loading.explained_load_errors("someone/some-model")
    with pytest.raises(OSError, match="disk full"), explained:  # anything else passes as it is
        raise OSError("disk full")


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_attn_implementation_reaches_the_model(tiny_bert_dir, implementation):
    """The kernel choice of issue 12 (eager attention for short sequences) must be what
    runs, and it must not change the scores beyond float32 rounding."""
    from pll_harness.scorer import PLLScorer

    loaded = loading.load_masked_lm(tiny_bert_dir, attn_implementation=implementation, device="cpu")
    assert loaded.model.config._attn_implementation == implementation
    texts = ["The hooligan wrecked the souvenir.", "Who should Derek hug?"]
    chosen = PLLScorer(loaded.model, loaded.tokenizer, device="cpu").score(texts)
    default = loading.load_masked_lm(tiny_bert_dir, device="cpu")
    plain = PLLScorer(default.model, default.tokenizer, device="cpu").score(texts)
    for a, b in zip(chosen, plain, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
