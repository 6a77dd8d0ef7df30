"""The bulk planner against a per-text, obviously-correct plan, on WordPiece and BPE.

Tolerance is zero: planning is integer work.  For every scored token the planner's masked
copy must equal the copy a plain loop over the metric's definition builds (the same one
the float64 reference in ``reference_pll`` scores), batches must cover every copy once
within their limits, and the plan must not depend on the order of the texts, which is
what lets data-parallel processes reproduce one process exactly.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from reference_pll import masked_set

from pll_harness import planning
from pll_harness.encoding import Encodings, SpecialTokens, encode_requests, special_tokens
from pll_harness.metrics import PLL_METRICS, get_metric
from pll_harness.planning import MAX_BATCH_ROWS, Batching, Work, plan_work

REQUESTS = [
    ("", "The hooligan wrecked the souvenir."),
    ("", "The traveler lost the souvenir."),
    ("", "A cat sat."),
    ("", "Who should Derek hug after shocking Richard?"),
    ("", "These dogs, unlike that cat, weren't barking at 3:45 in the morning!"),
    ("", "The teachers who the student admires have praised the orchestra."),
    ("", "Hi"),
    ("", "A dog sat."),
    ("The hooligan wrecked the sou", "venir."),
    ("The hooligan", " wrecked the souvenir."),
    ("A cat", " sat."),  # the same tokens as "A cat sat." but another target range
    ("  ", "A cat sat. "),  # the same tokens and targets as "A cat sat.": a twin
    ("Nothing to score", ""),
    # answer choices after one context: one-token targets at the same position, the same
    # mask, in sequences that differ there: each must get its own sequence's copy
    ("A cat", " ran"),
    ("A cat", " the"),
    ("A dog", "."),
]


@pytest.fixture(scope="module", params=["tiny_bert_dir", "tiny_roberta_dir"])
def tokenizer(request):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(request.getfixturevalue(request.param))


BUDGET = Batching(120)


def planned(tokenizer, metric="word_l2r", capacity=62, batching=BUDGET, requests=REQUESTS):
    encodings = encode_requests(tokenizer, requests)
    work = plan_work(encodings, special_tokens(tokenizer), capacity, get_metric(metric), batching)
    return encodings, work


def fed_copies(work: Work, mask_id: int) -> dict[int, tuple[int, ...]]:
    """slot -> the masked input the model sees when that slot's token is scored."""
    fed = {}
    for batch in work.batches:
        inputs = work.inputs(batch, mask_id)
        for row, slot in zip(inputs.rows.tolist(), inputs.slots.tolist(), strict=True):
            assert slot not in fed, "a token is scored twice"
            fed[slot] = tuple(inputs.input_ids[row].tolist())
    return fed


def naive_copies(tokenizer, encodings: Encodings, metric: str) -> dict[int, tuple]:
    """slot -> masked input, text by text, with the reference's definition of the mask."""
    specials = special_tokens(tokenizer)
    prefix = len(specials.prefix)
    copies, slot = {}, 0
    for index in range(len(encodings)):
        encoded = encodings.item(index)
        ids = [*specials.prefix, *encoded.ids, *specials.suffix]
        words = [None] * prefix + [w if w >= 0 else None for w in encoded.word_ids]
        words += [None] * len(specials.suffix)
        targets = list(range(prefix + encoded.first_target, prefix + len(encoded.ids)))
        for target in targets:
            hidden = masked_set(words, targets, target, metric)
            copies[slot] = tuple(
                tokenizer.mask_token_id if j in hidden else token for j, token in enumerate(ids)
            )
            slot += 1
    return copies


@pytest.mark.parametrize("metric", PLL_METRICS)
@pytest.mark.parametrize(
    "batching", [Batching(120), Batching(16), Batching(200, 2), Batching(4096, 1)], ids=str
)
def test_every_token_gets_the_copy_its_definition_asks_for(tokenizer, metric, batching):
    encodings, work = planned(tokenizer, metric, batching=batching)
    fed = fed_copies(work, tokenizer.mask_token_id)
    expected = naive_copies(tokenizer, encodings, metric)
    assert work.n_slots == len(expected)
    for slot in range(work.n_slots):
        source = int(work.slot_source[slot])
        assert fed[source] == expected[slot], f"slot {slot}"


def test_identical_sequences_are_scored_once(tokenizer):
    _, work = planned(tokenizer)
    twins = np.flatnonzero(work.slot_source != np.arange(work.n_slots))
    plain, spaced = REQUESTS.index(("", "A cat sat.")), REQUESTS.index(("  ", "A cat sat. "))
    first, second = sorted((plain, spaced))
    assert twins.tolist() == list(range(*work.slot_offsets[second : second + 2]))
    assert work.slot_source[twins].tolist() == list(range(*work.slot_offsets[first : first + 2]))


