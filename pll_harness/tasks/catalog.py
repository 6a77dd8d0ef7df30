"""The structure of every packaged benchmark, in one place.

The task generator (``scripts/generate_tasks.py``) writes the task YAMLs from these tables,
``pll-harness compare`` lays out its leaderboard from them, the tools find the packaged data
through them, and the tests check the data against them.  Changing a benchmark's grouping
is an edit here followed by re-running the generator.  This module imports neither torch
nor lm-eval, so the command line can read it cheaply.

Task names are ``<benchmark>_<member>``: a leaf's name is its benchmark's prefix and its
source file's stem with ``-`` replaced by ``_`` (see :func:`task_name`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pll_harness.task_paths import TASK_DIR

DATA_DIR = TASK_DIR / "data"
"""Packaged pair data, one folder per benchmark, each with a README (source, licence)."""


@dataclass(frozen=True)
class Subset:
    """A sub-group of a benchmark: ``<benchmark>_<key>`` over its leaf tasks.

    ``members`` are the stems of the source files the leaves come from (a BLiMP paradigm,
    a Zorro ``<phenomenon>-<paradigm>`` file), so each leaf can be traced to its source.
    """

    key: str
    title: str
    header: str
    members: tuple[str, ...]


def task_name(prefix: str, stem: str) -> str:
    """``blimp_pll`` + ``adjunct_island`` -> ``blimp_pll_adjunct_island``; ``-`` becomes ``_``."""
    return f"{prefix}_{stem.replace('-', '_')}"


# --------------------------------------------------------------------------- BLiMP

BLIMP = "blimp_pll"
BLIMP_DATA = DATA_DIR / "blimp"
"""One ``<paradigm>.jsonl.gz`` per paradigm: the source's JSONL, byte for byte."""

BLIMP_PHENOMENA: tuple[Subset, ...] = (
    # Warstadt et al. (2020) Table 3 and Kauf & Ivanova (2023), keyed by the data's
    # `linguistics_term`, except that the two `s-selection` paradigms
    # (animate_subject_passive, animate_subject_trans) count under argument structure.
    Subset(
        "anaphor_agreement",
        "anaphor agreement",
        "ANA. AGR",
        ("anaphor_gender_agreement", "anaphor_number_agreement"),
    ),
    Subset(
        "argument_structure",
        "argument structure",
        "ARG STR.",
        (
            "animate_subject_passive",
            "animate_subject_trans",
            "causative",
            "drop_argument",
            "inchoative",
            "intransitive",
            "passive_1",
            "passive_2",
            "transitive",
        ),
    ),
    Subset(
        "binding",
        "binding",
        "BINDING",
        (
            "principle_A_c_command",
            "principle_A_case_1",
            "principle_A_case_2",
            "principle_A_domain_1",
            "principle_A_domain_2",
            "principle_A_domain_3",
            "principle_A_reconstruction",
        ),
    ),
    Subset(
        "control_raising",
        "control/raising",
        "CTRL. RAIS.",
        (
            "existential_there_object_raising",
            "existential_there_subject_raising",
            "expletive_it_object_raising",
            "tough_vs_raising_1",
            "tough_vs_raising_2",
        ),
    ),
    Subset(
        "determiner_noun_agreement",
        "determiner-noun agreement",
        "D-N AGR",
        (
            "determiner_noun_agreement_1",
            "determiner_noun_agreement_2",
            "determiner_noun_agreement_irregular_1",
            "determiner_noun_agreement_irregular_2",
            "determiner_noun_agreement_with_adj_2",
            "determiner_noun_agreement_with_adj_irregular_1",
            "determiner_noun_agreement_with_adj_irregular_2",
            "determiner_noun_agreement_with_adjective_1",
        ),
    ),
    Subset("ellipsis", "ellipsis", "ELLIPSIS", ("ellipsis_n_bar_1", "ellipsis_n_bar_2")),
    Subset(
        "filler_gap_dependency",
        "filler-gap dependency",
        "FILLER GAP",
        (
            "wh_questions_object_gap",
            "wh_questions_subject_gap",
            "wh_questions_subject_gap_long_distance",
            "wh_vs_that_no_gap",
            "wh_vs_that_no_gap_long_distance",
            "wh_vs_that_with_gap",
            "wh_vs_that_with_gap_long_distance",
        ),
    ),
    Subset(
        "irregular_forms",
        "irregular forms",
        "IRREGULAR",
        ("irregular_past_participle_adjectives", "irregular_past_participle_verbs"),
    ),
    Subset(
        "island_effects",
        "island effects",
        "ISLAND",
        (
            "adjunct_island",
            "complex_NP_island",
            "coordinate_structure_constraint_complex_left_branch",
            "coordinate_structure_constraint_object_extraction",
            "left_branch_island_echo_question",
            "left_branch_island_simple_question",
            "sentential_subject_island",
            "wh_island",
        ),
    ),
    Subset(
        "npi_licensing",
        "NPI licensing",
        "NPI",
        (
            "matrix_question_npi_licensor_present",
            "npi_present_1",
            "npi_present_2",
            "only_npi_licensor_present",
            "only_npi_scope",
            "sentential_negation_npi_licensor_present",
            "sentential_negation_npi_scope",
        ),
    ),
    Subset(
        "quantifiers",
        "quantifiers",
        "QUANTIFIERS",
        (
            "existential_there_quantifiers_1",
            "existential_there_quantifiers_2",
            "superlative_quantifiers_1",
            "superlative_quantifiers_2",
        ),
    ),
    Subset(
        "subject_verb_agreement",
        "subject-verb agreement",
        "S-V AGR",
        (
            "distractor_agreement_relational_noun",
            "distractor_agreement_relative_clause",
            "irregular_plural_subject_verb_agreement_1",
            "irregular_plural_subject_verb_agreement_2",
            "regular_plural_subject_verb_agreement_1",
            "regular_plural_subject_verb_agreement_2",
        ),
    ),
)


