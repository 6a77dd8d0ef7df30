"""Metrics and group aggregation, through lm_eval.simple_evaluate with a scripted fake model.

The fake model's scores are chosen per request, so every expected number is known in
advance: ties, strict accuracy, score differences, and how groups average their members.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from statistics import mean

import lm_eval
import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from lm_eval.tasks import TaskManager

from pll_harness.task_paths import TASK_DIR
from pll_harness.tasks._generate import BLIMP_PHENOMENA, blimp_paradigms

Score = Callable[[Instance], float]


class ScriptedLM(LM):
    """An lm-eval model whose log-likelihoods come from ``score(request)``."""

    def __init__(self, score: Score) -> None:
        super().__init__()
        self.score = score
        self.requests: list[tuple[str, str]] = []

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list:
        self.requests += [r.args for r in requests]
        return [(float(self.score(r)), False) for r in requests]

    def loglikelihood_rolling(self, requests: list[Instance], disable_tqdm: bool = False) -> list:
        raise NotImplementedError("minimal-pair tasks only ask for loglikelihood")

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list:
        raise NotImplementedError("minimal-pair tasks only ask for loglikelihood")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def tm() -> TaskManager:
    return TaskManager(include_defaults=False, include_path=str(TASK_DIR))


def evaluate(model: LM, tasks: list[str], tm: TaskManager, **kwargs: object) -> dict:
    out = lm_eval.simple_evaluate(
        model=model, tasks=tasks, task_manager=tm, bootstrap_iters=0, **kwargs
    )
    assert out is not None
    return out


# --------------------------------------------------------------------------- BLiMP

PARADIGMS = blimp_paradigms()


def n_docs(k: int) -> int:
    """Paradigm k is evaluated on 2..8 pairs, so sizes differ and weighting would show."""
    return 2 + (k * 5) % 7


def bad_score(k: int, i: int) -> float:
    """Good always scores 0; bad scores -1 (right), 0 (a tie: wrong) or +1 (wrong)."""
    return (-1.0, 0.0, 1.0, -1.0)[(k + i * (k % 3 + 1)) % 4]


def blimp_score(request: Instance) -> float:
    if request.idx == 0:
        return 0.0
    k = PARADIGMS.index(request.task_name.removeprefix("blimp_pll_"))
    return bad_score(k, request.doc_id)


def test_blimp_groups_are_unweighted_means_of_paradigms(tm: TaskManager) -> None:
    # Give paradigms different sizes (as --limit on a short file would): a size-weighted mean
    # would then differ.  Truncating the loaded data is quicker than lm-eval's `samples=`,
    # which walks all 67,000 rows.
    group = tm.load(["blimp_pll"])["groups"]["blimp_pll"]
    for task in group.get_all_tasks():
        k = PARADIGMS.index(task.task_name.removeprefix("blimp_pll_"))
        task.dataset["test"] = task.dataset["test"].select(range(n_docs(k)))
    out = evaluate(ScriptedLM(blimp_score), [group], tm)
    results = out["results"]

    acc = {p: mean(bad_score(k, i) < 0 for i in range(n_docs(k))) for k, p in enumerate(PARADIGMS)}
    diff = {p: mean(-bad_score(k, i) for i in range(n_docs(k))) for k, p in enumerate(PARADIGMS)}
    for p in PARADIGMS:
        assert results[f"blimp_pll_{p}"]["acc,none"] == pytest.approx(acc[p]), p
        assert results[f"blimp_pll_{p}"]["score_diff,none"] == pytest.approx(diff[p]), p
        assert results[f"blimp_pll_{p}"]["sample_len"] == n_docs(PARADIGMS.index(p))

    phenomenon_acc = {}
    for phenomenon, (_, members) in BLIMP_PHENOMENA.items():
        phenomenon_acc[phenomenon] = mean(acc[p] for p in members)
        row = results[f"blimp_pll_{phenomenon}"]
        assert row["acc,none"] == pytest.approx(phenomenon_acc[phenomenon]), phenomenon
        assert row["score_diff,none"] == pytest.approx(mean(diff[p] for p in members))

    overall = mean(acc.values())
    assert results["blimp_pll"]["acc,none"] == pytest.approx(overall)
    assert results["blimp_pll"]["score_diff,none"] == pytest.approx(mean(diff.values()))
    # The scores were chosen so that the wrong averages would give other numbers.
    pooled = sum(acc[p] * n_docs(k) for k, p in enumerate(PARADIGMS)) / sum(
        n_docs(k) for k in range(len(PARADIGMS))
    )
    assert abs(overall - mean(phenomenon_acc.values())) > 1e-3
    assert abs(overall - pooled) > 1e-3


def test_ties_are_wrong_where_lm_eval_argmax_would_say_right(tm: TaskManager) -> None:
    model = ScriptedLM(lambda r: -3.25)
    out = evaluate(model, ["blimp_pll_ellipsis"], tm, limit=5)
    for name in ("blimp_pll_ellipsis", "blimp_pll_ellipsis_n_bar_1", "blimp_pll_ellipsis_n_bar_2"):
        assert out["results"][name]["acc,none"] == 0.0
        assert out["results"][name]["score_diff,none"] == 0.0
    assert len(model.requests) == 2 * 2 * 5


def test_log_samples_keep_both_scores_and_the_difference(tm: TaskManager) -> None:
    model = ScriptedLM(lambda r: -10.0 - r.idx - 0.5 * r.doc_id)
    out = evaluate(model, ["blimp_pll_adjunct_island"], tm, limit=3, log_samples=True)
    samples = out["samples"]["blimp_pll_adjunct_island"]
    assert [s["doc_id"] for s in samples] == [0, 1, 2]
    for s in samples:
        good, bad = (resp[0] for resp in s["filtered_resps"])
        assert (good, bad) == (-10.0 - 0.5 * s["doc_id"], -11.0 - 0.5 * s["doc_id"])
        assert s["score_diff"] == 1.0
        assert s["acc"] == 1.0
        assert [a[1] for a in s["arguments"]] == [
            s["doc"]["sentence_good"],
            s["doc"]["sentence_bad"],
        ]


# --------------------------------------------------------------------------- EventsAdapt


def eventsadapt_score(request: Instance) -> float:
    """Right on AI actives and on even items elsewhere, a tie on items divisible by 5."""
    if request.idx == 0:
        return 0.0
    doc = request.doc
    if doc["ItemNum"] % 5 == 0:
        return 0.0
    right = (doc["TrialType"] == "AI" and doc["Voice"] == "active") or doc["ItemNum"] % 2 == 0
    return -1.0 if right else 2.0


def expected_eventsadapt(docs: list[dict]) -> tuple[float, float]:
    bad = [eventsadapt_score(_FakeRequest(d)) for d in docs]
    return mean(b < 0 for b in bad), mean(-b for b in bad)


class _FakeRequest:
    idx = 1

    def __init__(self, doc: dict) -> None:
        self.doc = doc


def test_eventsadapt_groups_pool_pairs(tm: TaskManager) -> None:
    loaded = tm.load(["eventsadapt_pll"])
    docs = {name: list(t.eval_docs) for name, t in loaded["tasks"].items()}
    out = evaluate(ScriptedLM(eventsadapt_score), ["eventsadapt_pll"], tm)
    results = out["results"]
    everything = [d for ds in docs.values() for d in ds]
    assert len(everything) == 782
    acc, diff = expected_eventsadapt(everything)
    assert results["eventsadapt_pll"]["acc,none"] == pytest.approx(acc)
    assert results["eventsadapt_pll"]["score_diff,none"] == pytest.approx(diff)
    for trial_type, n in (("ai", 256), ("aan", 258), ("aar", 268)):
        members = [d for name, ds in docs.items() if f"_{trial_type}_" in name for d in ds]
        assert len(members) == n
        acc, diff = expected_eventsadapt(members)
        assert results[f"eventsadapt_pll_{trial_type}"]["acc,none"] == pytest.approx(acc)
        assert results[f"eventsadapt_pll_{trial_type}"]["score_diff,none"] == pytest.approx(diff)
        assert results[f"eventsadapt_pll_{trial_type}"]["sample_len"] == n

    by_voice = evaluate(ScriptedLM(eventsadapt_score), ["eventsadapt_pll_by_voice"], tm)["results"]
    assert by_voice["eventsadapt_pll_by_voice"]["acc,none"] == pytest.approx(
        results["eventsadapt_pll"]["acc,none"]
    )
    for voice in ("active", "passive"):
        members = [d for d in everything if d["Voice"] == voice]
        assert len(members) == 391
        assert by_voice[f"eventsadapt_pll_{voice}"]["acc,none"] == pytest.approx(
            expected_eventsadapt(members)[0]
        )


# --------------------------------------------------------------------------- the recipe

RECIPE = """\
task: {task}
include: {template}
dataset_kwargs:
  data_files: {data}
  {a_key}: {a_col}
  {b_key}: {b_col}