def test_a_works_batches_come_with_their_groups_and_none_means_none(tokenizer):
    """A data-parallel process may own no batch of a part: it runs none, not all."""
    _, work = planned(tokenizer)
    assert [batch for _, batch in work.planned()] == list(work.batches)
    assert all(group is work.groups[batch.group] for group, batch in work.planned())
    assert list(work.planned([])) == []
    assert [batch for _, batch in work.planned(work.batches[1:2])] == [work.batches[1]]


@pytest.mark.parametrize("batch_size", [None, 1, 2])
def test_every_copy_is_in_exactly_one_batch_within_the_limits(tokenizer, batch_size):
    batching = Batching(max_batch_tokens=120, batch_size=batch_size)
    _, work = planned(tokenizer, "whole_word", batching=batching)
    covered = {index: [] for index in range(len(work.groups))}
    for batch in work.batches:
        group = work.groups[batch.group]
        rows = batch.stop - batch.first
        assert 0 < rows <= batching.rows_for(group.length)
        assert work.cost(batch) == rows * group.length
        assert work.cost(batch) <= batching.max_batch_tokens or rows == 1
        assert rows <= MAX_BATCH_ROWS
        if batch_size:
            assert len(set(group.copy_sequence[batch.first : batch.stop])) <= batch_size
        covered[batch.group].append((batch.first, batch.stop))
    for index, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == work.groups[index].n_copies
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert len(work.batches) > 3  # the budget forces several batches


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_a_batchs_target_rows_are_non_decreasing_and_name_every_copy(tokenizer, metric):
    """The contract the encoder's last layer relies on (architectures.LastLayer): with as
    many targets as copies, target t is copy t's, so keys and values need no gather."""
    long_text = ("", " ".join(["The hooligan wrecked the souvenir."] * 12))
    _, work = planned(tokenizer, metric, capacity=30, requests=[*REQUESTS, long_text])
    for batch in work.batches:
        rows = work.inputs(batch, 0).rows
        assert (np.diff(rows) >= 0).all()
        assert np.array_equal(np.unique(rows), np.arange(batch.stop - batch.first))


def test_no_batch_holds_more_copies_than_a_cuda_grid_dimension(tokenizer, monkeypatch):
    """A GPU's token budget allows far more short copies than the 65,535 rows that CUDA
    kernels (cuDNN's attention among them) accept in one batch."""
    assert Batching(1 << 20).rows_for(6) == planning.MAX_BATCH_ROWS == 65535
    monkeypatch.setattr(planning, "MAX_BATCH_ROWS", 3)
    _, work = planned(tokenizer, "word_l2r", batching=Batching(1 << 20))
    assert max(batch.stop - batch.first for batch in work.batches) == 3


def test_whole_word_shares_one_copy_per_word(tokenizer):
    """`ho ##ol ##ig ##an` is one word: whole_word scores its 4 pieces from one copy."""
    _, whole = planned(tokenizer, "whole_word", requests=[("", "The hooligan wrecked it.")])
    _, single = planned(tokenizer, "original", requests=[("", "The hooligan wrecked it.")])
    n_words = len(set(tokenizer("The hooligan wrecked it.").word_ids()) - {None})
    assert whole.groups[0].n_copies == n_words < single.groups[0].n_copies


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_copies_are_shared_across_planning_chunks(tokenizer, metric, monkeypatch):
    """Masks are built in chunks of targets; with one target a chunk, a copy that two
    targets of one word share (whole_word) must still be made once, and every token must
    still get its own definition's copy."""
    encodings, whole = planned(tokenizer, metric)
    monkeypatch.setattr(planning, "PLAN_CHUNK_ELEMENTS", 1)
    _, chunked = planned(tokenizer, metric)
    assert [g.n_copies for g in chunked.groups] == [g.n_copies for g in whole.groups]
    fed = fed_copies(chunked, tokenizer.mask_token_id)
    expected = naive_copies(tokenizer, encodings, metric)
    for slot in range(chunked.n_slots):
        assert fed[int(chunked.slot_source[slot])] == expected[slot], f"slot {slot}"


def batch_contents(work: Work, mask_id: int) -> list[list[tuple]]:
    """Batches described by the inputs they feed, independent of text indices."""
    return [sorted(map(tuple, work.inputs(b, mask_id).input_ids.tolist())) for b in work.batches]


def test_batches_do_not_depend_on_the_order_of_the_texts(tokenizer):
    encodings, work = planned(tokenizer, "word_l2r", batching=Batching(40))
    order = list(range(len(encodings)))
    random.Random(3).shuffle(order)
    shuffled = plan_work(
        encodings.select(np.array(order)),
        special_tokens(tokenizer),
        62,
        get_metric("word_l2r"),
        Batching(40),
    )
    mask = tokenizer.mask_token_id
    assert batch_contents(work, mask) == batch_contents(shuffled, mask)


