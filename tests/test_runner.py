"""The runner: partial runs, the property data parallelism relies on, and the head's
chunks, which share one pair of buffers over a run.

A data-parallel run deals the planned batches out to processes and pools the results, so
running the batches in parts and pooling must give bit-for-bit the numbers of one full
run, and a run that misses a batch must not pass for a result.  Tolerance here is zero:
same batches, same kernels, same float32 results.  Chunking the head changes only the
shapes of its matrix products, so chunks of any size agree to float32 rounding (1e-6
relative: a few units in the last place of log-probabilities near -10).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import weakref
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest
import torch
from conftest import GatheredGroup

from pll_harness import planning
from pll_harness import runner as runner_module
from pll_harness.distributed import pool_target_scores, scored_slots
from pll_harness.heads import split_masked_lm
from pll_harness.planning import Work
from pll_harness.runner import _ChunkBuffers, target_logprobs
from pll_harness.scorer import FinishedJobs, Jobs, PLLScorer

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


def planned(scorer: PLLScorer) -> tuple[Jobs, Work]:
    """TEXTS tokenized and planned by ``scorer``."""
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    return jobs, scorer.plan_work(jobs.encodings)


@pytest.fixture(scope="module", params=["tiny_bert_dir", "tiny_roberta_dir"])
def scorer(request) -> PLLScorer:
    return PLLScorer.from_pretrained(
        request.getfixturevalue(request.param), "word_l2r", device="cpu", max_batch_tokens=120
    )


def test_parts_pooled_equal_one_full_run_exactly(scorer):
    jobs, work = planned(scorer)
    assert len(work.batches) > 3
    full = scorer.runner.run(work)
    even = scorer.runner.run(work, work.batches[0::2])
    odd = scorer.runner.run(work, work.batches[1::2])
    assert bool(torch.isnan(even.logprobs).any())  # the parts really are partial
    (pooled,) = pool_target_scores(
        [even], GatheredGroup([scored_slots([even]), scored_slots([odd])])
    )
    assert torch.equal(full.logprobs, pooled.logprobs)
    assert torch.equal(full.greedy, pooled.greedy)
    one_part = Jobs(jobs.texts, jobs.encodings)
    assert scorer.assemble(jobs, work, pooled) == scorer.score_jobs(one_part)


def test_assembling_an_incomplete_run_is_an_error(scorer):
    jobs, work = planned(scorer)
    partial = scorer.runner.run(work, work.batches[1:])
    with pytest.raises(RuntimeError, match="NaN"):
        scorer.assemble(jobs, work, partial)


def test_progress_counts_every_request_once(scorer):
    seen = []
    requests = [("", t) for t in TEXTS] + [("", TEXTS[0]), ("Nothing", "")]
    scorer.score_requests(requests, progress=seen.append)
    assert sum(seen) == len(requests)
    keys, jobs = scorer.distinct_jobs(requests)
    assert seen == progress_by_definition(scorer, jobs, np.bincount(keys).tolist())


@pytest.mark.parametrize("rows_per_chunk", [1, 3, 1000])
def test_head_chunks_of_any_size_give_the_same_scores(scorer, monkeypatch, rows_per_chunk):
    """Chunks of 1 and 3 rows end each batch with a shorter chunk, which reads only its
    own rows of the shared buffers; 1000 rows hold every batch's targets in one chunk, so
    the buffers grow whenever a batch has more targets than any before it."""
    jobs, work = planned(scorer)
    whole = scorer.runner.run(work)
    budget = rows_per_chunk * scorer.runner.vocab_size
    monkeypatch.setattr(runner_module, "HEAD_CHUNK_ELEMENTS", {"cpu": budget, "default": budget})
    monkeypatch.setattr(runner_module, "HEAD_MIN_ROWS", 1)
    chunked = scorer.runner.run(work)
    torch.testing.assert_close(chunked.logprobs, whole.logprobs, atol=1e-6, rtol=1e-6)
    assert torch.equal(chunked.greedy, whole.greedy)
    assert scorer.assemble(jobs, work, chunked) == pytest.approx(scorer.score_jobs(jobs))


def test_a_large_vocabulary_still_gets_chunks_of_the_minimum_rows(scorer, monkeypatch):
    """When the element budget allows fewer rows than HEAD_MIN_ROWS, chunks take that many
    rows anyway (every chunk but a batch's last), so the projection's weight is not read
    for a handful of rows."""
    _, work = planned(scorer)
    budget = scorer.runner.vocab_size  # one row a chunk by the element budget alone
    monkeypatch.setattr(runner_module, "HEAD_CHUNK_ELEMENTS", {"cpu": budget, "default": budget})
    monkeypatch.setattr(runner_module, "HEAD_MIN_ROWS", 4)
    parts = scorer.runner.parts
    seen: list[int] = []

    def head(rows, out=None):
        seen.append(rows.shape[0])
        return parts.head(rows, out)

    monkeypatch.setattr(scorer.runner, "parts", dataclasses.replace(parts, head=head))
    scorer.runner.run(work)
    assert max(seen) == 4 and sum(rows != 4 for rows in seen) <= len(work.batches)


@pytest.mark.parametrize(("dtype", "below_one"), [(torch.float32, 2**-24), (torch.bfloat16, 2**-8)])
def test_target_logprobs_equal_a_float64_log_softmax_and_count_ties_as_greedy(dtype, below_one):
    """Float32 logits on the CPU take the in-place way, bfloat16 ones the log-softmax into
    a float32 buffer; both against float64 on the same values, within 1e-5 nats.  Row 0's
    target is its largest logit, row 1's ties with another, row 2's is second, and row 3's
    is one unit in the last place below the largest (1.0), which the float32 log-softmax
    rounds into a tie: greedy is decided on the logits."""
    torch.manual_seed(0)
    logits = (torch.randn(6, 4000) * 4).to(dtype)
    targets = torch.randint(0, 4000, (6, 1))
    logits[0, targets[0]] = logits[0].max() + 1
    logits[1, targets[1]] = logits[1].max()
    logits[2, targets[2]] = logits[2].max()
    logits[2, (targets[2] + 1) % 4000] = logits[2].max() + 1
    logits[3] = torch.rand(4000).to(dtype) / 2
    logits[3, (targets[3] + 1) % 4000] = 1.0
    logits[3, targets[3]] = 1.0 - below_one
    exact = torch.log_softmax(logits.double(), -1).gather(1, targets).squeeze(1)
    expected_greedy = logits.gather(1, targets).squeeze(1) >= logits.amax(-1)
    picked, greedy = target_logprobs(logits.clone(), targets, _ChunkBuffers())
    assert picked.dtype == torch.float32
    torch.testing.assert_close(picked.double(), exact, atol=1e-5, rtol=0)
    assert greedy.tolist() == expected_greedy.tolist()
    assert greedy[:4].tolist() == [True, True, False, False]


def test_chunk_buffers_hand_out_views_and_grow_only_when_needed():
    buffers = _ChunkBuffers()
    first = buffers.take("logits", torch.zeros(4, 2), 10)
    assert first.shape == (4, 10) and first.dtype == torch.float32
    smaller = buffers.take("logits", torch.zeros(2, 2), 10)
    assert smaller.shape == (2, 10) and smaller.data_ptr() == first.data_ptr()
    larger = buffers.take("logits", torch.zeros(6, 2), 10)
    assert larger.shape == (6, 10) and larger.data_ptr() != first.data_ptr()
    other = buffers.take("logprobs", torch.zeros(3, 2, dtype=torch.bfloat16), 10, torch.float32)
    assert other.dtype == torch.float32 and other.data_ptr() != larger.data_ptr()
    assert buffers.take("logits", torch.zeros(3, 2, dtype=torch.bfloat16), 10).dtype == (
        torch.bfloat16
    )


def test_cpu_run_releases_free_memory_when_the_length_changes_and_at_the_end(scorer, monkeypatch):
    """The heap keeps what one length's batches free for the next batch of that length
    (see pll_harness.allocator); it must not carry it over to other lengths, and the last
    release comes after the head's buffers are gone, so that it returns them too."""
    _, work = planned(scorer)
    lengths = [work.groups[batch.group].length for batch in work.batches]
    assert len(set(lengths)) > 2 and len(lengths) > len(set(lengths))  # a test that can fail
    events: list[object] = []
    buffers: list[weakref.ref] = []
    init = _ChunkBuffers.__init__

    def tracked(self):
        init(self)
        buffers.append(weakref.ref(self))

    def release():
        events.append("release" if buffers[0]() is not None else "release after the buffers")

    monkeypatch.setattr(_ChunkBuffers, "__init__", tracked)
    monkeypatch.setattr(runner_module, "release_free_memory", release)
    score_batch = scorer.runner._score_batch

    def recording(metric, group, batch, *rest):
        events.append(group.length)
        return score_batch(metric, group, batch, *rest)

    monkeypatch.setattr(scorer.runner, "_score_batch", recording)
    scorer.runner.run(work)
    expected: list[object] = []
    for position, length in enumerate(lengths):
        if position == 0 or length != lengths[position - 1]:
            expected.append("release")
        expected.append(length)
    assert events == [*expected, "release after the buffers"]


@pytest.fixture
def taken_buffers(monkeypatch) -> list[str]:
    """The names of the head buffers that runs take, in order, one entry per request."""
    taken: list[str] = []
    take = _ChunkBuffers.take

    def recording(self, name, *rest):
        taken.append(name)
        return take(self, name, *rest)

    monkeypatch.setattr(_ChunkBuffers, "take", recording)
    return taken


def test_full_logits_fallback_scores_the_same_and_takes_no_logits_buffer(
    scorer, monkeypatch, taken_buffers
):
    """A model of an unknown class runs whole and its logits are gathered as they are: the
    scores equal the split head's to float32 rounding of differently shaped products, and
    no buffer is allocated: the gathered float32 logits take their own log-softmax."""

    class Unknown(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    _, work = planned(scorer)
    split = scorer.runner.run(work)
    fallback = split_masked_lm(Unknown(scorer.model).eval())
    assert not fallback.split
    taken_buffers.clear()  # the split run's
    monkeypatch.setattr(scorer.runner, "parts", fallback)
    whole = scorer.runner.run(work)
    torch.testing.assert_close(whole.logprobs, split.logprobs, atol=1e-5, rtol=1e-5)
    assert torch.equal(whole.greedy, split.greedy)
    assert taken_buffers == []


@pytest.mark.parametrize(
    ("dtype", "buffers"), [(torch.float32, ["logits"]), (torch.bfloat16, ["logits", "logprobs"])]
)
def test_float32_logits_are_overwritten_in_place(tiny_bert_dir, taken_buffers, dtype, buffers):
    """Float32 logits are overwritten in computing their targets' log-probabilities, which
    saves a buffer of a chunk's size; logits of a lower precision get a float32 buffer for
    their log-softmax.  Float32 scores
    equal the float64 reference (test_scorer); here: which buffers a run takes, and that a
    bfloat16 run scores every target."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir, "word_l2r", device="cpu", dtype=dtype)
    _, work = planned(scorer)
    scores = scorer.runner.run(work)
    assert sorted(set(taken_buffers)) == buffers
    assert not bool(torch.isnan(scores.logprobs).any())


def test_a_failed_cpu_run_still_releases_free_memory(scorer, monkeypatch):
    _, work = planned(scorer)
    released = []
    monkeypatch.setattr(runner_module, "release_free_memory", lambda: released.append(1))

    def failing(*arguments):
        raise KeyboardInterrupt

    monkeypatch.setattr(scorer.runner, "_score_batch", failing)
    with pytest.raises(KeyboardInterrupt):
        scorer.runner.run(work)
    assert released == [1, 1]  # before the first batch, and on the way out


def out_of_memory_above(scorer, monkeypatch, limit: int) -> list[tuple[int, bool]]:
    """Make every forward pass of more than ``limit`` tokens run out of memory, as a GPU
    would; returns the log of ``(tokens, fitted)`` for each pass tried."""
    parts = scorer.runner.parts
    tried: list[tuple[int, bool]] = []

    def states(input_ids, rows, positions):
        tried.append((input_ids.numel(), input_ids.numel() <= limit))
        if input_ids.numel() > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return parts.states(input_ids, rows, positions)

    monkeypatch.setattr(scorer.runner, "parts", dataclasses.replace(parts, states=states))
    monkeypatch.setattr(scorer.runner, "token_cap", None)
    return tried


def test_batches_that_run_out_of_memory_are_cut_and_the_cut_persists(scorer, monkeypatch, caplog):
    """The planned batches hold up to 120 tokens; with room for 50, the first batch that
    does not fit is halved until it does, and every later batch is cut before it is tried,
    so only the first batch ever fails.  The scores are the planned run's to float32
    rounding (other shapes, other GEMM blocking: 1e-6)."""
    jobs, work = planned(scorer)
    whole = scorer.runner.run(work)
    tried = out_of_memory_above(scorer, monkeypatch, limit=50)
    done: list[int] = []
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness.runner"):
        cut = scorer.runner.run(work, on_batch_done=done.append)
    fits = [fitted for _, fitted in tried]
    first_fit = fits.index(True)
    assert first_fit >= 1 and all(fits[first_fit:])  # only the first batch ever failed
    assert all(tokens <= 50 for tokens, fitted in tried if fitted)
    assert len(tried) - first_fit > len(work.batches)  # later batches really were cut
    assert 0 < scorer.runner.token_cap <= 50
    assert "ran out of memory" in caplog.text and "max_batch_tokens" in caplog.text
    assert done == list(range(len(work.batches)))
    assert not bool(torch.isnan(cut.logprobs).any())
    torch.testing.assert_close(cut.logprobs, whole.logprobs, atol=1e-6, rtol=1e-6)
    assert torch.equal(cut.greedy, whole.greedy)
    assert scorer.assemble(jobs, work, cut) == pytest.approx(scorer.score_jobs(jobs))


def test_a_batch_is_cut_into_the_fewest_parts_within_the_cap(tiny_bert_dir):
    """After an out-of-memory error every pass keeps to ``token_cap``: a part over it
    would fail again (or, on the CPU, take the memory the cap was set to spare)."""
    runner = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu").runner
    for cap, copies, length in itertools.product(range(1, 41), range(1, 13), range(1, 7)):
        runner.token_cap = cap
        parts = runner._cut(planning.Batch(0, 5, 5 + copies), length)
        assert [part.first for part in parts[1:]] == [part.stop for part in parts[:-1]]
        assert parts[0].first == 5 and parts[-1].stop == 5 + copies
        per_part = max(1, cap // length)
        assert len(parts) == (1 if copies * length <= cap else math.ceil(copies / per_part))
        assert all((p.stop - p.first) * length <= cap or p.stop - p.first == 1 for p in parts)


def test_a_single_copy_that_does_not_fit_is_an_error(scorer, monkeypatch):
    _, work = planned(scorer)
    out_of_memory_above(scorer, monkeypatch, limit=1)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        scorer.runner.run(work)


def test_cuda_runs_use_memory_efficient_attention_and_restore_the_choice():
    """On an H100 the memory-efficient kernel ran all of BLiMP fastest, and cuDNN's builds
    a graph for each new batch shape (runner.attention_kernels): a CUDA run allows only it
    and the math fallback, and afterwards the user's settings are back.  The flags are
    global, so this runs without a GPU."""
    backends = torch.backends.cuda
    before = (
        backends.cudnn_sdp_enabled(),
        backends.flash_sdp_enabled(),
        backends.mem_efficient_sdp_enabled(),
    )
    with runner_module.attention_kernels(torch.device("cuda")):
        assert not backends.cudnn_sdp_enabled()
        assert not backends.flash_sdp_enabled()
        assert backends.mem_efficient_sdp_enabled() and backends.math_sdp_enabled()
    after = (
        backends.cudnn_sdp_enabled(),
        backends.flash_sdp_enabled(),
        backends.mem_efficient_sdp_enabled(),
    )
    assert after == before
    backends.enable_cudnn_sdp(True)
    try:
        with runner_module.attention_kernels(torch.device("cpu")):
            assert backends.cudnn_sdp_enabled()
    finally:
        backends.enable_cudnn_sdp(before[0])


def test_every_batch_runs_inside_the_devices_attention_choice(scorer, monkeypatch):
    chosen = []

    @contextlib.contextmanager
    def recording(device):
        chosen.append(device)
        yield
        chosen.append("left")

    def states(*args):
        assert chosen == [scorer.runner.device]  # inside the choice
        return real_states(*args)

    real_states = scorer.runner.parts.states
    monkeypatch.setattr(runner_module, "attention_kernels", recording)
    parts = dataclasses.replace(scorer.runner.parts, states=states)
    monkeypatch.setattr(scorer.runner, "parts", parts)
    _, work = planned(scorer)
    scorer.runner.run(work)
    assert chosen == [scorer.runner.device, "left"]


def finished_by_definition(jobs: Jobs, work: Work, weights: list[int]) -> tuple[int, list[int]]:
    """The weight of the jobs with nothing to score, and the whole jobs' worth of work each
    batch adds: each target of a job is weight / targets of it, done with the batch, in
    order, that scores its slot's source; the count is the running total's whole part."""
    batch_of = {}
    for position, batch in enumerate(work.batches):
        for slot in work.inputs(batch, 0).slots.tolist():
            batch_of[slot] = position
    before, work_of = 0, [Fraction(0)] * len(work.batches)
    for job in range(len(jobs)):
        slots = range(int(work.slot_offsets[job]), int(work.slot_offsets[job + 1]))
        if not slots:
            before += weights[job]
        for slot in slots:
            work_of[batch_of[int(work.slot_source[slot])]] += Fraction(weights[job], len(slots))
    running = list(itertools.accumulate(work_of, initial=Fraction(before)))
    return before, [math.floor(b) - math.floor(a) for a, b in itertools.pairwise(running)]


def progress_by_definition(scorer: PLLScorer, jobs: Jobs, weights: list[int]) -> list[int]:
    """What ``progress`` is told over a run in parts: for each part that has jobs, the
    weight of those with nothing to score, then :func:`finished_by_definition` of the
    part's own plan, batch by batch."""
    told = []
    for index, (start, stop) in enumerate(itertools.pairwise(jobs.bounds)):
        if start < stop:
            part = jobs.part(index)
            before, counts = finished_by_definition(
                part, scorer.plan_work(part.encodings), weights[start:stop]
            )
            told += [before, *counts]
    return told


@pytest.mark.parametrize("max_length", [None, 14])
def test_progress_follows_the_definition_while_groups_are_planned(request, max_length):
    """FinishedJobs counts each group as it is planned, exactly as the definition does in
    fractions; with max_length=14 a text is scored in several windows, twins answer for
    each other, an empty request needs no batch."""
    scorer = PLLScorer.from_pretrained(
        request.getfixturevalue("tiny_bert_dir"), max_batch_tokens=60, max_length=max_length
    )
    requests = [("", t) for t in TEXTS] + [("  ", TEXTS[2]), ("Nothing", "")]
    _, jobs = scorer.distinct_jobs(requests)
    weights = [(7 * job) % 5 + 1 for job in range(len(jobs))]
    work = scorer.plan_work(jobs.encodings)
    expected_before, expected = finished_by_definition(jobs, work, weights)
    assert expected_before == weights[-1] and len(work.groups) > 3
    assert not np.array_equal(work.slot_source, np.arange(work.n_slots))  # a twin
    planner = scorer.planner(jobs.encodings)
    windows = np.bincount(planner.sequences.text)
    assert (windows.max() > 1) == bool(max_length)  # a text scored in several windows
    finished = FinishedJobs(jobs.encodings, planner, weights)
    assert finished.without_batches == expected_before
    got = []
    for position, _ in enumerate(planner):
        got.append(finished.at(position))
    assert got == expected and sum(got) + expected_before == sum(weights)
    seen = []
    scorer.score_jobs(jobs, seen.append, weights)
    assert seen == [expected_before, *expected]
    _, parted = scorer.distinct_jobs(requests, parts=True)
    assert np.count_nonzero(np.diff(parted.bounds)) > 1
    seen = []
    scorer.score_jobs(parted, seen.append, weights)
    assert seen == progress_by_definition(scorer, parted, weights) and sum(seen) == sum(weights)


def test_groups_are_planned_while_earlier_batches_run(scorer, monkeypatch):
    """score_jobs plans a group only when the runner reaches it: on a GPU the host plans
    while the batches already queued run."""
    events = []
    plan_group = planning._group

    def planning_group(*arguments):
        events.append("plan")
        return plan_group(*arguments)

    score_batch = scorer.runner._score_batch

    def scoring(metric, group, batch, *rest):
        events.append("score")
        return score_batch(metric, group, batch, *rest)

    monkeypatch.setattr(planning, "_group", planning_group)
    monkeypatch.setattr(scorer.runner, "_score_batch", scoring)
    _, jobs = scorer.distinct_jobs([("", t) for t in TEXTS])
    scorer.score_jobs(jobs)
    assert events[0] == "plan" and events.count("plan") > 3
    assert events.index("score") < len(events) - events[::-1].index("plan") - 1
    assert all(events[i - 1] == "score" for i, e in enumerate(events) if e == "plan" and i)


def test_a_part_cut_before_the_cap_fell_is_cut_again_before_it_runs(scorer, monkeypatch):
    """A batch that runs out of memory is halved until a part fits; the halves queued
    behind it were cut under the larger caps on the way down and must be cut to the cap
    in force before they run, not tried (and failed) at their old size, which also set a
    cap above the one in force."""
    _, work = planned(scorer)
    batch = max(work.batches, key=lambda batch: batch.stop - batch.first)
    assert batch.stop - batch.first >= 8  # halved three times before one copy fits
    length = work.groups[batch.group].length
    tried = out_of_memory_above(scorer, monkeypatch, limit=length)
    parts = scorer.runner.parts
    caps: list[int | None] = []

    def states(input_ids, rows, positions):
        caps.append(scorer.runner.token_cap)
        return parts.states(input_ids, rows, positions)

    monkeypatch.setattr(scorer.runner, "parts", dataclasses.replace(parts, states=states))
    scorer.runner.run(work, [batch])
    failed = [tokens for tokens, fitted in tried if not fitted]
    assert failed == sorted(failed, reverse=True) and len(set(failed)) == len(failed)
    assert all(
        cap is None or tokens <= cap or tokens == length
        for (tokens, _), cap in zip(tried, caps, strict=True)
    )
    assert scorer.runner.token_cap == length


def test_a_few_long_documents_move_the_count_before_any_of_them_is_done(request):
    """A perplexity task of a few long documents: their windows share the batches of one
    group, so no document is done before the last batches, yet the count moves with every
    batch's share of the work and ends at the number of documents."""
    scorer = PLLScorer.from_pretrained(
        request.getfixturevalue("tiny_bert_dir"), max_batch_tokens=200, max_length=24
    )
    documents = [" ".join([TEXTS[i], TEXTS[i + 1], TEXTS[i + 4]] * 3) for i in range(3)]
    seen: list[int] = []
    scorer.score_requests([("", d) for d in documents], progress=seen.append)
    jobs, work = planned_texts(scorer, documents)
    assert len(work.batches) > 6 and sum(seen) == 3
    assert seen == progress_by_definition(scorer, jobs, [1, 1, 1])
    assert sum(1 for count in seen[:-1] if count) >= 2  # it moved before the end


def planned_texts(scorer: PLLScorer, texts: list[str]) -> tuple[Jobs, Work]:
    _, jobs = scorer.distinct_jobs([("", t) for t in texts])
    return jobs, scorer.plan_work(jobs.encodings)


class QueuedEvent:
    """A stand-in for a CUDA event on a device that runs nothing until the host waits:
    ``query`` is False until ``synchronize``, which finishes every batch queued before."""

    recorded: ClassVar[list[QueuedEvent]] = []

    def __init__(self, blocking: bool = False) -> None:
        self.done, self.blocking = False, blocking

    def record(self, stream: object = None) -> None:
        QueuedEvent.recorded.append(self)

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        for event in QueuedEvent.recorded[: QueuedEvent.recorded.index(self) + 1]:
            event.done = True


def test_runs_launched_into_one_queue_keep_it_full_across_their_ends(monkeypatch):
    """The parts of a run go to one InFlight: the second part's batches queue behind the
    first's without waiting for its end, the host never holds more than BATCHES_IN_FLIGHT
    unfinished, and every batch of every part is reported once, in order, by the end.  The
    host waits asleep (blocking events), leaving the cores to the threads that prepare and
    assemble parts."""
    monkeypatch.setattr(torch.cuda, "Event", QueuedEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: None)
    monkeypatch.setattr(QueuedEvent, "recorded", [])
    in_flight = runner_module.InFlight(torch.device("cuda"))
    reported, queued = [], []
    for part, batches in (("first", 5), ("second", 12)):
        for position in range(batches):
            in_flight.launched(position, lambda k, part=part: reported.append((part, k)))
            queued.append(len(in_flight.pending))
    assert max(queued) == runner_module.BATCHES_IN_FLIGHT
    assert queued[5] == 6  # the first part's batches were still queued, none waited for
    in_flight.finish()
    assert not in_flight.pending
    assert all(event.blocking for event in QueuedEvent.recorded)
    assert reported == [("first", k) for k in range(5)] + [("second", k) for k in range(12)]


def test_runs_launched_one_after_another_score_as_run_alone(scorer):
    """What launch hands back is the run's results once waited for, whoever waits."""
    _, work = planned(scorer)
    alone = scorer.runner.run(work)
    in_flight = runner_module.InFlight(scorer.runner.device)
    planned_batches = [(work.groups[b.group], b) for b in work.batches]
    first = scorer.runner.launch(work.metric, work.n_slots, planned_batches[:3], in_flight)
    second = scorer.runner.launch(work.metric, work.n_slots, planned_batches[3:], in_flight)
    in_flight.finish()
    one, two = first.wait(), second.wait()
    (pooled,) = pool_target_scores([one], GatheredGroup([scored_slots([one]), scored_slots([two])]))
    assert bool(torch.isnan(one.logprobs).any())  # the runs really are partial
    assert torch.equal(pooled.logprobs, alone.logprobs)
    assert torch.equal(pooled.greedy, alone.greedy)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_runs_launched_back_to_back_come_back_whole(tiny_bert_dir):
    """On CUDA, launch returns before the device is done and the results travel into
    pinned memory behind the batches: once waited for, from another thread too, they are
    those of a run that waited at its end, bit for bit, on whichever GPU the scorer uses
    (the last: not the current one, where there are two).  Every batch first keeps the
    GPU busy for a while, so that a wait that returned early would find NaN."""
    device = f"cuda:{torch.cuda.device_count() - 1}"
    scorer = PLLScorer.from_pretrained(
        tiny_bert_dir, "word_l2r", device=device, max_batch_tokens=120
    )
    _, work = planned(scorer)
    alone = scorer.runner.run(work)
    score_batch = scorer.runner._score_batch

    def slow_batch(*args):
        with torch.cuda.device(device):
            torch.cuda._sleep(20_000_000)  # GPU cycles: about 10 ms
        score_batch(*args)

    scorer.runner._score_batch = slow_batch
    in_flight = runner_module.InFlight(scorer.runner.device)
    done = []
    halves = (work.batches[: len(work.batches) // 2], work.batches[len(work.batches) // 2 :])
    pending = [
        scorer.runner.launch(work.metric, work.n_slots, work.planned(half), in_flight, done.append)
        for half in halves
    ]
    with ThreadPoolExecutor(1) as other_thread:
        results = [other_thread.submit(part.wait).result() for part in pending]
    in_flight.finish()
    assert done == [*range(len(halves[0])), *range(len(halves[1]))]
    assert all(part.logprobs.is_pinned() for part in results)
    pooled = torch.where(torch.isnan(results[0].logprobs), results[1].logprobs, results[0].logprobs)
    assert torch.equal(pooled, alone.logprobs)