"""


def test_user_recipe_runs_from_its_own_folder(tmp_path: Path) -> None:
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    (folder / "agreement.csv").write_text(
        "ok,not_ok\nThe dogs bark.,The dogs barks.\nA cat sleeps.,A cat sleep.\n", encoding="utf-8"
    )
    (folder / "stereo.jsonl").write_text(
        '{"s": "She is a nurse.", "a": "He is a nurse."}\n'
        '{"s": "He is a pilot.", "a": "She is a pilot."}\n'
        '{"s": "She is a maid.", "a": "He is a maid."}\n',
        encoding="utf-8",
    )
    (folder / "my_agreement.yaml").write_text(
        RECIPE.format(
            task="my_agreement",
            template=TASK_DIR / "templates/minimal_pair.yaml",
            data="agreement.csv",
            a_key="good",
            a_col="ok",
            b_key="bad",
            b_col="not_ok",
        )
    )
    (folder / "my_stereo.yaml").write_text(
        RECIPE.format(
            task="my_stereo",
            template=TASK_DIR / "templates/pair_preference.yaml",
            data="stereo.jsonl",
            a_key="first",
            a_col="s",
            b_key="second",
            b_col="a",
        )
    )
    tm = TaskManager(include_defaults=False, include_path=[str(TASK_DIR), str(folder)])
    scores = {
        "The dogs bark.": -5.0,
        "The dogs barks.": -6.0,
        "A cat sleeps.": -4.0,
        "A cat sleep.": -4.0,  # tie: wrong
        "She is a nurse.": -3.0,
        "He is a nurse.": -3.5,
        "He is a pilot.": -2.0,
        "She is a pilot.": -2.5,
        "She is a maid.": -4.0,
        "He is a maid.": -3.0,
    }
    model = ScriptedLM(lambda r: scores[r.args[1]])
    results = evaluate(model, ["my_agreement", "my_stereo"], tm)["results"]
    assert results["my_agreement"]["acc,none"] == 0.5
    assert results["my_agreement"]["score_diff,none"] == pytest.approx(0.5)
    assert results["my_stereo"]["first_preferred,none"] == pytest.approx(2 / 3)
    assert results["my_stereo"]["score_diff,none"] == pytest.approx((0.5 + 0.5 - 1.0) / 3)
    assert "acc,none" not in results["my_stereo"]


def test_packaged_examples_run(tm: TaskManager) -> None:
    model = ScriptedLM(lambda r: -float(len(r.args[1])))
    results = evaluate(model, ["pll_example_agreement", "pll_example_stereotype"], tm)["results"]
    assert results["pll_example_agreement"]["sample_len"] == 6
    assert results["pll_example_stereotype"]["sample_len"] == 6
    assert 0.0 <= results["pll_example_stereotype"]["first_preferred,none"] <= 1.0
