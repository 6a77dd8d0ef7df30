"""Partial runs: the property data parallelism relies on.

A data-parallel run deals the planned batches out to processes and pools the results, so
running the batches in parts and pooling must give bit-for-bit the numbers of one full
run, and a run that misses a batch must not pass for a result.  Tolerance here is zero:
same batches, same kernels, same float32 results.
"""

from __future__ import annotations

import pytest
import torch
from conftest import GatheredGroup

from pll_harness.distributed import pool_target_scores
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


def test_parts_pooled_equal_one_full_run_exactly(scorer):
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    work = scorer.plan_work(jobs.encodings)
    assert len(work.batches) > 3
    full = scorer.runner.run(work)
    even = scorer.runner.run(work, work.batches[0::2])
    odd = scorer.runner.run(work, work.batches[1::2])
    assert bool(torch.isnan(even.logprobs).any())  # the parts really are partial
    pooled = pool_target_scores(
        even, GatheredGroup([(even.logprobs, even.greedy), (odd.logprobs, odd.greedy)])
    )
    assert torch.equal(full.logprobs, pooled.logprobs)
    assert torch.equal(full.greedy, pooled.greedy)
    assert scorer.assemble(jobs, work, pooled) == scorer.score_jobs(jobs)


def test_assembling_an_incomplete_run_is_an_error(scorer):
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    work = scorer.plan_work(jobs.encodings)
    partial = scorer.runner.run(work, work.batches[1:])
    with pytest.raises(RuntimeError, match="NaN"):
        scorer.assemble(jobs, work, partial)


def test_progress_counts_every_request_once(scorer):
    seen = []
    requests = [("", t) for t in TEXTS] + [("", TEXTS[0]), ("Nothing", "")]
    scorer.score_requests(requests, progress=seen.append)
    assert sum(seen) == len(requests)
    assert seen[0] == 1  # the empty continuation is done before any batch runs
