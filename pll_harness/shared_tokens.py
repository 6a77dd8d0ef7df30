"""PLL of the tokens two sentences share: the CrowS-Pairs score (Nangia et al. 2020).

CrowS-Pairs compares a more and a less stereotyping sentence that differ in a few words
(``Women don't know how to drive`` / ``Men don't ...``).  Its paper scores a masked LM on
the tokens the two sentences *share* only, keeping the tokens in which they differ
visible, so that the score does not reward a sentence for containing a frequent word
(``men``) rather than for the rest of the sentence fitting it.  As in the paper's
``metric.py``, the shared tokens are those that ``difflib.SequenceMatcher`` aligns as
equal between the two token sequences, special tokens included in the alignment and never
scored.  The paper masks one shared token at a time (our ``original``); any of our metrics
can be used, its masking rules applied within the shared tokens (a differing token is
never masked).

lm-eval's request, a context and a continuation, cannot say "score these tokens, not
those", so this score lives here, in :func:`score_shared_tokens`, and in
``pll-harness``; the lm-eval task scores whole sentences.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pll_harness.arguments import check_string_pairs

if TYPE_CHECKING:
    from pll_harness.scorer import PLLScorer, SentenceScore


def shared_positions(first: Sequence[int], second: Sequence[int]) -> tuple[list[int], list[int]]:
    """Positions of the tokens the two sequences share, as SequenceMatcher's ``equal``
    blocks align them (the paper's ``get_span``)."""
    matcher = difflib.SequenceMatcher(None, list(first), list(second))
    in_first: list[int] = []
    in_second: list[int] = []
    for operation, first_start, first_stop, second_start, second_stop in matcher.get_opcodes():
        if operation == "equal":
            in_first += range(first_start, first_stop)
            in_second += range(second_start, second_stop)
    return in_first, in_second


def score_shared_tokens(
    scorer: PLLScorer, pairs: Sequence[tuple[str, str]]
) -> list[tuple[SentenceScore, SentenceScore]]:
    """Each pair's two sentences, scored on the tokens they share only.

    The results hold the shared tokens of each sentence and their log-probabilities; their
    ``logprob`` is the paper's sentence score (a sum, in nats).  Which tokens are shared
    can depend on the order of a pair's sentences (difflib keeps, of two equally long
    matches, the one first in the first sentence): ``metric.py`` puts ``sent_less`` first
    in an antistereo pair, as ``pll-harness crows-pairs`` does.
    """
    from pll_harness.scorer import Jobs

    check_string_pairs(pairs, "(sentence, sentence)")
    sentences = [sentence for pair in pairs for sentence in pair]
    keys, distinct = scorer.distinct_jobs([("", sentence) for sentence in sentences])
    encodings = distinct.encodings.select(np.asarray(keys, dtype=np.int64))
    prefix, suffix = scorer.specials.prefix, scorer.specials.suffix
    scored = np.zeros_like(encodings.scored)
    for pair in range(len(pairs)):
        sides = []
        for side in (2 * pair, 2 * pair + 1):
            start, stop = encodings.offsets[side], encodings.offsets[side + 1]
            sides.append((start, stop, [*prefix, *encodings.ids[start:stop].tolist(), *suffix]))
        matched = shared_positions(sides[0][2], sides[1][2])
        for (start, stop, _), positions in zip(sides, matched, strict=True):
            text = np.asarray(positions, dtype=np.int64) - len(prefix)
            text = text[(text >= 0) & (text < stop - start)]
            scored[start + text] = True
    # and never a token the scorer leaves unscored in any case (a spelt-out [SEP])
    jobs = Jobs(sentences, encodings.with_scored(scored & encodings.scored))
    scores = scorer.score_jobs(jobs)
    return [(scores[2 * i], scores[2 * i + 1]) for i in range(len(pairs))]
