"""The packaged task YAMLs: names, grouping, exact document counts, offline loading."""

from __future__ import annotations

import gzip
import json
import socket
from collections import Counter
from pathlib import Path

import pytest
from lm_eval.api.group import Group
from lm_eval.tasks import TaskManager

from pll_harness.task_paths import TASK_DIR
from pll_harness.tasks._generate import (
    BLIMP_PHENOMENA,
    EVENTSADAPT_TRIAL_TYPES,
    EVENTSADAPT_VOICES,
    blimp_paradigms,
)

PHENOMENON_GROUPS = {f"blimp_pll_{p}" for p in BLIMP_PHENOMENA}
PARADIGM_TASKS = {f"blimp_pll_{p}" for p in blimp_paradigms()}
EA_CELLS = {
    f"eventsadapt_pll_{t.lower()}_{v}" for t in EVENTSADAPT_TRIAL_TYPES for v in EVENTSADAPT_VOICES
}
EA_GROUPS = {
    "eventsadapt_pll",
    "eventsadapt_pll_by_voice",
    *(f"eventsadapt_pll_{t.lower()}" for t in EVENTSADAPT_TRIAL_TYPES),
    *(f"eventsadapt_pll_{v}" for v in EVENTSADAPT_VOICES),
}
EXAMPLES = {"pll_example_agreement", "pll_example_stereotype"}
OUR_TASKS = PARADIGM_TASKS | EA_CELLS | EXAMPLES
OUR_GROUPS = {"blimp_pll"} | PHENOMENON_GROUPS | EA_GROUPS


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a task must never reach the Hugging Face Hub (or anything else)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def tm() -> TaskManager:
    return TaskManager(include_defaults=False, include_path=str(TASK_DIR))


def test_every_yaml_is_indexed_or_a_template(tm: TaskManager) -> None:
    assert set(tm.all_subtasks) == OUR_TASKS
    assert set(tm.all_groups) == OUR_GROUPS
    indexed = {e.yaml_path.resolve() for e in tm.task_index.values() if e.yaml_path}
    leftovers = {p.relative_to(TASK_DIR) for p in TASK_DIR.rglob("*.yaml")} - {
        p.relative_to(TASK_DIR) for p in indexed
    }
    assert leftovers == {
        Path("templates/minimal_pair.yaml"),
        Path("templates/pair_preference.yaml"),
    }


def test_names_follow_the_scheme(tm: TaskManager) -> None:
    assert len(PARADIGM_TASKS) == 67
    assert len(PHENOMENON_GROUPS) == 12
    assert not PARADIGM_TASKS & PHENOMENON_GROUPS
    for name in tm.all_tasks:
        assert name.startswith(("blimp_pll", "eventsadapt_pll", "pll_example_")), name


@pytest.mark.slow
def test_no_name_collides_with_lm_eval_builtins() -> None:
    builtin = TaskManager(include_defaults=True)  # indexes all of lm-eval's tasks (~30 s)
    # With the start-up hook installed our folder is indexed too: keep lm-eval's own entries.
    theirs = {
        name
        for name, entry in builtin.task_index.items()
        if entry.yaml_path is None or TASK_DIR not in entry.yaml_path.resolve().parents
    }
    assert len(theirs) > 1000
    assert not (OUR_TASKS | OUR_GROUPS) & theirs


def test_blimp_has_67_paradigms_of_1000_pairs_in_12_phenomena(tm: TaskManager) -> None:
    loaded = tm.load(["blimp_pll"])
    tasks = loaded["tasks"]
    assert set(tasks) == PARADIGM_TASKS
    assert {name: len(t.eval_docs) for name, t in tasks.items()} == dict.fromkeys(tasks, 1000)
    assert set(loaded["group_map"]["blimp_pll"]) == PHENOMENON_GROUPS
    sizes = {g: len(loaded["group_map"][g]) for g in PHENOMENON_GROUPS}
    assert sizes == {
        "blimp_pll_anaphor_agreement": 2,
        "blimp_pll_argument_structure": 9,
        "blimp_pll_binding": 7,
        "blimp_pll_control_raising": 5,
        "blimp_pll_determiner_noun_agreement": 8,
        "blimp_pll_ellipsis": 2,
        "blimp_pll_filler_gap_dependency": 7,
        "blimp_pll_irregular_forms": 2,
        "blimp_pll_island_effects": 8,
        "blimp_pll_npi_licensing": 7,
        "blimp_pll_quantifiers": 4,
        "blimp_pll_subject_verb_agreement": 6,
    }
    # Each paradigm sits in the phenomenon its data names, s-selection under argument structure.
    for group in PHENOMENON_GROUPS:
        phenomenon = group.removeprefix("blimp_pll_")
        for child in loaded["group_map"][group]:
            terms = set(tasks[child].eval_docs["linguistics_term"])
            if child.endswith(("animate_subject_passive", "animate_subject_trans")):
                assert (terms, phenomenon) == ({"s-selection"}, "argument_structure")
            else:
                assert terms == {phenomenon}, child
            assert set(tasks[child].eval_docs["UID"]) == {child.removeprefix("blimp_pll_")}