def blimp_paradigms() -> list[str]:
    """The 67 paradigm names, sorted."""
    return sorted(p for phenomenon in BLIMP_PHENOMENA for p in phenomenon.members)


# --------------------------------------------------------------------------- EventsAdapt

EVENTSADAPT = "eventsadapt_pll"
EVENTSADAPT_PAIRS = DATA_DIR / "eventsadapt" / "eventsadapt_pairs.jsonl.gz"
"""The 782 plausible/implausible pairs (one JSON record per item x voice)."""

EVENTSADAPT_TRIAL_TYPES: dict[str, str] = {
    # Kauf et al. (2022): TrialType as in the source CSV -> description.
    "AI": "animate agent, inanimate patient",
    "AAN": "animate-animate, non-reversible",
    "AAR": "animate-animate, reversible",
}
EVENTSADAPT_VOICES: tuple[str, ...] = ("active", "passive")
EVENTSADAPT_BY_VOICE = f"{EVENTSADAPT}_by_voice"
"""All the pairs again, grouped by voice rather than by trial type: the same number as
``eventsadapt_pll``."""


def eventsadapt_trial_type_task(trial_type: str) -> str:
    """``AAN`` -> ``eventsadapt_pll_aan``: a trial type's group; its leaves add ``_<voice>``."""
    return f"{EVENTSADAPT}_{trial_type.lower()}"


# --------------------------------------------------------------------------- CrowS-Pairs

CROWS_PAIRS = "crows_pairs_pll"
CROWS_PAIRS_DATA = DATA_DIR / "crows_pairs" / "crows_pairs_anonymized.jsonl.gz"

CROWS_PAIRS_BIAS_TYPES: dict[str, str] = {
    # The data's `bias_type` values, in the order of the source README -> column header.
    "race-color": "CP race",
    "gender": "CP gender",
    "sexual-orientation": "CP sex. orient.",
    "religion": "CP religion",
    "age": "CP age",
    "nationality": "CP nation.",
    "disability": "CP disab.",
    "physical-appearance": "CP appear.",
    "socioeconomic": "CP socioecon.",
}

# --------------------------------------------------------------------------- CLAMS

CLAMS = "clams_pll"
CLAMS_DATA = DATA_DIR / "clams"
"""One folder per language, one ``<construction>.jsonl.gz`` per source evalset file."""

CLAMS_LANGUAGES: dict[str, str] = {
    "en": "English",
    "fr": "French",
    "de": "German",
    "he": "Hebrew",
    "ru": "Russian",
}

