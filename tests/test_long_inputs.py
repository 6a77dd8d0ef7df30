"""Inputs longer than the model accepts, against a reference written from the README alone.

README, "Request semantics": a context that does not fit is cut from the left (a one-time
warning); a continuation that alone does not fit is scored in overlapping windows of the
maximum length, each token once, its targets (chunks of half the maximum length) in the
middle of the window; the metrics apply to what each window shows.  The reference below
builds every window's input ids by hand from the tokenizer's own output (its special
tokens, its offsets, its word ids) and scores one masked copy per target in float64; it
calls no planning code of pll_harness.  The engine must give the same tokens in the same
order, each once, and the same log-probabilities (float32 against float64: within 2e-5
nats per token, so a text of n tokens within n x 2e-5; the largest difference seen is
7.3e-6 per token), and the masked copies it feeds the model must be exactly the
reference's.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass

import pytest
import torch
from conftest import TINY_BERT_DIR, TINY_ROBERTA_DIR, TINY_SENTENCEPIECE_DIR
from lm_eval.api.instance import Instance
from reference_pll import float64_model, masked_set
from transformers import AutoModelForMaskedLM, AutoTokenizer

from pll_harness.cli import main as cli_main
from pll_harness.lm import PLLMaskedLM
from pll_harness.metrics import PLL_METRICS
from pll_harness.scorer import PLLScorer

TOKEN_TOLERANCE = 2e-5

PASSAGE = (
    "The traveler lost the souvenir near the old harbour. Hooligans wrecked unbelievably "
    "extraordinary photographs, didn't they? A cat sat on the mat while the photographer "
    "misunderstood everything about the neighbourhood's characteristics."
)
WORDS = PASSAGE.split()
"""Words of many pieces in all three tokenizers (``unbelievably``: 11 WordPiece pieces),
so that words straddle window edges and the boundaries between windows' targets."""

FILLER = " the"
"""One token more in each fixture's tokenizer, whatever precedes it."""

FIXTURES = [TINY_BERT_DIR, TINY_ROBERTA_DIR, TINY_SENTENCEPIECE_DIR]


@dataclass(frozen=True)
class Fixture:
    tokenizer: object
    model: torch.nn.Module
    model64: torch.nn.Module


@pytest.fixture(scope="module", params=FIXTURES, ids=[path.name for path in FIXTURES])
def fixture(request: pytest.FixtureRequest) -> Fixture:
    path = request.param
    model = AutoModelForMaskedLM.from_pretrained(path)
    return Fixture(AutoTokenizer.from_pretrained(path), model, float64_model(model))


def n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def exact_text(tokenizer, length: int, shift: int = 0) -> str:
    """A text of exactly ``length`` tokens (special tokens not counted): ``shift`` fillers,
    then whole words of WORDS, then fillers.  Shifting moves every word across the fixed
    window edges."""
    words = ["the"] * shift
    index = 0
    while n_tokens(tokenizer, " ".join([*words, WORDS[index % len(WORDS)]])) <= length:
        words.append(WORDS[index % len(WORDS)])
        index += 1
    text = " ".join(words)
    text += FILLER * (length - n_tokens(tokenizer, text))
    assert n_tokens(tokenizer, text) == length
    return text


