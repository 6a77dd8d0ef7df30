"""Batch packing and partial runs: the properties data parallelism relies on.

A data-parallel run deals the batches of ``plan_batches`` out to processes and pools the
results, so (1) the batches must not depend on the order the requests arrive in, (2) every
copy must be in exactly one batch, and (3) running the batches in parts and pooling must
give bit-for-bit the numbers of one full run.  Tolerance here is zero: same batches, same
kernels, same float32 results.
"""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from conftest import GatheredGroup

from pll_harness.distributed import pool_target_scores
from pll_harness.runner import Batching, batch_cost, plan_batches
from pll_harness.scorer import PLLScorer

TEXTS = [
    "The hooligan wrecked the souvenir.",
    "The traveler lost the souvenir.",
    "A cat sat.",
    "Who should Derek hug after shocking Richard?",
    "These dogs, unlike that cat, weren't barking at 3:45 in the morning!",
    "The teachers who the student admires have praised the orchestra.",
    "Hi",
    "A dog sat.",
    "The souvenir was lost by the traveler.",
]


@pytest.fixture(scope="module", params=["tiny_bert_dir", "tiny_roberta_dir"])
def scorer(request) -> PLLScorer:
    return PLLScorer.from_pretrained(
        request.getfixturevalue(request.param), "word_l2r", device="cpu", max_batch_tokens=120
    )


def batch_contents(work, batches) -> list[list[tuple]]:
    """Batches described by what they hold, independent of plan indices."""
    return [
        [
            (tuple(work.plans[s.plan].input_ids.tolist()), s.first, s.stop)
            for s in sorted(batch, key=lambda s: (work.plans[s.plan].input_ids.tolist(), s.first))
        ]
        for batch in batches
    ]


def test_batches_do_not_depend_on_request_order(scorer):
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    shuffled = list(jobs)
    random.Random(3).shuffle(shuffled)
    work, other = scorer.plan_work(jobs), scorer.plan_work(shuffled)
    assert len(work.batches) > 3  # the budget forces several batches
    assert batch_contents(work, work.batches) == batch_contents(other, other.batches)


@pytest.mark.parametrize("batch_size", [None, 2])
def test_every_copy_is_in_exactly_one_batch_within_the_limits(scorer, batch_size):
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    plans = scorer.plan_work(jobs).plans
    batching = Batching(max_batch_tokens=120, batch_size=batch_size)
    batches = plan_batches(plans, batching)
    covered = {i: [] for i in range(len(plans))}
    for batch in batches:
        width = max(plans[s.plan].length for s in batch)
        rows = sum(s.stop - s.first for s in batch)
        assert rows <= batching.rows_for(width)
        assert batch_cost(plans, batch) == rows * width
        if batch_size:
            assert len(batch) <= batch_size
        for s in batch:
            covered[s.plan].append((s.first, s.stop))
    for index, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == plans[index].n_copies
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))


def test_parts_pooled_equal_one_full_run_exactly(scorer):
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    work = scorer.plan_work(jobs)
    full = scorer.runner.run(work.plans, work.batches)
    even = scorer.runner.run(work.plans, work.batches[0::2])
    odd = scorer.runner.run(work.plans, work.batches[1::2])
    assert any(bool(torch.isnan(t.logprobs).any()) for t in even)  # parts really are partial
    flat = [(torch.cat([t.logprobs for t in part]), torch.cat([t.greedy for t in part]))
            for part in (even, odd)]  # fmt: skip
    pooled = pool_target_scores(even, GatheredGroup(flat))
    for a, b in zip(full, pooled, strict=True):
        assert torch.equal(a.logprobs, b.logprobs)
        assert torch.equal(a.greedy, b.greedy)
    assert scorer.assemble(jobs, work, pooled) == scorer.score_jobs(jobs)


def test_assembling_an_incomplete_run_is_an_error(scorer):
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    work = scorer.plan_work(jobs)
    partial = scorer.runner.run(work.plans, work.batches[1:])
    with pytest.raises(RuntimeError, match="NaN"):
        scorer.assemble(jobs, work, partial)
