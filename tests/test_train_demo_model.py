"""scripts/train_demo_model.py: a training cut into short runs equals one uninterrupted run.

A tiny BERT (1 layer, hidden 32) on a synthetic corpus trains for 9 steps once straight
through and once as three runs of at most 4 steps (``--run-steps``, the same mechanism that
``--max-minutes`` and SIGINT/SIGTERM use), each resuming from the checkpoint of the last. On CPU
the two must agree bitwise: weights, optimiser moments, loss history and held-out losses
(tolerance 0), since the data order, masks and RNG states are restored exactly.
"""

from __future__ import annotations

import importlib.util
import random
import re
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "train_demo_model.py"
TINY = [
    "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "120",
    "--seq-len", "32", "--max-position", "64", "--batch-size", "8", "--steps", "9",
    "--warmup", "0.2", "--lr", "3e-3", "--heldout", "0.1", "--eval-every", "4",
    "--eval-seqs", "8", "--log-every", "1", "--ckpt-every", "100",
]  # fmt: skip


@pytest.fixture(scope="module")
def train():
    spec = importlib.util.spec_from_file_location("train_demo_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data(tmp_path_factory, train) -> Path:
    """A packed synthetic corpus: 60 documents of 5 short sentences."""
    rng = random.Random(0)
    nouns = ["dog", "cat", "teacher", "child", "farmer", "bird", "doctor", "river"]
    verbs = ["sees", "likes", "finds", "helps", "follows", "hears"]
    adjectives = ["old", "small", "happy", "green", "quiet"]
    docs = [
        "\n".join(
            f"The {rng.choice(adjectives)} {rng.choice(nouns)} {rng.choice(verbs)} "
            f"the {rng.choice(nouns)}."
            for _ in range(5)
        )
        for _ in range(60)
    ]
    root = tmp_path_factory.mktemp("tiny-corpus")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(f"# tiny\n{d}" for d in docs) + "\n", encoding="utf-8")
    packed = root / "packed.pt.xz"
    argv = ["--corpus", str(corpus), "--data", str(packed), "--work", str(root / "w")]
    assert train.main([*argv, *TINY, "--prepare-only"]) == 0
    return packed


def run(train, data: Path, work: Path, *extra: str) -> int:
    argv = ["--data", str(data), "--work", str(work), "--out", str(work / "out"), *TINY]
    return train.main([*argv, *extra])


def test_short_runs_resume_to_the_same_model_as_one_run(train, data, tmp_path):
    assert run(train, data, tmp_path / "straight") == 0
    cut = tmp_path / "cut"
    codes = [run(train, data, cut, "--run-steps", "4") for _ in range(3)]
    assert codes == [train.EXIT_RESUMABLE, train.EXIT_RESUMABLE, 0]

    a = torch.load(tmp_path / "straight" / "checkpoint.pt", weights_only=False)
    b = torch.load(cut / "checkpoint.pt", weights_only=False)
    assert a["step"] == b["step"] == 9
    assert a["history"] == b["history"] and len(a["history"]) == 9
    assert [e["heldout_loss"] for e in a["evals"]] == [e["heldout_loss"] for e in b["evals"]]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    moments = [(s["exp_avg"], t["exp_avg"]) for s, t in zip(
        a["opt"]["state"].values(), b["opt"]["state"].values(), strict=True)]  # fmt: skip
    assert all(torch.equal(x, y) for x, y in moments)
    assert a["history"][0][1] != a["history"][-1][1]  # it did train
    same = (tmp_path / "straight/out/model.safetensors").read_bytes()
    assert same == (cut / "out" / "model.safetensors").read_bytes()


def test_export_loads_as_a_fast_masked_lm(train, data, tmp_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    assert run(train, data, tmp_path, "--steps", "2") == 0
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "out")
    assert tokenizer.is_fast and tokenizer.mask_token == "[MASK]"
    assert model.dtype == torch.float32
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 32


def test_resume_under_another_schedule_is_refused(train, data, tmp_path):
    assert run(train, data, tmp_path, "--run-steps", "2") == train.EXIT_RESUMABLE
    with pytest.raises(SystemExit, match=re.escape("'lr': (0.003, 0.002)")):
        run(train, data, tmp_path, "--lr", "2e-3")


def test_weights_over_the_size_limit_are_refused(train, data, tmp_path):
    assert run(train, data, tmp_path, "--run-steps", "1") == train.EXIT_RESUMABLE
    with pytest.raises(SystemExit, match=re.escape("over the 0.001 MB limit")):
        run(train, data, tmp_path, "--export-only", "--max-weights-mb", "0.001")
    assert not (tmp_path / "out").exists()
