"""Which part of a run a request belongs to, and preparing the next part in a thread."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from pll_harness.parts import (
    PART_SHARES,
    in_parts,
    prepared_ahead,
    request_digests,
    request_parts,
)

REQUESTS = [("", f"Sentence number {i} is here.") for i in range(20_000)] + [
    (f"Context {i}:", f" answer {i}") for i in range(12_000)
]


def test_parts_take_their_shares_of_the_requests():
    """32,000 requests; each part's count is within 4 standard deviations of its share
    (binomial), and every part has requests."""
    counts = np.bincount(request_parts(REQUESTS), minlength=len(PART_SHARES))
    assert counts.shape == (len(PART_SHARES),)
    n, shares = len(REQUESTS), np.array(PART_SHARES) / sum(PART_SHARES)
    assert np.all(np.abs(counts - n * shares) < 4 * np.sqrt(n * shares * (1 - shares)))


def test_a_request_is_in_the_same_part_wherever_it_stands():
    parts = request_parts(REQUESTS)
    order = np.random.default_rng(0).permutation(len(REQUESTS))
    shuffled = request_parts([REQUESTS[i] for i in order])
    assert np.array_equal(shuffled, parts[order])
    assert request_parts([]).shape == (0,)


def test_the_context_counts_as_well_as_the_continuation():
    parts = request_parts(
        [("", f"x{i}") for i in range(200)] + [("c", f"x{i}") for i in range(200)]
    )
    assert not np.array_equal(parts[:200], parts[200:])


def test_every_split_of_a_text_is_its_own_request():
    """Processes count the distinct requests of all by these digests: a context's end
    moved into the continuation is another request, scored otherwise."""
    text = "A cat sat."
    splits = [(text[:cut], text[cut:]) for cut in range(len(text) + 1)]
    assert len(set(request_digests(splits).tolist())) == len(splits)


def test_parts_are_the_same_in_every_process():
    """Data-parallel processes must agree: Python's own string hash differs between
    processes (PYTHONHASHSEED), which a hash-based part would follow."""
    code = (
        "from pll_harness.parts import request_parts; "
        "print(request_parts([('', f'Sentence {i}.') for i in range(300)]).tolist())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    here = str(request_parts([("", f"Sentence {i}.") for i in range(300)]).tolist())
    assert outputs == {here + "\n"}


def test_in_parts_orders_part_after_part_and_keeps_the_order_within_a_part():
    parts = np.array([2, 0, 4, 0, 2, 1])
    order, bounds = in_parts(parts)
    assert order.tolist() == [1, 3, 5, 0, 4, 2]
    assert bounds.tolist() == [0, 2, 3, 5, 5, 6]


def test_items_prepared_ahead_come_in_order_and_are_made_meanwhile():
    """While the caller holds the first item, the others are made in another thread, the
    last included, without the caller asking for them: which a producer run only when the
    caller asks for the next item, or only one item ahead, would never do."""
    making = [threading.Event() for _ in range(3)]

    def items():
        for k in range(3):
            making[k].set()
            yield k, threading.current_thread().name

    got, last_begun = [], []
    for k, thread in prepared_ahead(items()):
        got.append((k, thread))
        if k == 0:
            last_begun.append(making[-1].wait(timeout=5))
    assert [k for k, _ in got] == [0, 1, 2]
    assert last_begun == [True]
    assert all(thread != threading.current_thread().name for _, thread in got)


def test_items_are_made_before_the_caller_asks_for_the_first():
    """The thread starts with the call, not with the first item taken: the scorer takes
    assembled parts only after launching the last one."""
    made = threading.Event()

    def items():
        made.set()
        yield "assembled"

    ahead = prepared_ahead(items(), name="pll-test")
    assert made.wait(timeout=5)
    assert list(ahead) == ["assembled"]


def test_an_error_while_preparing_is_raised_where_its_item_would_come():
    def items():
        yield 1
        raise ValueError("part 2 failed")

    seen = []
    with pytest.raises(ValueError, match="part 2 failed"):
        for item in prepared_ahead(items()):
            seen.append(item)
    assert seen == [1]


def test_a_caller_that_stops_does_not_wait_for_the_item_in_progress():
    release = threading.Event()

    def items():
        yield 1
        release.wait(timeout=10)
        yield 2

    started = time.perf_counter()
    ahead = prepared_ahead(items())
    assert next(ahead) == 1
    ahead.close()
    assert time.perf_counter() - started < 5
    release.set()


def test_no_item_is_made_after_the_caller_stopped():
    made = []

    def items():
        while True:
            made.append(len(made))
            time.sleep(0.001)
            yield made[-1]

    ahead = prepared_ahead(items())
    assert next(ahead) == 0
    ahead.close()
    time.sleep(0.05)
    count = len(made)
    time.sleep(0.1)
    assert len(made) <= count + 1


def test_a_caller_that_stops_before_taking_an_item_stops_the_thread_too():
    """The scorer stops its assembling thread this way when a run fails before the end:
    the item in progress is the last one made."""
    release = threading.Event()
    made = []

    def items():
        for k in range(5):
            if k == 0:
                release.wait(timeout=10)
            made.append(k)
            yield k

    ahead = prepared_ahead(items())
    ahead.close()
    release.set()
    time.sleep(0.2)
    assert made == [0]
    assert list(ahead) == []


def test_in_parts_keeps_the_order_within_each_part_of_many_requests():
    """Stable on large inputs too, where numpy's default sort is not (on six elements
    every sort is stable, so the test above cannot tell)."""
    parts = np.random.default_rng(0).integers(0, len(PART_SHARES), 10_000)
    order, bounds = in_parts(parts)
    for start, stop in itertools.pairwise(bounds.tolist()):
        assert (np.diff(order[start:stop]) > 0).all()
        assert (parts[order[start:stop]] == parts[order[start]]).all()
