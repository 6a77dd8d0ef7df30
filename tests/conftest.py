"""Shared pytest fixtures: the committed tiny models, minicons reference scores, real checkpoints.

Why these exist: the Hugging Face Hub is unreachable here and in CI, so every test that needs a
real tokenizer/model uses the tiny checkpoints committed under ``tests/fixtures/models`` (built by
``scripts/build_tiny_models.py``), and agreement with an independent implementation is checked
against ``tests/fixtures/minicons_scores.json`` (made by ``scripts/minicons_reference.py``).
Larger checkpoints may be dropped into ``../shared/models/`` next to the repository; tests can
parametrize on ``real_model_dirs()`` and skip when it is empty.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

# Without a GPU, triton interprets its kernels on the CPU (test_short_attention.py). It
# reads this where a kernel is defined and when triton.language is first imported, which
# nothing has done yet.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
FIXTURES_DIR = TESTS_DIR / "fixtures"
TINY_MODELS_DIR = FIXTURES_DIR / "models"
TINY_BERT_DIR = TINY_MODELS_DIR / "tiny-bert-wordpiece"
TINY_ROBERTA_DIR = TINY_MODELS_DIR / "tiny-roberta-bpe"
TINY_SENTENCEPIECE_DIR = TINY_MODELS_DIR / "tiny-xlmr-unigram"
MINICONS_SCORES = FIXTURES_DIR / "minicons_scores.json"
REAL_MODELS_DIR = REPO_ROOT.parent / "shared" / "models"

# (id, path) of each committed tiny model, for parametrizing.
TINY_MODELS = [(path.name, path) for path in (TINY_BERT_DIR, TINY_ROBERTA_DIR)]


def real_model_dirs() -> list[str]:
    """Checkpoint folders (holding a ``config.json``) under ``../shared/models/``, sorted.

    Returns an empty list when that folder does not exist, so callers can write::

        @pytest.mark.parametrize("model_dir", real_model_dirs() or [
            pytest.param(None, marks=pytest.mark.skip(reason="no ../shared/models checkpoints"))])
    """
    if not REAL_MODELS_DIR.is_dir():
        return []
    return sorted(
        str(p) for p in REAL_MODELS_DIR.iterdir() if p.is_dir() and (p / "config.json").is_file()
    )


def minicons_run(scores: dict[str, Any], model: str, metric: str) -> list[dict[str, Any]]:
    """The minicons sentence entries for one model folder name and one metric name.

    ``metric`` uses our names (``original``, ``word_l2r``); each entry is
    ``{"text", "score", "tokens": [[token, logprob], ...]}`` with ``score`` the summed natural-log
    PLL over non-special tokens.
    """
    for run in scores["runs"]:
        if run["model"] == model and run["metric"] == metric:
            return run["sentences"]
    raise KeyError(f"no minicons run for model={model!r} metric={metric!r}")


@pytest.fixture(scope="session")
def tiny_bert_dir() -> str:
    """Path of the committed tiny BERT (WordPiece, 64 positions)."""
    return str(TINY_BERT_DIR)


@pytest.fixture(scope="session")
def tiny_roberta_dir() -> str:
    """Path of the committed tiny RoBERTa (byte-level BPE, 64 usable positions)."""
    return str(TINY_ROBERTA_DIR)


@pytest.fixture(scope="session")
def tiny_sentencepiece_dir() -> str:
    """Path of the committed tiny XLM-R (Unigram pieces with Metaspace, as sentencepiece
    models convert; built by ``scripts/build_tiny_sentencepiece.py``)."""
    return str(TINY_SENTENCEPIECE_DIR)


@pytest.fixture
def tiny_deberta_v2_tokenizer(tiny_sentencepiece_dir: str) -> Any:
    """The tiny XLM-R's pieces, ids and special tokens in transformers' own DeBERTa-v2
    tokenizer class, whose pipeline differs from XLM-R's: its normalizer collapses runs of
    whitespace and strips the text's end, and its pre-tokenizer splits at " " only."""
    import transformers

    xlmr = transformers.AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    unigram = json.loads(xlmr.backend_tokenizer.to_str())["model"]
    specials = {"bos_token": "<s>", "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>"}
    return transformers.DebertaV2Tokenizer(
        vocab=[tuple(piece) for piece in unigram["vocab"]],
        unk_id=unigram["unk_id"],
        **specials,
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_max_length=xlmr.model_max_length,
    )


@pytest.fixture(
    scope="session", params=[path for _, path in TINY_MODELS], ids=[n for n, _ in TINY_MODELS]
)
def tiny_model_dir(request: pytest.FixtureRequest) -> str:
    """Each committed tiny model in turn: a test using it runs once per tokenizer family."""
    return str(request.param)


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 1-layer GPT-2 with the tiny RoBERTa's tokenizer (see tools_support)."""
    from tools_support import build_tiny_gpt2

    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2") / "tiny-gpt2")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 1-layer Llama whose tokenizer adds ``<s>`` itself (see tools_support)."""
    from tools_support import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("llama") / "tiny-llama")


@pytest.fixture(scope="session")
def minicons_scores() -> dict[str, Any]:
    """The parsed ``minicons_scores.json`` (see ``minicons_run`` to pick one model and metric)."""
    return json.loads(MINICONS_SCORES.read_text())


class GatheredGroup:
    """A stand-in process group whose all_gather_object answers with a fixed list: what
    each rank would contribute."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers

    def all_gather_object(self, obj: Any) -> list[Any]:
        return self.answers


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loading a task must never reach the Hugging Face Hub (or anything else).

    Attempts are recorded as well as refused, since libraries swallow the error (datasets'
    download counter does), and the offline switches of datasets and huggingface_hub,
    which CI sets, are turned off so that they cannot hide an attempt."""
    import datasets
    import huggingface_hub.constants

    attempts: list[tuple[object, ...]] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", True)
    yield
    assert not attempts, f"network access attempted: {attempts}"


FIRST_COMMIT, NEXT_COMMIT = "a" * 40, "b" * 40


@pytest.fixture
def hub_cache(tmp_path, tiny_bert_dir, tiny_gpt2, no_network, monkeypatch) -> Path:
    """A Hugging Face cache of its own, read offline, in which ``org/tiny`` (the tiny BERT)
    and ``org/gpt`` (the tiny GPT-2) both have two commits with the same files, their
    ``main`` at the first."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    for name, folder in (("tiny", tiny_bert_dir), ("gpt", tiny_gpt2)):
        repo = cache / f"models--org--{name}"
        for commit in (FIRST_COMMIT, NEXT_COMMIT):
            shutil.copytree(folder, repo / "snapshots" / commit)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(FIRST_COMMIT)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def move_main(cache: Path, name: str, commit: str) -> None:
    """The hub's ``main`` of ``org/<name>`` moved, as an online load records it."""
    (cache / f"models--org--{name}" / "refs" / "main").write_text(commit)