def reference_windows(n: int, first: int, capacity: int) -> list[tuple[int, int, int, int]]:
    """``(start, end, target_start, target_end)`` of each window, in text tokens, as the
    README words it: all in one input when it fits; else, when the continuation (tokens
    ``first:``) fits, the last ``capacity`` tokens; else chunks of half the maximum length
    (the capacity), each in the middle of a window of the full capacity, the window moved
    inward at the text's ends."""
    if n <= capacity:
        return [(0, n, first, n)]
    if n - first <= capacity:
        return [(n - capacity, n, first, n)]
    half = max(1, capacity // 2)
    windows = []
    for target_start in range(first, n, half):
        target_end = min(target_start + half, n)
        before = (capacity - (target_end - target_start)) // 2
        start = min(max(target_start - before, 0), n - capacity)
        windows.append((start, start + capacity, target_start, target_end))
    return windows


@dataclass(frozen=True)
class Reference:
    """Each scored token's index in the text, id, log-probability and masked input."""

    index: list[int]
    ids: list[int]
    logprobs: list[float]
    rows: list[tuple[int, ...]]
    words: list[int | None]
    windows: list[tuple[int, int, int, int]]


@torch.no_grad()
def reference(
    fixture: Fixture, context: str, continuation: str, metric: str, max_length: int
) -> Reference:
    """Score ``continuation`` after ``context`` as the README says, one copy per target."""
    tokenizer = fixture.tokenizer
    full = context + continuation
    text = full.strip()
    boundary = len(context) - (len(full) - len(full.lstrip()))
    encoding = tokenizer(
        text,
        add_special_tokens=True,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        verbose=False,
    )
    special = encoding["special_tokens_mask"]
    before, after = special.index(0), len(special) - special[::-1].index(0)
    every = encoding["input_ids"]
    prefix, suffix, ids = every[:before], every[after:], every[before:after]
    words = encoding.word_ids()[before:after]
    offsets = encoding["offset_mapping"][before:after]
    first = next(
        (i for i, (start, end) in enumerate(offsets) if end > boundary or start >= boundary),
        len(ids),
    )
    windows = reference_windows(len(ids), first, max_length - len(prefix) - len(suffix))
    result = Reference([], [], [], [], words, windows)
    for start, end, target_start, target_end in windows:
        window = [*prefix, *ids[start:end], *suffix]
        window_words = [None] * len(prefix) + words[start:end] + [None] * len(suffix)
        continuation_positions = [len(prefix) + i - start for i in range(max(start, first), end)]
        positions = [len(prefix) + t - start for t in range(target_start, target_end)]
        rows = []
        for position in positions:
            row = list(window)
            for j in masked_set(window_words, continuation_positions, position, metric):
                row[j] = tokenizer.mask_token_id
            rows.append(tuple(row))
        logprobs = torch.log_softmax(fixture.model64(input_ids=torch.tensor(rows)).logits, -1)
        for k, (t, position) in enumerate(
            zip(range(target_start, target_end), positions, strict=True)
        ):
            result.index.append(t)
            result.ids.append(ids[t])
            result.logprobs.append(float(logprobs[k, position, ids[t]]))
            result.rows.append(rows[k])
    return result


def engine(scorer: PLLScorer, requests: list[tuple[str, str]]) -> tuple[list, set]:
    """The engine's scores of ``requests`` and every masked copy it fed the model."""
    fed: set[tuple[int, ...]] = set()

    def record(module, args) -> None:
        fed.update(map(tuple, args[0].tolist()))

    hook = scorer.model.get_input_embeddings().register_forward_pre_hook(record)
    try:
        scores = scorer.score_requests(requests)
    finally:
        hook.remove()
    return scores, fed


def check_against_reference(
    fixture: Fixture, requests: list[tuple[str, str]], metric: str, max_length: int
) -> list[Reference]:
    """Score ``requests`` in one engine call and compare each with the reference."""
    scorer = PLLScorer(
        fixture.model, fixture.tokenizer, pll_metric=metric, device="cpu", max_length=max_length
    )
    scores, fed = engine(scorer, requests)
    references = [reference(fixture, *request, metric, max_length) for request in requests]
    for score, expected in zip(scores, references, strict=True):
        assert list(score.token_ids) == expected.ids
        assert score.token_logprobs == pytest.approx(expected.logprobs, abs=TOKEN_TOLERANCE)
    assert fed == {row for expected in references for row in expected.rows}
    assert all(len(row) <= max_length for row in fed)
    return references


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_texts_around_and_beyond_the_limit_match_the_reference(fixture, metric):
    """Lengths max_length-3 .. max_length+3 and 2-5 times max_length, special tokens
    counted: every token once, in order, from the window the README describes."""
    limit = 64
    specials = fixture.tokenizer.num_special_tokens_to_add()
    lengths = [*range(limit - 3, limit + 4), *(k * limit for k in range(2, 6))]
    texts = [exact_text(fixture.tokenizer, length - specials) for length in lengths]
    references = check_against_reference(fixture, [("", t) for t in texts], metric, limit)
    capacity = limit - specials
    for length, expected in zip(lengths, references, strict=True):
        assert expected.index == list(range(length - specials))
        assert (len(expected.windows) > 1) == (length > limit)
        for start, end, target_start, target_end in expected.windows[1:]:
            assert end - start == capacity
            if start > 0 and end < length - specials:  # not moved inward at an end
                assert abs((target_start - start) - (end - target_end)) <= 1


def straddles(expected: Reference) -> tuple[int, int]:
    """How many windows' target chunks begin inside a word that began in an earlier chunk,
    and how many targets belong to a word that a window's edge cuts."""
    words, windows = expected.words, expected.windows
    chunk = sum(words[a - 1] == words[a] for _, _, a, _ in windows[1:])
    cut = sum(
        (start > 0 and words[start - 1] == words[t])
        or (end < len(words) and words[end] == words[t])
        for start, end, a, b in windows
        for t in range(a, b)
    )
    return chunk, cut


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_words_across_window_edges_are_masked_within_the_window(fixture, metric):
    """Small windows (max_length 12 and 13: targets 5 and 5, margins of 2 and 3 tokens) so
    that words of many pieces straddle both a window's edge and the boundary between two
    windows' targets: what is masked is the metric's definition applied to what the window
    shows (the copies fed to the model are exactly the reference's)."""
    texts = [exact_text(fixture.tokenizer, 40, shift) for shift in range(4)]
    chunk = cut = 0
    for max_length in (12, 13):
        for expected in check_against_reference(
            fixture, [("", t) for t in texts], metric, max_length
        ):
            found = straddles(expected)
            chunk, cut = chunk + found[0], cut + found[1]
    assert chunk > 10 and cut > 10


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_contexts_and_continuations_beyond_the_limit_match_the_reference(fixture, metric):
    """A long context before a short continuation, before one that fits just, and before
    one longer than the limit; a short context before a long continuation."""
    tokenizer = fixture.tokenizer
    requests = [
        (exact_text(tokenizer, 150, shift), " the souvenir near the old harbour.")
        for shift in range(3)
    ]
    requests += [
        (exact_text(tokenizer, 100), " " + exact_text(tokenizer, 62)),
        (exact_text(tokenizer, 100), " " + exact_text(tokenizer, 63)),
        (exact_text(tokenizer, 100), " " + exact_text(tokenizer, 150, 1)),
        ("The", " " + exact_text(tokenizer, 150, 2)),
    ]
    check_against_reference(fixture, requests, metric, 64)


def scorer_for(fixture: Fixture, **kwargs) -> PLLScorer:
    return PLLScorer(fixture.model, fixture.tokenizer, device="cpu", **kwargs)


def test_a_long_context_is_the_explicitly_cut_context(fixture):
    """Scoring a context too long for the model equals scoring the context cut by hand to
    the tokens that fit, wherever the cut text makes the same tokens (not where the cut
    splits a word, nor before a byte-level BPE token marked with its space)."""
    tokenizer = fixture.tokenizer
    scorer = scorer_for(fixture)
    capacity = scorer.max_length - tokenizer.num_special_tokens_to_add()
    continuation = " the souvenir near the old harbour."
    compared = 0
    for shift in range(12):
        context = exact_text(tokenizer, 150, shift)
        encoding = tokenizer(
            context + continuation, add_special_tokens=False, return_offsets_mapping=True
        )
        start = len(encoding["input_ids"]) - capacity
        cut = context[encoding["offset_mapping"][start][0] :]
        if (
            tokenizer(cut + continuation, add_special_tokens=False)["input_ids"]
            != (encoding["input_ids"][start:])
        ):
            continue
        (long,) = scorer.score_requests([(context, continuation)])
        (short,) = scorer.score_requests([(cut, continuation)])
        assert long.token_ids == short.token_ids
        assert long.token_logprobs == pytest.approx(short.token_logprobs, abs=1e-6)
        compared += 1
    assert compared >= 2


def test_context_cuts_are_reported_once(fixture, caplog):
    """One warning for every cut context of a scorer's life, whether its continuation fits
    or is windowed; none where the context is not cut."""
    tokenizer = fixture.tokenizer
    scorer = scorer_for(fixture)
    long_continuation = " " + exact_text(tokenizer, 150, 1)
    with caplog.at_level(logging.WARNING):
        scorer.score_requests([("The", long_continuation), ("", exact_text(tokenizer, 200))])
    assert "cut from the left" not in caplog.text
    with caplog.at_level(logging.WARNING):
        scorer.score_requests([(exact_text(tokenizer, 100), long_continuation)])
    assert caplog.text.count("cut from the left") == 1
    with caplog.at_level(logging.WARNING):
        scorer.score_requests([(exact_text(tokenizer, 100, k), " the souvenir.") for k in range(3)])
        scorer.score_requests([(exact_text(tokenizer, 100), long_continuation)])
    assert caplog.text.count("cut from the left") == 1


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_a_lower_max_length_matches_the_reference(fixture, metric):
    """``max_length`` below the model's, down to one text token per input."""
    tokenizer = fixture.tokenizer
    requests = [
        ("", exact_text(tokenizer, 40)),
        (exact_text(tokenizer, 30), " the souvenir near the old harbour."),
    ]
    specials = tokenizer.num_special_tokens_to_add()
    for max_length in (specials + 1, specials + 2, specials + 5, 33):
        check_against_reference(fixture, requests, metric, max_length)


def test_max_length_beyond_the_model_is_refused(fixture):
    assert scorer_for(fixture, max_length=64).max_length == 64
    with pytest.raises(ValueError, match="exceeds what this model accepts"):
        scorer_for(fixture, max_length=65)
    with pytest.raises(ValueError, match="leaves no room"):
        scorer_for(fixture, max_length=fixture.tokenizer.num_special_tokens_to_add())


def test_a_tokenizer_that_declares_less_than_the_model_takes_sets_only_the_default(fixture, caplog):
    """Some checkpoints ship a tokenizer whose model_max_length is shorter than the model's
    position table.  It is the default, but a longer max_length is taken (with a warning)
    up to the table, and scores as the same length does under a tokenizer that declares
    nothing; past the table it is refused, naming the table's limit."""
    short = AutoTokenizer.from_pretrained(fixture.tokenizer.name_or_path)
    short.model_max_length = 20
    unlimited = AutoTokenizer.from_pretrained(fixture.tokenizer.name_or_path)
    unlimited.model_max_length = 10**30
    assert PLLScorer(fixture.model, short, device="cpu").max_length == 20
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness.scorer"):
        longer = PLLScorer(fixture.model, short, device="cpu", max_length=40)
    assert longer.max_length == 40
    assert "longer than the 20 tokens that the tokenizer declares" in caplog.text
    specials = short.num_special_tokens_to_add()
    texts = [exact_text(short, length - specials) for length in (30, 40, 90)]
    plain = PLLScorer(fixture.model, unlimited, device="cpu", max_length=40)
    assert longer.score(texts) == plain.score(texts)
    with pytest.raises(ValueError, match=r"accepts \(64 tokens"):
        PLLScorer(fixture.model, short, device="cpu", max_length=65)


def test_a_max_length_equal_to_the_declared_one_is_taken_without_a_warning(fixture, caplog):
    """Asking for the length the tokenizer declares asks for the default: nothing is
    longer than the tokenizer declares, so nothing is said (kills ``asked < default``
    in scorer._max_length, which took that length with the warning of a longer one)."""
    short = AutoTokenizer.from_pretrained(fixture.tokenizer.name_or_path)
    short.model_max_length = 20
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness.scorer"):
        scorer = PLLScorer(fixture.model, short, device="cpu", max_length=20)
    assert scorer.max_length == 20
    assert "longer than" not in caplog.text


def test_the_position_table_alone_sets_the_limit(fixture):
    """With no length declared by the tokenizer, the position table sets it: 64 rows for
    BERT, 66 less ``pad_token_id + 1`` for RoBERTa and XLM-R.  Inputs of exactly that
    length (and windows of it) run, though one token more does not."""
    tokenizer = AutoTokenizer.from_pretrained(fixture.tokenizer.name_or_path)
    tokenizer.model_max_length = 10**30
    scorer = PLLScorer(fixture.model, tokenizer, device="cpu")
    assert scorer.max_length == 64
    with pytest.raises((IndexError, RuntimeError)), torch.no_grad():
        fixture.model(input_ids=torch.full((1, 65), tokenizer.mask_token_id))
    specials = tokenizer.num_special_tokens_to_add()
    texts = [exact_text(tokenizer, length - specials) for length in (64, 65, 320)]
    expected = scorer_for(fixture).score(texts)
    assert scorer.score(texts) == expected


def test_token_log_and_token_file_list_every_windowed_token_in_order(fixture, tmp_path):
    """lm-eval's token log and ``pll-harness score --tokens``: one entry per token of a
    text scored in windows, in the text's order, with the scorer's log-probabilities."""
    tokenizer, path = fixture.tokenizer, fixture.tokenizer.name_or_path
    texts = [exact_text(tokenizer, 200), exact_text(tokenizer, 130, 1)]
    scores = scorer_for(fixture).score(texts)
    encodings = [tokenizer(text, add_special_tokens=False) for text in texts]

    log = tmp_path / "tokens.jsonl"
    lm = PLLMaskedLM(pretrained=path, device="cpu", token_log=str(log))
    requests = [
        Instance("loglikelihood_rolling", {}, (text,), index) for index, text in enumerate(texts)
    ]
    lm.loglikelihood_rolling(requests, disable_tqdm=True)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for record, encoding, score in zip(records, encodings, scores, strict=True):
        assert record["tokens"] == tokenizer.convert_ids_to_tokens(encoding["input_ids"])
        assert record["token_logprobs"] == pytest.approx(score.token_logprobs, abs=1e-6)

    sentences, token_file = tmp_path / "texts.txt", tmp_path / "tokens.csv"
    sentences.write_text("\n".join(texts) + "\n")
    output = tmp_path / "scores.csv"
    arguments = ["score", "--model", path, str(sentences), "-o", str(output)]
    assert (
        cli_main([*arguments, "--tokens", str(token_file), "--device", "cpu", "--no-progress"]) == 0
    )
    rows = list(csv.DictReader(token_file.open()))
    identifiers = [row["id"] for row in csv.DictReader(output.open())]
    for identifier, encoding, score in zip(identifiers, encodings, scores, strict=True):
        mine = [row for row in rows if row["id"] == identifier]
        assert [int(row["token_index"]) for row in mine] == list(range(len(encoding["input_ids"])))
        assert [int(row["token_id"]) for row in mine] == encoding["input_ids"]
        assert [int(row["word_index"]) for row in mine] == encoding.word_ids()
        lp = [float(row["lp_word_l2r"]) for row in mine]
        assert lp == pytest.approx(score.token_logprobs, abs=1e-6)
