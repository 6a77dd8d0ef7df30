"""The tasks with real models: lm-eval's ``hf`` causal LM in-process, and ``lm_eval --model
pll-mlm`` on the command line, both on tiny local checkpoints (no Hub, no network)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import lm_eval
import pytest
import torch
from conftest import TINY_BERT_DIR
from lm_eval.tasks import TaskManager
from lm_eval_runs import run_checked

import pll_harness
from pll_harness.task_paths import TASK_DIR

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- hf (causal)


def _tiny_causal_lm(folder: Path, sentences: list[str]) -> None:
    """A random 1-layer GPT-2 with a word-level tokenizer over ``sentences``: enough for
    lm-eval's ``hf`` model to load from disk and score."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    pre = pre_tokenizers.Whitespace()
    words = sorted({w for s in sentences for w, _ in pre.pre_tokenize_str(s)})
    vocab = {"<|endoftext|>": 0, "<unk>": 1} | {w: i + 2 for i, w in enumerate(words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<unk>",
        pad_token="<|endoftext|>",
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(vocab), n_positions=32, n_embd=16, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).eval().save_pretrained(folder)


def _causal_logprob(folder: Path, sentence: str) -> float:
    """log P(sentence | BOS), the convention of lm-eval's BLiMP for an empty context."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = [tokenizer.bos_token_id, *tokenizer.encode(sentence, add_special_tokens=False)]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
    return float(logits.gather(1, torch.tensor(ids[1:])[:, None]).sum())


def test_tasks_run_with_lm_evals_hf_causal_model(tmp_path: Path) -> None:
    tm = TaskManager(include_defaults=False, include_path=str(TASK_DIR))
    tasks = tm.load(["pll_example_agreement", "blimp_pll_ellipsis_n_bar_1"])["tasks"]
    sentences = [
        s
        for task in tasks.values()
        for doc in list(task.eval_docs)[:4]
        for s in (doc["sentence_good"], doc["sentence_bad"])
    ]
    _tiny_causal_lm(tmp_path / "gpt", sentences)
    out = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": str(tmp_path / "gpt"), "dtype": "float32"},
        tasks=["pll_example_agreement", "blimp_pll_ellipsis_n_bar_1"],
        task_manager=tm,
        limit=4,
        device="cpu",
        log_samples=True,
        bootstrap_iters=0,
    )
    assert out is not None
    for name, samples in out["samples"].items():
        assert len(samples) == 4
        for s in samples:
            good, bad = (r[0] for r in s["filtered_resps"])
            doc = s["doc"]
            assert good == pytest.approx(_causal_logprob(tmp_path / "gpt", doc["sentence_good"]))
            assert bad == pytest.approx(_causal_logprob(tmp_path / "gpt", doc["sentence_bad"]))
            assert s["acc"] == float(good > bad)
        accs = [s["acc"] for s in samples]
        assert out["results"][name]["acc,none"] == pytest.approx(sum(accs) / len(accs))


# --------------------------------------------------------------------------- pll-mlm CLI


def _lm_eval_command() -> list[str]:
    """``lm_eval`` itself where the start-up hook is installed; otherwise the same CLI with
    the checkout's hook installed first, so the run still finds pll-mlm and our tasks."""
    if importlib.util.find_spec("_pll_harness_hook") is not None:
        return [str(Path(sys.executable).with_name("lm_eval"))]
    shim = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); "
        "import _pll_harness_hook; _pll_harness_hook.install(); "
        "from lm_eval.__main__ import cli_evaluate; sys.argv[0] = 'lm_eval'; cli_evaluate()"
    )
    return [sys.executable, "-c", shim, str(REPO / "hook")]


@pytest.mark.slow
def test_lm_eval_cli_with_pll_mlm(tmp_path: Path) -> None:
    tasks = (
        "blimp_pll_ellipsis,eventsadapt_pll_ai,pll_example_stereotype,"
        "crows_pairs_pll_age,clams_pll_fr_simple_agrmt,zorro_pll_binding"
    )
    command = [
        *_lm_eval_command(),
        "run",
        "--model",
        "pll-mlm",
        "--model_args",
        f"pretrained={TINY_BERT_DIR},pll_metric=word_l2r",
        "--tasks",
        tasks,
        "--limit",
        "3",
        "--device",
        "cpu",
        "--log_samples",
        "--output_path",
        str(tmp_path / "out"),
    ]
    package_root = str(Path(pll_harness.__file__).resolve().parents[1])
    python_path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    done = run_checked(command, tmp_path, TRANSFORMERS_OFFLINE="1", PYTHONPATH=python_path)

    results_files = list((tmp_path / "out").rglob("results_*.json"))
    assert len(results_files) == 1, done.stderr[-3000:]
    results = json.loads(results_files[0].read_text())["results"]
    for name in (
        "blimp_pll_ellipsis",
        "eventsadapt_pll_ai",
        "blimp_pll_ellipsis_n_bar_1",
        "clams_pll_fr_simple_agrmt",
        "zorro_pll_binding",
    ):
        assert 0.0 <= results[name]["acc,none"] <= 1.0
        assert math.isfinite(results[name]["score_diff,none"])
    assert 0.0 <= results["pll_example_stereotype"]["first_preferred,none"] <= 1.0

    samples_files = list((tmp_path / "out").rglob("samples_blimp_pll_ellipsis_n_bar_1_*.jsonl"))
    assert len(samples_files) == 1
    samples = [json.loads(line) for line in samples_files[0].read_text().splitlines()]
    assert len(samples) == 3
    for s in samples:
        good, bad = (float(r[0]) for r in s["filtered_resps"])
        assert good < 0 and bad < 0  # a PLL is a sum of log-probabilities
        assert s["acc"] == float(good > bad)
        assert s["score_diff"] == pytest.approx(good - bad)

    crows = list((tmp_path / "out").rglob("samples_crows_pairs_pll_age_*.jsonl"))
    assert len(crows) == 1
    samples = [json.loads(line) for line in crows[0].read_text().splitlines()]
    assert len(samples) == 3
    for s in samples:
        more, less = (float(r[0]) for r in s["filtered_resps"])
        assert s["pct_stereotype"] == float(more > less)
    share = sum(s["pct_stereotype"] for s in samples) / 3
    assert results["crows_pairs_pll_age"]["pct_stereotype,none"] == pytest.approx(share)
