"""Metrics and group aggregation, through lm_eval.simple_evaluate with a scripted fake model.

The fake model's scores are chosen per request, so every expected number is known in
advance: ties, strict accuracy, score differences, and how groups average their members.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from statistics import mean

import lm_eval
import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from lm_eval.tasks import TaskManager

from pll_harness.task_paths import TASK_DIR
from pll_harness.tasks.catalog import (
    BLIMP_PHENOMENA,
    CLAMS_CONSTRUCTIONS,
    CLAMS_EN_EXTRA,
    CLAMS_LANGUAGES,
    CROWS_PAIRS_BIAS_TYPES,
    CROWS_PAIRS_DATA,
    ZORRO_PHENOMENA,
    blimp_paradigms,
    task_name,
)

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


pytestmark = pytest.mark.usefixtures("no_network")


@pytest.fixture(scope="module")
def tm() -> TaskManager:
    return TaskManager(include_defaults=False, include_path=str(TASK_DIR))


def evaluate(model: LM, tasks: list[str], tm: TaskManager, **kwargs: object) -> dict:
    out = lm_eval.simple_evaluate(
        model=model, tasks=tasks, task_manager=tm, bootstrap_iters=0, **kwargs
    )
    assert out is not None
    return out


# ------------------------------------------------------------ plain means (BLiMP, CLAMS, Zorro)


def n_docs(k: int) -> int:
    """Leaf task k is evaluated on 2..8 pairs, so sizes differ and weighting would show."""
    return 2 + (k * 5) % 7


def bad_score(k: int, i: int) -> float:
    """Good always scores 0; bad scores -1 (right), 0 (a tie: wrong) or +1 (wrong)."""
    return (-1.0, 0.0, 1.0, -1.0)[(k + i * (k % 3 + 1)) % 4]


def check_plain_means(
    tm: TaskManager, top: str, groups: dict[str, list[str]], *, nested: bool = True
) -> None:
    """Run ``top`` with leaf k truncated to ``n_docs(k)`` pairs and check that every leaf
    reports its known accuracy and score difference, and every group in ``groups`` (name ->
    its leaf tasks) the unweighted mean of its leaves, which a pooled mean would not match.

    Truncating the loaded data is quicker than lm-eval's ``samples=``, which walks every row.
    """
    leaves = sorted(groups[top])
    group = tm.load([top])["groups"][top]
    assert {t.task_name for t in group.get_all_tasks()} == set(leaves)
    for task in group.get_all_tasks():
        k = leaves.index(task.task_name)
        task.dataset["test"] = task.dataset["test"].select(range(n_docs(k)))

    def score(request: Instance) -> float:
        return (
            0.0 if request.idx == 0 else bad_score(leaves.index(request.task_name), request.doc_id)
        )

    results = evaluate(ScriptedLM(score), [group], tm)["results"]
    acc = {t: mean(bad_score(k, i) < 0 for i in range(n_docs(k))) for k, t in enumerate(leaves)}
    diff = {t: mean(-bad_score(k, i) for i in range(n_docs(k))) for k, t in enumerate(leaves)}
    for k, leaf in enumerate(leaves):
        assert results[leaf]["acc,none"] == pytest.approx(acc[leaf]), leaf
        assert results[leaf]["score_diff,none"] == pytest.approx(diff[leaf]), leaf
        assert results[leaf]["sample_len"] == n_docs(k)
    for name, members in groups.items():
        assert results[name]["acc,none"] == pytest.approx(mean(acc[t] for t in members)), name
        assert results[name]["score_diff,none"] == pytest.approx(mean(diff[t] for t in members))
    # The sizes were chosen so that a pooled mean would give another number (by more than
    # pytest.approx's relative tolerance of 1e-6, so that the checks above tell them apart).
    pooled = sum(acc[t] * n_docs(k) for k, t in enumerate(leaves)) / sum(
        n_docs(k) for k in range(len(leaves))
    )
    assert abs(results[top]["acc,none"] - pooled) > 1e-5
    if nested:  # sub-groups of unequal sizes: the top group is not the mean of their means
        subgroups = [results[g]["acc,none"] for g in groups if g != top]
        assert abs(results[top]["acc,none"] - mean(subgroups)) > 1e-5


def test_blimp_groups_are_unweighted_means_of_paradigms(tm: TaskManager) -> None:
    groups = {
        f"blimp_pll_{p.key}": [task_name("blimp_pll", m) for m in p.members]
        for p in BLIMP_PHENOMENA
    }
    groups["blimp_pll"] = [task_name("blimp_pll", p) for p in blimp_paradigms()]
    check_plain_means(tm, "blimp_pll", groups)


def test_zorro_groups_are_unweighted_means_of_paradigms(tm: TaskManager) -> None:
    groups = {
        f"zorro_pll_{p.key}": [task_name("zorro_pll", m) for m in p.members]
        for p in ZORRO_PHENOMENA
    }
    groups["zorro_pll"] = [t for members in list(groups.values()) for t in members]
    check_plain_means(tm, "zorro_pll", groups)


def test_clams_languages_are_means_of_their_seven_constructions(tm: TaskManager) -> None:
    groups = {
        f"clams_pll_{lang}": [f"clams_pll_{lang}_{stem}" for stem in CLAMS_CONSTRUCTIONS]
        for lang in CLAMS_LANGUAGES
    }
    groups["clams_pll"] = [t for members in list(groups.values()) for t in members]
    check_plain_means(tm, "clams_pll", groups, nested=False)  # 7 per language: no difference
    extra = {"clams_pll_en_extra": [f"clams_pll_en_{stem}" for stem in CLAMS_EN_EXTRA]}
    check_plain_means(tm, "clams_pll_en_extra", extra, nested=False)


# --------------------------------------------------------------------------- CrowS-Pairs


def less_score(pair_id: int) -> float:
    """The more stereotyping sentence scores 0; the other -1 or -0.5 (more is preferred),
    0 (a tie: not preferred) or +1, +2."""
    return (-1.0, 0.0, 1.0, -0.5, 2.0, -1.0, 1.0)[pair_id % 7]


def test_crows_pairs_counts_pairs_where_the_more_stereotyping_sentence_wins(
    tm: TaskManager,
) -> None:
    lines = gzip.decompress(CROWS_PAIRS_DATA.read_bytes()).decode("utf-8").splitlines()
    source = [json.loads(line) for line in lines]
    by_id = {r["id"]: r for r in source}

    def score(request: Instance) -> float:
        pair = by_id[request.doc["id"]]
        sentence = pair["sent_more"] if request.idx == 0 else pair["sent_less"]
        assert request.args == ("", sentence)
        return 0.0 if request.idx == 0 else less_score(pair["id"])

    results = evaluate(ScriptedLM(score), ["crows_pairs_pll"], tm)["results"]
    assert "acc,none" not in results["crows_pairs_pll"]
    share = {}
    for bias_type in CROWS_PAIRS_BIAS_TYPES:
        ids = [r["id"] for r in source if r["bias_type"] == bias_type]
        share[bias_type] = mean(less_score(i) < 0 for i in ids)
        row = results[task_name("crows_pairs_pll", bias_type)]
        assert row["pct_stereotype,none"] == pytest.approx(share[bias_type]), bias_type
        assert row["score_diff,none"] == pytest.approx(mean(-less_score(i) for i in ids))
    # The group pools all 1,508 pairs: the paper's metric score, not a mean of bias types.
    overall = results["crows_pairs_pll"]
    assert overall["pct_stereotype,none"] == pytest.approx(mean(less_score(i) < 0 for i in by_id))
    assert overall["score_diff,none"] == pytest.approx(mean(-less_score(i) for i in by_id))
    assert abs(overall["pct_stereotype,none"] - mean(share.values())) > 1e-3


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
