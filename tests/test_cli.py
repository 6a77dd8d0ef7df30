"""End to end through the installed package: the start-up hook and the stock lm_eval CLI.

These run the real console script in a subprocess, so they prove that ``pip install`` alone
makes ``--model pll-mlm`` available.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lm_eval_runs import BIN, run_checked, write_pair_task

from pll_harness.scorer import PLLScorer

PAIRS = [
    ("The traveler lost the souvenir.", "The souvenir lost the traveler."),
    ("The hooligan wrecked the souvenir.", "The souvenir wrecked the hooligan."),
    ("A cat sat on the mat.", "A mat sat on the cat."),
]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_checked(args, cwd)


def test_startup_hook_loads_nothing_heavy(tmp_path):
    code = (
        "import sys; print(sorted(m for m in ('_pll_harness_hook', 'torch', 'lm_eval', "
        "'pll_harness', 'transformers') if m in sys.modules))"
    )
    out = run([sys.executable, "-c", code], tmp_path).stdout.strip()
    assert out == "['_pll_harness_hook']", (
        f"{out}: install the package (pip install .) so that its start-up hook is active"
    )


def test_registry_resolves_pll_mlm_and_keeps_lm_evals_models(tmp_path):
    code = (
        "from lm_eval.api.registry import get_model; "
        "print(get_model('pll-mlm').__module__, get_model('hf').__name__)"
    )
    assert run([sys.executable, "-c", code], tmp_path).stdout.split() == ["pll_harness.lm", "HFLM"]


@pytest.fixture
def pair_task(tmp_path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    write_pair_task(folder, "pll_unit_pairs", PAIRS)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("command", [["lm_eval"], ["lm-eval", "run"]])
def test_lm_eval_cli_scores_with_pll_mlm(tmp_path, pair_task, tiny_bert_dir, command):
    out = tmp_path / "out"
    run(
        [
            str(BIN / command[0]),
            *command[1:],
            "--model",
            "pll-mlm",
            "--model_args",
            f"pretrained={tiny_bert_dir},pll_metric=word_l2r",
            "--tasks",
            "pll_unit_pairs",
            "--include_path",
            str(pair_task),
            "--device",
            "cpu",
            "--batch_size",
            "auto",
            "--output_path",
            str(out),
            "--log_samples",
        ],
        tmp_path,
    )
    (result_file,) = out.rglob("results_*.json")
    results = json.loads(result_file.read_text())["results"]["pll_unit_pairs"]
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="word_l2r", device="cpu")
    scores = scorer.score([sentence for pair in PAIRS for sentence in pair])
    wins = [scores[2 * i].logprob >= scores[2 * i + 1].logprob for i in range(len(PAIRS))]
    assert results["acc,none"] == pytest.approx(sum(wins) / len(PAIRS))
    (samples_file,) = out.rglob("samples_pll_unit_pairs_*.jsonl")
    first = json.loads(samples_file.read_text().splitlines()[0])
    assert float(first["resps"][0][0][0]) == pytest.approx(scores[0].logprob, abs=1e-5)


@pytest.mark.slow
def test_simple_evaluate_accepts_a_model_instance(pair_task, tiny_roberta_dir):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from pll_harness import PLLMaskedLM

    model = PLLMaskedLM(pretrained=tiny_roberta_dir, device="cpu", pll_metric="original")
    output = lm_eval.simple_evaluate(
        model=model, tasks=["pll_unit_pairs"], task_manager=TaskManager(include_path=str(pair_task))
    )
    assert 0.0 <= output["results"]["pll_unit_pairs"]["acc,none"] <= 1.0


def test_user_task_includes_a_template_by_name(tmp_path):
    """The README's recipe: a few lines of YAML that include our template by name."""
    (tmp_path / "agreement.csv").write_text(
        "grammatical,ungrammatical\n"
        "The keys to the cabinet are on the table.,The keys to the cabinet is on the table.\n"
        "The dogs bark at night.,The dogs barks at night.\n"
    )
    (tmp_path / "my_agreement.yaml").write_text(
        "task: my_agreement\n"
        "include: pll_harness:minimal_pair.yaml\n"
        "dataset_kwargs:\n"
        "  data_files: agreement.csv\n"
        "  good: grammatical\n"
        "  bad: ungrammatical\n"
    )
    code = (
        "from lm_eval.tasks import TaskManager; "
        f"task = TaskManager(include_path={str(tmp_path)!r}).load(['my_agreement'])"
        "['tasks']['my_agreement']; docs = list(task.eval_docs); "
        "print(len(docs), task.doc_to_choice(docs[1])[1])"
    )
    out = run([sys.executable, "-c", code], tmp_path).stdout.strip().splitlines()[-1]
    assert out == "2 The dogs barks at night."