def test_blimp_data_is_the_source_data() -> None:
    source = Path(__file__).resolve().parents[2] / "shared" / "data" / "blimp"
    if not source.is_dir():
        pytest.skip(f"no BLiMP source at {source}")
    for paradigm in blimp_paradigms():
        packaged = gzip.decompress((TASK_DIR / "data/blimp" / f"{paradigm}.jsonl.gz").read_bytes())
        assert packaged == (source / f"{paradigm}.jsonl").read_bytes(), paradigm


def test_groups_aggregate_acc_and_score_diff_as_documented(tm: TaskManager) -> None:
    loaded = tm.load(["blimp_pll", "eventsadapt_pll"])
    for name, group in loaded["groups"].items():
        aggs = {a.metric: a for a in group.aggregate_metric_list}
        assert set(aggs) == {"acc", "score_diff"}, name
        # BLiMP: plain mean of paradigms; EventsAdapt: pooled over pairs.
        expected = name.startswith("eventsadapt")
        assert all(a.weight_by_size is expected for a in aggs.values()), name


def test_eventsadapt_has_782_pairs_by_trial_type_and_voice(tm: TaskManager) -> None:
    loaded = tm.load(["eventsadapt_pll"])
    sizes = {name: len(t.eval_docs) for name, t in loaded["tasks"].items()}
    assert set(sizes) == EA_CELLS
    assert sum(sizes.values()) == 782
    groups: dict[str, Group] = loaded["groups"]
    pairs = {name: sum(len(t.eval_docs) for t in g.get_all_tasks()) for name, g in groups.items()}
    assert pairs == {
        "eventsadapt_pll": 782,
        "eventsadapt_pll_ai": 256,
        "eventsadapt_pll_aan": 258,
        "eventsadapt_pll_aar": 268,
    }
    by_voice = tm.load(["eventsadapt_pll_by_voice"])["groups"]
    assert {n: sum(len(t.eval_docs) for t in g.get_all_tasks()) for n, g in by_voice.items()} == {
        "eventsadapt_pll_by_voice": 782,
        "eventsadapt_pll_active": 391,
        "eventsadapt_pll_passive": 391,
    }
    for name, task in loaded["tasks"].items():
        trial_type, voice = name.removeprefix("eventsadapt_pll_").split("_")
        docs = task.eval_docs
        assert set(docs["TrialType"]) == {trial_type.upper()}
        assert set(docs["Voice"]) == {voice}


def test_eventsadapt_pairs_match_the_source_csv() -> None:
    import csv

    source = Path(__file__).resolve().parents[2] / "shared/data/eventsadapt"
    source = source / "clean_EventsAdapt_SentenceSet.csv"
    if not source.is_file():
        pytest.skip(f"no EventsAdapt source at {source}")
    with source.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    packaged = gzip.decompress(
        (TASK_DIR / "data/eventsadapt/eventsadapt_pairs.jsonl.gz").read_bytes()
    )
    pairs = [json.loads(line) for line in packaged.decode("utf-8").splitlines()]
    assert len(rows) == 1564
    assert len(pairs) == 782
    sentences = Counter(
        (r["ItemNum"], r["Voice"], r["TrialType"], r["Plausibility"], r["Sentence"]) for r in rows
    )
    rebuilt = Counter()
    for p in pairs:
        key = (str(p["ItemNum"]), p["Voice"], p["TrialType"])
        rebuilt[(*key, "Plausible", p["sentence_good"])] += 1
        rebuilt[(*key, "Implausible", p["sentence_bad"])] += 1
    assert rebuilt == sentences


def test_sentences_are_requested_verbatim_with_no_context(tm: TaskManager) -> None:
    tasks = tm.load(["blimp_pll_adjunct_island", "pll_example_agreement"])["tasks"]
    for task in tasks.values():
        doc = task.eval_docs[0]
        ctx = task.fewshot_context(doc, num_fewshot=0)
        assert ctx == ""
        requests = task.construct_requests(doc, ctx, metadata=(task.task_name, 0, 1))
        assert [r.args for r in requests] == [
            ("", doc["sentence_good"]),
            ("", doc["sentence_bad"]),
        ]
        assert task.config.num_fewshot == 0
