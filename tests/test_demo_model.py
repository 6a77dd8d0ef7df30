"""The packaged demo model: loads offline by name and shows the effect PLL metrics are
about (Kauf & Ivanova 2023, section 4 and Figure 2)."""

from __future__ import annotations

import gzip
import itertools
import json
import statistics

import pytest

from pll_harness.loading import resolve_pretrained
from pll_harness.models import DEMO_MODEL_DIR
from pll_harness.scorer import PLLScorer
from pll_harness.task_paths import TASK_DIR

WORDS = [
    "souvenir", "hooligan", "traveler", "archipelago", "tambourine", "kaleidoscope",
    "gargoyle", "cartographer", "umbrella", "marmalade", "accordion", "labyrinth",
    "porcupine", "saxophone", "chandelier", "magnolia", "avalanche", "quarantine",
]  # fmt: skip


@pytest.fixture(scope="module")
def scorers() -> dict[str, PLLScorer]:
    return {
        metric: PLLScorer.from_pretrained("pll-demo", pll_metric=metric, device="cpu")
        for metric in ("original", "word_l2r")
    }


def test_demo_model_is_found_by_name_inside_the_package():
    assert resolve_pretrained("pll-demo") == str(DEMO_MODEL_DIR)
    assert DEMO_MODEL_DIR.parent.parent.name == "pll_harness"


def test_original_inflates_multi_token_words(scorers):
    """In "My word is X.", `original` scores a multi-piece X higher than `word_l2r`:
    its later pieces are visible while the first is predicted.  Measured on this model:
    original is higher for all 18 words (mean +11.7 nats); the first version, barely
    above chance on BLiMP, showed it for 17 of 18 (+1.37 nats), so the bounds hold for a
    weak model too."""
    tokenizer = scorers["original"].tokenizer
    multi = [w for w in WORDS if len(tokenizer.tokenize(w)) > 1]
    assert len(multi) >= 15
    sentences = [f"My word is {w}." for w in multi]
    prefix = len(tokenizer.tokenize("My word is"))

    def word_scores(metric: str) -> list[float]:
        return [sum(s.token_logprobs[prefix:-1]) for s in scorers[metric].score(sentences)]

    gaps = [o - w for o, w in zip(word_scores("original"), word_scores("word_l2r"), strict=True)]
    assert statistics.mean(gaps) > 0.2
    assert sum(gap > 0 for gap in gaps) >= 0.8 * len(gaps)


def test_frequent_tokens_are_the_models_argmax(scorers):
    scores = scorers["original"].score(["The man is in the house.", "It is a good day."])
    greedy = [g for s in scores for g in s.token_greedy]
    assert any(greedy) and not all(greedy)


def blimp_sample(per_paradigm: int) -> list[tuple[str, str]]:
    """The first pairs of every packaged BLiMP paradigm (what lm-eval's --limit takes)."""
    pairs = []
    for path in sorted((TASK_DIR / "data" / "blimp").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for row in itertools.islice(lines, per_paradigm):
                record = json.loads(row)
                pairs.append((record["sentence_good"], record["sentence_bad"]))
    return pairs


@pytest.mark.slow
def test_blimp_accuracy_is_well_above_chance(scorers):
    """Measured: 68.2 % of 670 pairs (10 per paradigm) under word_l2r (original: 68.7 %),
    18 points above chance; the bound leaves room for 14 pairs to flip on other hardware.
    A model barely above chance, like the first pll-demo (54.2 %), fails it; see the
    model card for the accuracy by phenomenon."""
    pairs = blimp_sample(10)
    assert len(pairs) == 670
    scores = scorers["word_l2r"].score([sentence for pair in pairs for sentence in pair])
    good, bad = scores[0::2], scores[1::2]
    accuracy = sum(g.logprob > b.logprob for g, b in zip(good, bad, strict=True)) / len(pairs)
    assert accuracy >= 0.66
