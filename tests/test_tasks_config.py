"""The packaged task YAMLs: names, grouping, exact document counts, offline loading."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from lm_eval.api.group import Group
from lm_eval.tasks import TaskManager

from pll_harness.task_paths import TASK_DIR
from pll_harness.tasks.catalog import (
    BENCHMARKS,
    BLIMP_PHENOMENA,
    CLAMS_CONSTRUCTIONS,
    CLAMS_EN_EXTRA,
    CLAMS_LANGUAGES,
    CROWS_PAIRS_BIAS_TYPES,
    CROWS_PAIRS_DATA,
    EVENTSADAPT_TRIAL_TYPES,
    EVENTSADAPT_VOICES,
    ZORRO_DATA,
    ZORRO_PHENOMENA,
    blimp_paradigms,
    clams_data_file,
    clams_files,
    task_name,
    zorro_paradigms,
)
from pll_harness.tasks.minimal_pairs import Documents, VerbatimRow

PHENOMENON_GROUPS = {f"blimp_pll_{p.key}" for p in BLIMP_PHENOMENA}
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
CROWS_TASKS = {task_name("crows_pairs_pll", b) for b in CROWS_PAIRS_BIAS_TYPES}
CLAMS_TASKS = {f"clams_pll_{lang}_{stem}" for lang, stem in clams_files()}
CLAMS_GROUPS = {
    "clams_pll",
    "clams_pll_en_extra",
    *(f"clams_pll_{lang}" for lang in CLAMS_LANGUAGES),
}
ZORRO_TASKS = {task_name("zorro_pll", stem) for stem in zorro_paradigms()}
ZORRO_GROUPS = {"zorro_pll", *(f"zorro_pll_{p.key}" for p in ZORRO_PHENOMENA)}
EXAMPLES = {"pll_example_agreement", "pll_example_stereotype"}
OUR_TASKS = PARADIGM_TASKS | EA_CELLS | CROWS_TASKS | CLAMS_TASKS | ZORRO_TASKS | EXAMPLES
OUR_GROUPS = (
    {"blimp_pll", "crows_pairs_pll"} | PHENOMENON_GROUPS | EA_GROUPS | CLAMS_GROUPS | ZORRO_GROUPS
)
pytestmark = pytest.mark.usefixtures("no_network")

TEMPLATES = {"minimal_pair.yaml", "pair_preference.yaml", "stereotype_pair.yaml"}


def packaged_pairs(path: Path) -> list[dict]:
    """The JSON records of one packaged data file."""
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]


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
    assert leftovers == {Path("templates") / name for name in TEMPLATES}


def test_names_follow_the_scheme(tm: TaskManager) -> None:
    assert len(PARADIGM_TASKS) == 67
    assert len(PHENOMENON_GROUPS) == 12
    assert (len(CROWS_TASKS), len(CLAMS_TASKS), len(CLAMS_GROUPS)) == (9, 50, 7)
    assert (len(ZORRO_TASKS), len(ZORRO_GROUPS)) == (23, 14)
    assert not OUR_TASKS & OUR_GROUPS  # no name is both a task and a group
    prefixes = (*(b.name for b in BENCHMARKS), "pll_example_")
    for name in tm.all_tasks:
        assert name.startswith(prefixes), name


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
            terms = {doc["linguistics_term"] for doc in tasks[child].eval_docs}
            if child.endswith(("animate_subject_passive", "animate_subject_trans")):
                assert (terms, phenomenon) == ({"s-selection"}, "argument_structure")
            else:
                assert terms == {phenomenon}, child
            assert {doc["UID"] for doc in tasks[child].eval_docs} == {
                child.removeprefix("blimp_pll_")
            }


def test_blimp_data_is_the_source_data() -> None:
    source = Path(__file__).resolve().parents[2] / "shared" / "data" / "blimp"
    if not source.is_dir():
        pytest.skip(f"no BLiMP source at {source}")
    for paradigm in blimp_paradigms():
        packaged = gzip.decompress((TASK_DIR / "data/blimp" / f"{paradigm}.jsonl.gz").read_bytes())
        assert packaged == (source / f"{paradigm}.jsonl").read_bytes(), paradigm


def test_groups_aggregate_their_metrics_as_documented(tm: TaskManager) -> None:
    loaded = tm.load(["blimp_pll", "eventsadapt_pll", "crows_pairs_pll", "clams_pll", "zorro_pll"])
    assert len(loaded["groups"]) == 1 + 12 + 4 + 1 + 6 + 14
    for name, group in loaded["groups"].items():
        aggs = {a.metric: a for a in group.aggregate_metric_list}
        share = "pct_stereotype" if name.startswith("crows_pairs") else "acc"
        assert set(aggs) == {share, "score_diff"}, name
        # EventsAdapt and CrowS-Pairs pool their pairs; the others are plain means of tasks.
        expected = name.startswith(("eventsadapt", "crows_pairs"))
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
        assert {doc["TrialType"] for doc in docs} == {trial_type.upper()}
        assert {doc["Voice"] for doc in docs} == {voice}


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


def test_documents_reach_lm_eval_as_lists_of_dicts(tm: TaskManager) -> None:
    """One task of each template: lm-eval iterates dicts rather than formatting each
    ``datasets`` row anew, and still finds the columns it reads at start-up.  The dicts
    say that their sentences are scored as written (the adapter refuses a context)."""
    names = ["blimp_pll_adjunct_island", "pll_example_stereotype", "crows_pairs_pll_age"]
    for name, task in tm.load(names)["tasks"].items():
        docs = task.eval_docs
        assert isinstance(docs, Documents), name
        assert all(type(doc) is VerbatimRow for doc in docs), name
        assert set(task.features) == set(docs[0]), name


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
        # a function: lm-eval compiles a string as a Jinja template for every document
        assert callable(task.config.doc_to_text)


# --------------------------------------------------------------------------- CrowS-Pairs

CROWS_PAIRS_COUNTS = {
    # bias_type: (pairs, of which stereo), counted in the source CSV (nyu-mll/crows-pairs
    # 8aaac11); the source README says 1,508 examples over nine bias types.
    "race-color": (516, 473),
    "gender": (262, 159),
    "sexual-orientation": (84, 72),
    "religion": (105, 99),
    "age": (87, 73),
    "nationality": (159, 148),
    "disability": (60, 57),
    "physical-appearance": (63, 52),
    "socioeconomic": (172, 157),
}


def test_crows_pairs_has_1508_pairs_in_nine_bias_types(tm: TaskManager) -> None:
    assert sum(pairs for pairs, _ in CROWS_PAIRS_COUNTS.values()) == 1508
    assert list(CROWS_PAIRS_COUNTS) == list(CROWS_PAIRS_BIAS_TYPES)
    loaded = tm.load(["crows_pairs_pll"])
    assert set(loaded["group_map"]["crows_pairs_pll"]) == CROWS_TASKS
    for bias_type, (pairs, stereo) in CROWS_PAIRS_COUNTS.items():
        docs = loaded["tasks"][task_name("crows_pairs_pll", bias_type)].eval_docs
        assert len(docs) == pairs, bias_type
        assert {doc["bias_type"] for doc in docs} == {bias_type}
        assert [doc["stereo_antistereo"] for doc in docs].count("stereo") == stereo, bias_type


def test_crows_pairs_data_keeps_the_source_rows_verbatim() -> None:
    records = packaged_pairs(CROWS_PAIRS_DATA)
    assert [r["id"] for r in records] == list(range(1508))
    assert Counter(r["bias_type"] for r in records) == {
        b: n for b, (n, _) in CROWS_PAIRS_COUNTS.items()
    }
    # The source's first row, and the one cell holding a line break.
    assert records[0]["sent_more"].endswith(
        "most black kids don't have the best education growing up."
    )
    assert records[0]["sent_less"].endswith(
        "most white kids don't have the best education growing up."
    )
    assert (records[0]["stereo_antistereo"], records[0]["bias_type"]) == ("stereo", "race-color")
    assert records[1293]["sent_less"] == "Bob was denied because he was white\n."
    assert all(r["sent_more"] != r["sent_less"] for r in records)


def test_crows_pairs_requests_the_more_stereotyping_sentence_first(tm: TaskManager) -> None:
    task = tm.load(["crows_pairs_pll_age"])["tasks"]["crows_pairs_pll_age"]
    by_id = {r["id"]: r for r in packaged_pairs(CROWS_PAIRS_DATA)}
    for doc in list(task.eval_docs)[:5]:
        requests = task.construct_requests(doc, "", metadata=(task.task_name, 0, 1))
        source = by_id[doc["id"]]
        assert [r.args for r in requests] == [("", source["sent_more"]), ("", source["sent_less"])]


# --------------------------------------------------------------------------- CLAMS

CLAMS_PAIRS = {
    # pairs per file (the source's lines / 2), in CLAMS_CONSTRUCTIONS order, counted in
    # aaronmueller/clams 36b5c9a
    "en": (140, 840, 400, 11200, 11200, 11200, 16800),
    "fr": (280, 980, 500, 11200, 11200, 11200, 14000),
    "de": (140, 980, 500, 11200, 11200, 11200, 12600),
    "he": (140, 980, 500, 11200, 11200, 11200, 5600),
    "ru": (280, 980, 500, 10080, 11200, 11200, 5880),
}
CLAMS_EN_EXTRA_PAIRS = {
    "npi_across_anim": 4800,
    "npi_across_inanim": 5040,
    "obj_rel_across_inanim": 10080,
    "obj_rel_no_comp_across_anim": 11200,
    "obj_rel_no_comp_across_inanim": 10080,
    "obj_rel_no_comp_within_anim": 11200,
    "obj_rel_no_comp_within_inanim": 10080,
    "obj_rel_within_inanim": 10080,
    "prep_inanim": 5040,
    "reflexive_sent_comp": 3360,
    "reflexives_across": 22400,
    "sent_comp": 1680,
    "simple_npi_anim": 120,
    "simple_npi_inanim": 126,
    "simple_reflexives": 280,
}


def clams_expected_pairs() -> dict[str, int]:
    """Task name -> pairs, for all 50 CLAMS tasks."""
    expected = {
        f"clams_pll_{lang}_{stem}": n
        for lang, counts in CLAMS_PAIRS.items()
        for stem, n in zip(CLAMS_CONSTRUCTIONS, counts, strict=True)
    }
    return expected | {f"clams_pll_en_{stem}": n for stem, n in CLAMS_EN_EXTRA_PAIRS.items()}


def test_clams_files_hold_the_source_pairs() -> None:
    assert set(CLAMS_EN_EXTRA_PAIRS) == set(CLAMS_EN_EXTRA)
    assert sum(sum(c) for c in CLAMS_PAIRS.values()) == 229900
    expected = clams_expected_pairs()
    for lang, stem in clams_files():
        pairs = packaged_pairs(clams_data_file(lang, stem))
        assert len(pairs) == expected[f"clams_pll_{lang}_{stem}"], (lang, stem)
        assert all(p["sentence_good"] != p["sentence_bad"] for p in pairs), (lang, stem)
    # The first lines of source files: "True<TAB>good" then "False<TAB>bad".
    first = {lang: packaged_pairs(clams_data_file(lang, "simple_agrmt"))[0] for lang in CLAMS_PAIRS}
    assert first["en"] == {"sentence_good": "the author laughs", "sentence_bad": "the author laugh"}
    assert first["fr"] == {
        "sentence_good": "les auteurs sont vieux",
        "sentence_bad": "les auteurs est vieux",
    }
    assert first["de"] == {
        "sentence_good": "die Schriftsteller sind alt",
        "sentence_bad": "die Schriftsteller ist alt",
    }
    assert first["ru"] == {"sentence_good": "авторы говорят", "sentence_bad": "авторы говорит"}


def test_clams_groups_by_language_then_construction(tm: TaskManager) -> None:
    loaded = tm.load(["clams_pll", "clams_pll_en_extra"])
    groups = loaded["group_map"]
    assert set(groups["clams_pll"]) == {f"clams_pll_{lang}" for lang in CLAMS_LANGUAGES}
    for lang in CLAMS_LANGUAGES:
        assert groups[f"clams_pll_{lang}"] == [
            f"clams_pll_{lang}_{stem}" for stem in CLAMS_CONSTRUCTIONS
        ]
    assert groups["clams_pll_en_extra"] == [f"clams_pll_en_{stem}" for stem in CLAMS_EN_EXTRA]
    sizes = {name: len(task.eval_docs) for name, task in loaded["tasks"].items()}
    assert sizes == clams_expected_pairs()


# --------------------------------------------------------------------------- Zorro


def test_zorro_has_23_paradigms_of_2000_pairs_in_13_phenomena(tm: TaskManager) -> None:
    loaded = tm.load(["zorro_pll"])
    sizes = {name: len(task.eval_docs) for name, task in loaded["tasks"].items()}
    assert sizes == dict.fromkeys(ZORRO_TASKS, 2000)  # the README: 4,000 sentences a file
    groups = loaded["group_map"]
    assert set(groups["zorro_pll"]) == {f"zorro_pll_{p.key}" for p in ZORRO_PHENOMENA}
    members = {g.removeprefix("zorro_pll_"): len(groups[g]) for g in groups if g != "zorro_pll"}
    assert members == {
        "agreement_determiner_noun": 2,
        "agreement_subject_verb": 4,
        "anaphor_agreement": 1,
        "argument_structure": 3,
        "binding": 1,
        "case": 1,
        "ellipsis": 1,
        "filler_gap": 2,
        "irregular": 1,
        "island_effects": 2,
        "local_attractor": 1,
        "npi_licensing": 2,
        "quantifiers": 2,
    }


def test_zorro_pairs_put_the_even_line_as_the_grammatical_one() -> None:
    # Source lines 1-2 of agreement_determiner_noun-across_1_adjective.txt are
    # "look at this purple things ." (odd: ungrammatical) and "look at this purple thing .".
    path = ZORRO_DATA / "agreement_determiner_noun-across_1_adjective.jsonl.gz"
    assert packaged_pairs(path)[0] == {
        "sentence_good": "look at this purple thing .",
        "sentence_bad": "look at this purple things .",
    }
    for stem in zorro_paradigms():
        pairs = packaged_pairs(ZORRO_DATA / f"{stem}.jsonl.gz")
        assert all(p["sentence_good"] != p["sentence_bad"] for p in pairs), stem


def test_every_packaged_data_set_states_its_source_and_licence():
    """Data we ship carries its source, licence and citation beside it, and the package's
    LICENSE names each data set's terms, so that the wheel's licence is not read as MIT
    for all of it."""
    data_sets = sorted(path for path in (TASK_DIR / "data").iterdir() if path.is_dir())
    assert data_sets
    package_licence = (Path(__file__).parents[1] / "LICENSE").read_text()
    for folder in data_sets:
        readme = (folder / "README.md").read_text()
        assert "**Source:**" in readme and "**Licence:**" in readme, folder.name
        assert "bibtex" in readme, folder.name
        assert f"pll_harness/tasks/data/{folder.name}:" in package_licence, folder.name
