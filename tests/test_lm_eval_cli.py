"""lm-eval's own entry points (the `lm_eval` CLI, `simple_evaluate`, `TaskManager`) with
pll_harness installed: ``--model pll-mlm``, the packaged tasks and the template includes
work with nothing but ``pip install``, and the results file records how it was scored.

They run in subprocesses or through lm-eval's public API, whichever way lm-eval finds our
model and tasks (its entry points or the start-up hook, see test_hook.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lm_eval_runs import BIN, run_checked, write_pair_task

import pll_harness
from pll_harness.scorer import PLLScorer

PAIRS = [
    ("The traveler lost the souvenir.", "The souvenir lost the traveler."),
    ("The hooligan wrecked the souvenir.", "The souvenir wrecked the hooligan."),
    ("A cat sat on the mat.", "A mat sat on the cat."),
]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_checked(args, cwd)


def test_registry_resolves_pll_mlm_and_keeps_lm_evals_models(tmp_path):
    code = (
        "from lm_eval.api.registry import get_model; "
        "print(get_model('pll-mlm').__module__, get_model('hf').__name__)"
    )
    assert run([sys.executable, "-c", code], tmp_path).stdout.split() == ["pll_harness.lm", "HFLM"]


def expected_accuracy(scorer: PLLScorer) -> float:
    """The share of PAIRS whose first sentence the scorer ranks higher: lm-eval's ``acc``
    for the pair task, which picks the first choice on a tie."""
    scores = scorer.score([sentence for pair in PAIRS for sentence in pair])
    wins = [scores[2 * i].logprob >= scores[2 * i + 1].logprob for i in range(len(PAIRS))]
    return sum(wins) / len(PAIRS)


def assert_records_how_it_was_scored(config: dict, checkpoint: str, metric: str) -> None:
    """PLLMaskedLM.get_model_info() reached the results' ``config``."""
    assert config["pll_metric"] == metric
    assert config["model_checkpoint"] == checkpoint
    assert config["pll_harness_version"] == pll_harness.__version__
    assert str(config["model_dtype"]) == "torch.float32"


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
    written = json.loads(result_file.read_text())
    results = written["results"]["pll_unit_pairs"]
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="word_l2r", device="cpu")
    assert results["acc,none"] == pytest.approx(expected_accuracy(scorer))
    assert_records_how_it_was_scored(written["config"], tiny_bert_dir, "word_l2r")
    (samples_file,) = out.rglob("samples_pll_unit_pairs_*.jsonl")
    first = json.loads(samples_file.read_text().splitlines()[0])
    (first_score,) = scorer.score([PAIRS[0][0]])
    assert float(first["resps"][0][0][0]) == pytest.approx(first_score.logprob, abs=1e-5)


@pytest.mark.slow
def test_simple_evaluate_accepts_a_model_instance(pair_task, tiny_roberta_dir):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from pll_harness import PLLMaskedLM

    model = PLLMaskedLM(pretrained=tiny_roberta_dir, device="cpu", pll_metric="original")
    output = lm_eval.simple_evaluate(
        model=model, tasks=["pll_unit_pairs"], task_manager=TaskManager(include_path=str(pair_task))
    )
    accuracy = output["results"]["pll_unit_pairs"]["acc,none"]
    assert accuracy == pytest.approx(expected_accuracy(model.scorer))
    assert_records_how_it_was_scored(output["config"], tiny_roberta_dir, "original")


def test_user_task_includes_a_template_by_name(tmp_path):
    """The README's recipe: a few lines of YAML that include our template by name; and the
    packaged tasks are listed beside lm-eval's own although only the user's folder is given
    (one TaskManager, since indexing lm-eval's tasks takes seconds)."""
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
        f"manager = TaskManager(include_path={str(tmp_path)!r}); "
        "print(*(name in manager.all_tasks for name in ('blimp_pll', 'eventsadapt_pll', "
        "'hellaswag'))); "
        "task = manager.load(['my_agreement'])['tasks']['my_agreement']; "
        "docs = list(task.eval_docs); print(len(docs), task.doc_to_choice(docs[1])[1])"
    )
    out = run([sys.executable, "-c", code], tmp_path).stdout.strip().splitlines()
    assert out[-2:] == ["True True True", "2 The dogs barks at night."]