def test_long_texts_are_windowed_and_every_token_scored_once(tokenizer):
    text = " ".join(["The hooligan wrecked the souvenir of the traveler."] * 6)
    encodings, work = planned(tokenizer, "word_l2r", capacity=20, requests=[("", text)])
    n_tokens = int(encodings.lengths[0])
    assert n_tokens > 40  # several windows
    fed = fed_copies(work, tokenizer.mask_token_id)
    assert sorted(fed) == list(range(n_tokens))
    assert all(len(copy) <= 20 + special_tokens(tokenizer).count for copy in fed.values())
    assert work.truncated == 0


def test_a_context_too_long_for_the_model_is_cut_and_counted(tokenizer):
    context = " ".join(["The hooligan wrecked the souvenir."] * 8)
    encodings, work = planned(tokenizer, capacity=20, requests=[(context, " A cat sat.")])
    assert work.truncated == 1
    assert work.n_slots == int(encodings.n_targets[0])


def test_groups_are_planned_when_their_first_batch_is_reached(tokenizer):
    """Iterating a WorkPlanner hands out the batches of the plan made all at once, in its
    order, and plans each group only when the runner reaches it; the slot sources (twins
    answering for each other) end up the same."""
    requests = [*REQUESTS, ("", " ".join(["The hooligan wrecked the souvenir."] * 4))]
    encodings = encode_requests(tokenizer, requests)
    arguments = (encodings, special_tokens(tokenizer), 20, get_metric("word_l2r"), Batching(40))
    whole = plan_work(*arguments)
    planner = planning.WorkPlanner(*arguments)
    assert planner.groups == [] and planner.truncated == whole.truncated == 0
    assert planner.n_slots == whole.n_slots
    seen = []
    for group, batch in planner:
        assert len(planner.groups) == batch.group + 1  # this group, none after it
        assert group is planner.groups[batch.group]
        seen.append(batch)
    assert len(whole.groups) > 3 and seen == list(whole.batches)
    streamed = planner.work()
    assert streamed.batches == whole.batches
    assert np.array_equal(streamed.slot_source, whole.slot_source)
    assert not np.array_equal(whole.slot_source, np.arange(whole.n_slots))  # twins exist
    mask = tokenizer.mask_token_id
    assert fed_copies(streamed, mask) == fed_copies(whole, mask)
    lengths = [group.length for group in whole.groups]
    assert [group.length for group in streamed.groups] == lengths == sorted(lengths)[::-1]


def test_a_plan_whose_planning_was_interrupted_is_not_passed_off_as_whole(tokenizer, monkeypatch):
    encodings = encode_requests(tokenizer, REQUESTS)
    arguments = (encodings, special_tokens(tokenizer), 62, get_metric("word_l2r"), BUDGET)
    planner = planning.WorkPlanner(*arguments)
    plan_group, calls = planning._group, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return plan_group(*args)

    monkeypatch.setattr(planning, "_group", interrupted)
    with pytest.raises(KeyboardInterrupt):
        list(planner)
    with pytest.raises(RuntimeError, match="Planning stopped after 1 of"):
        planner.work()


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_windows_that_differ_only_in_which_tokens_are_context_are_not_merged(tokenizer, metric):
    """Two windows with the same tokens, words and targets are twins only if the same
    tokens around the targets are context: the text scored whole, and the text whose
    context ends inside a word (`... s | ##ou ##v ##en ##ir`) exactly where a chunk of
    targets starts.  Under whole_word the whole text's copy hides the word's first piece,
    while the other keeps it, as context, visible.  Planned together, each text must get
    the copies it gets alone (kills dropping ``scored`` from the twin test in _group)."""
    text = " ".join(["The hooligan wrecked the souvenir."] * 6)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    first = 10  # a chunk's first target: windows of 20 tokens score chunks of 10
    assert encoded.word_ids()[first] == encoded.word_ids()[first - 1]  # inside a word
    cut = encoded["offset_mapping"][first][0]
    requests = [("", text), (text[:cut], text[cut:])]

    def fed(requests):
        _, work = planned(tokenizer, metric, capacity=2 * first, requests=requests)
        copies = fed_copies(work, tokenizer.mask_token_id)
        return [copies[int(source)] for source in work.slot_source]

    together = fed(requests)
    alone = [copy for request in requests for copy in fed([request])]
    assert together == alone


def test_sequences_with_the_same_tokens_but_other_words_are_not_merged():
    """Twins need the same words as well as the same tokens: tokens 7 8 as one word and
    as two words mask differently under whole_word (kills dropping ``words`` from the twin
    test in _group)."""
    encodings = Encodings.from_lists([[7, 8], [7, 8]], [[0, 0], [0, 1]], [0, 0])
    specials = SpecialTokens((1,), (2,))
    work = plan_work(encodings, specials, 62, get_metric("whole_word"), BUDGET)
    fed = fed_copies(work, 0)
    copies = [fed[int(source)] for source in work.slot_source]
    assert copies == [(1, 0, 0, 2), (1, 0, 0, 2), (1, 0, 8, 2), (1, 7, 0, 2)]