CLAMS_CONSTRUCTIONS: dict[str, str] = {
    # The seven constructions every language has (Mueller et al. 2020, Figure 1 and
    # Tables 1-2), source file stem -> title, in the papers' order.
    "simple_agrmt": "simple agreement",
    "vp_coord": "VP coordination (short)",
    "long_vp_coord": "VP coordination (long)",
    "subj_rel": "across subject relative clause",
    "obj_rel_within_anim": "within object relative clause",
    "obj_rel_across_anim": "across object relative clause",
    "prep_anim": "across prepositional phrase",
}

CLAMS_EN_EXTRA: tuple[str, ...] = (
    # The other files of en_evalset/: CLAMS's regeneration of the English-only cases of
    # Marvin & Linzen (2018) (inanimate and complementizer-less variants, sentential
    # complements, reflexives, NPIs), which the paper does not carry to other languages.
    "npi_across_anim",
    "npi_across_inanim",
    "obj_rel_across_inanim",
    "obj_rel_no_comp_across_anim",
    "obj_rel_no_comp_across_inanim",
    "obj_rel_no_comp_within_anim",
    "obj_rel_no_comp_within_inanim",
    "obj_rel_within_inanim",
    "prep_inanim",
    "reflexive_sent_comp",
    "reflexives_across",
    "sent_comp",
    "simple_npi_anim",
    "simple_npi_inanim",
    "simple_reflexives",
)
CLAMS_EN_EXTRA_GROUP = f"{CLAMS}_en_extra"


def clams_files() -> list[tuple[str, str]]:
    """Every packaged (language, file stem): the seven constructions per language, then
    the English extras."""
    files = [(lang, stem) for lang in CLAMS_LANGUAGES for stem in CLAMS_CONSTRUCTIONS]
    return files + [("en", stem) for stem in CLAMS_EN_EXTRA]


def clams_data_file(language: str, stem: str) -> Path:
    return CLAMS_DATA / language / f"{stem}.jsonl.gz"


# --------------------------------------------------------------------------- Zorro

ZORRO = "zorro_pll"
ZORRO_DATA = DATA_DIR / "zorro"
"""One ``<phenomenon>-<paradigm>.jsonl.gz`` per source file of ``sentences/babyberta``."""

ZORRO_PHENOMENA: tuple[Subset, ...] = (
    # The 13 phenomena of the Zorro README, keyed by the source file names' prefix (with
    # `-` as `_`); members are the source file stems.
    Subset(
        "agreement_determiner_noun",
        "determiner-noun agreement",
        "Z D-N AGR",
        (
            "agreement_determiner_noun-across_1_adjective",
            "agreement_determiner_noun-between_neighbors",
        ),
    ),
    Subset(
        "agreement_subject_verb",
        "subject-verb agreement",
        "Z S-V AGR",
        (
            "agreement_subject_verb-across_prepositional_phrase",
            "agreement_subject_verb-across_relative_clause",
            "agreement_subject_verb-in_question_with_aux",
            "agreement_subject_verb-in_simple_question",
        ),
    ),
    Subset(
        "anaphor_agreement",
        "anaphor agreement",
        "Z ANA. AGR",
        ("anaphor_agreement-pronoun_gender",),
    ),
    Subset(
        "argument_structure",
        "argument structure",
        "Z ARG STR.",
        (
            "argument_structure-dropped_argument",
            "argument_structure-swapped_arguments",
            "argument_structure-transitive",
        ),
    ),
    Subset("binding", "binding", "Z BINDING", ("binding-principle_a",)),
    Subset("case", "case", "Z CASE", ("case-subjective_pronoun",)),
    Subset("ellipsis", "ellipsis", "Z ELLIPSIS", ("ellipsis-n_bar",)),
    Subset(
        "filler_gap",
        "filler-gap",
        "Z FILLER GAP",
        ("filler-gap-wh_question_object", "filler-gap-wh_question_subject"),
    ),
    Subset("irregular", "irregular", "Z IRREGULAR", ("irregular-verb",)),
    Subset(
        "island_effects",
        "island effects",
        "Z ISLAND",
        (
            "island-effects-adjunct_island",
            "island-effects-coordinate_structure_constraint",
        ),
    ),
    Subset(
        "local_attractor",
        "local attractor",
        "Z LOCAL ATTR.",
        ("local_attractor-in_question_with_aux",),
    ),
    Subset(
        "npi_licensing",
        "NPI licensing",
        "Z NPI",
        ("npi_licensing-matrix_question", "npi_licensing-only_npi_licensor"),
    ),
    Subset(
        "quantifiers",
        "quantifiers",
        "Z QUANTIFIERS",
        ("quantifiers-existential_there", "quantifiers-superlative"),
    ),
)


def zorro_paradigms() -> list[str]:
    """The 23 source file stems, in phenomenon order."""
    return [stem for phenomenon in ZORRO_PHENOMENA for stem in phenomenon.members]


# --------------------------------------------------------------------------- leaderboards

LEADERBOARD_DIR = "pll-leaderboard"
"""Where ``pll-harness compare`` writes, unless told otherwise."""

HEADLINE = "acc"
"""The leaderboard metric that asks for each column's own accuracy-like metric (the
default)."""

SCORE_DIFF = "score_diff"
"""The other: every pair task's mean score difference (first or good minus the other)."""

LEADERBOARD_METRICS: tuple[str, ...] = (HEADLINE, SCORE_DIFF)


@dataclass(frozen=True)
class Benchmark:
    """How ``pll-harness compare`` shows one benchmark: its columns, in order, the metric
    its headline numbers use, a sentence on how its groups average (true of every metric)
    and, for a metric a reader may not know, a sentence that explains it (shown only with
    that metric)."""

    name: str
    title: str
    columns: tuple[tuple[str, str], ...]
    averaging: str
    metric: str = "acc"
    metric_note: str | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    """Other groups that report the same number as one of the columns."""

    def owns(self, task: str) -> bool:
        """Whether a result key is this benchmark's (its groups and its leaf tasks)."""
        return task == self.name or task.startswith(f"{self.name}_")


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        BLIMP,
        "BLiMP",
        ((BLIMP, "BLiMP overall"), *((f"{BLIMP}_{p.key}", p.header) for p in BLIMP_PHENOMENA)),
        "BLiMP overall is the mean of the 67 paradigms, a phenomenon the mean of its paradigms",
    ),
    Benchmark(
        EVENTSADAPT,
        "EventsAdapt",
        (
            (EVENTSADAPT, "EventsAdapt"),
            *((eventsadapt_trial_type_task(t), f"EA {t}") for t in EVENTSADAPT_TRIAL_TYPES),
            *((f"{EVENTSADAPT}_{v}", f"EA {v}") for v in EVENTSADAPT_VOICES),
        ),
        "EventsAdapt columns pool their pairs",
        aliases={EVENTSADAPT_BY_VOICE: EVENTSADAPT},
    ),
    Benchmark(
        CROWS_PAIRS,
        "CrowS-Pairs",
        (
            (CROWS_PAIRS, "CrowS-Pairs"),
            *((task_name(CROWS_PAIRS, b), h) for b, h in CROWS_PAIRS_BIAS_TYPES.items()),
        ),
        "CrowS-Pairs columns pool their pairs",
        metric="pct_stereotype",
        metric_note="CrowS-Pairs columns are pct_stereotype, the share of pairs in which the "
        "more-stereotyping sentence scores higher (50 = no preference)",
    ),
    Benchmark(
        CLAMS,
        "CLAMS",
        (
            (CLAMS, "CLAMS"),
            *((f"{CLAMS}_{lang}", f"CLAMS {lang}") for lang in CLAMS_LANGUAGES),
            (CLAMS_EN_EXTRA_GROUP, "CLAMS en extra"),
        ),
        "CLAMS is the mean of its 35 language x construction tasks, a language the mean of "
        "its 7 constructions (en extra: the 15 English-only files)",
    ),
    Benchmark(
        ZORRO,
        "Zorro",
        ((ZORRO, "Zorro"), *((f"{ZORRO}_{p.key}", p.header) for p in ZORRO_PHENOMENA)),
        "Zorro is the mean of its 23 paradigms, a phenomenon the mean of its paradigms",
    ),
)
