"""The batched engine against the naive float64 reference, on WordPiece, byte-level BPE and
sentencepiece-style Unigram pieces.

Tolerance: 1e-4 nats per sentence (the engine runs float32; the reference float64).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pickle
import random
import threading
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from conftest import real_model_dirs
from reference_pll import float64_model, naive_pll, naive_scores, target_positions

from pll_harness import scorer as scorer_module
from pll_harness.metrics import PLL_METRICS
from pll_harness.scorer import PLLScorer, SentenceScore, default_batch_tokens

TOLERANCE = 1e-4

SENTENCES = [
    "The hooligan wrecked the souvenir.",
    "The traveler lost the souvenir.",
    "A cat sat.",
    "Who should Derek hug after shocking Richard?",
    "The teachers who the student admires have praised the unbelievably extraordinary "
    "performance of the orchestra yesterday.",
    "Hi",
    "These dogs, unlike that cat, weren't barking at 3:45 in the morning!",
    "Renée’s naïve fiancé ate crème brûlée at the café.",
]

PAIRS = [
    ("The hooligan", " wrecked the souvenir."),
    ("The hooligan wrecked the sou", "venir."),
    ("", "The traveler lost the souvenir."),
    ("  The traveler lost", " the souvenir.  "),
    ("Question: who wrecked it?\nAnswer:", " the hooligan"),
    ("The cat ", "  sat."),  # spaces on both sides: RoBERTa trims its tokens' offsets
    ("Two spaces.  ", "Next"),
]

REQUESTS = [("", s) for s in SENTENCES] + PAIRS


@pytest.fixture(
    scope="module", params=["tiny_bert_dir", "tiny_roberta_dir", "tiny_sentencepiece_dir"]
)
def model_dir(request) -> str:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def reference(model_dir):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model64 = float64_model(AutoModelForMaskedLM.from_pretrained(model_dir))
    return model64, tokenizer


@pytest.fixture(scope="module")
def expected(reference):
    """Naive per-token scores of every request, computed once per model and metric."""
    model64, tokenizer = reference
    cache: dict[str, list[list[float]]] = {}

    def for_metric(metric: str) -> list[list[float]]:
        if metric not in cache:
            cache[metric] = [naive_pll(model64, tokenizer, c, x, metric) for c, x in REQUESTS]
        return cache[metric]

    return for_metric


def scorer_for(model_dir: str, metric: str, **kwargs) -> PLLScorer:
    return PLLScorer.from_pretrained(model_dir, pll_metric=metric, device="cpu", **kwargs)


@pytest.mark.parametrize("metric", PLL_METRICS)
@pytest.mark.parametrize(
    "batching",
    [{}, {"max_batch_tokens": 16}, {"max_batch_tokens": 200, "batch_size": 2}, {"batch_size": 1}],
    ids=["default", "tiny-budget", "budget-and-batch", "one-sequence"],
)
def test_engine_matches_naive_reference(model_dir, expected, metric, batching):
    results = scorer_for(model_dir, metric, **batching).score_requests(REQUESTS)
    for result, want in zip(results, expected(metric), strict=True):
        assert len(result.token_logprobs) == len(want)
        assert result.logprob == pytest.approx(math.fsum(want), abs=TOLERANCE)
        for got, token_want in zip(result.token_logprobs, want, strict=True):
            assert got == pytest.approx(token_want, abs=TOLERANCE)


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_words_break_at_spaces_whatever_the_pre_tokenizer(tiny_sentencepiece_dir, metric):
    """Metaspace without ``split`` (Llama's pre-tokenizer, which any ``tokenizer.json``
    loaded as it is may carry) gives a whole sentence one word id; the engine must still
    score like the reference with the words the tokenizer of the checkpoint gives."""
    from tokenizers import pre_tokenizers
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    unsplit = AutoTokenizer.from_pretrained(tiny_sentencepiece_dir)
    unsplit.backend_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        prepend_scheme="always", split=False
    )
    assert set(unsplit(SENTENCES[1]).word_ids()) == {None, 0}
    model = AutoModelForMaskedLM.from_pretrained(tiny_sentencepiece_dir)
    model64 = float64_model(model)
    results = PLLScorer(model, unsplit, metric, device="cpu").score(SENTENCES)
    for result, sentence in zip(results, SENTENCES, strict=True):
        ids, words, targets = target_positions(tokenizer, "", sentence)
        assert target_positions(unsplit, "", sentence)[0] == ids
        want = naive_scores(model64, unsplit, ids, words, targets, metric)
        assert result.token_logprobs == pytest.approx(want, abs=TOLERANCE)


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_a_deberta_v2_tokenizer_scores_like_the_reference(
    tiny_sentencepiece_dir, tiny_deberta_v2_tokenizer, metric
):
    """transformers' DeBERTa-v2 tokenizer class (its normalizer strips the text's end)
    made building a scorer fail; it must score like the reference with its own words."""
    from transformers import AutoModelForMaskedLM

    tokenizer = tiny_deberta_v2_tokenizer
    model = AutoModelForMaskedLM.from_pretrained(tiny_sentencepiece_dir)
    model64 = float64_model(model)
    results = PLLScorer(model, tokenizer, metric, device="cpu").score(SENTENCES)
    for result, sentence in zip(results, SENTENCES, strict=True):
        ids, words, targets = target_positions(tokenizer, "", sentence)
        want = naive_scores(model64, tokenizer, ids, words, targets, metric)
        assert result.token_logprobs == pytest.approx(want, abs=TOLERANCE)


def test_metrics_differ_on_multi_piece_words(model_dir):
    """A test that could not tell the metrics apart would not prove anything above."""
    sentence = SENTENCES[0]
    totals = {m: scorer_for(model_dir, m).score([sentence])[0].logprob for m in PLL_METRICS}
    assert len({round(v, 6) for v in totals.values()}) == len(PLL_METRICS)


def test_duplicates_are_scored_once_and_returned_in_order(model_dir):
    scorer = scorer_for(model_dir, "word_l2r")
    calls = []
    states = scorer.runner.parts.states

    def counting(input_ids, rows, positions):
        calls.append(input_ids.shape[0])
        return states(input_ids, rows, positions)

    scorer.runner.parts = dataclasses.replace(scorer.runner.parts, states=counting)
    unique = scorer.score(["A cat sat.", "The hooligan wrecked the souvenir."])
    calls.clear()
    repeated = scorer.score(["A cat sat.", "The hooligan wrecked the souvenir.", "A cat sat."])
    n_copies = sum(len(r.tokens) for r in unique)
    assert sum(calls) == n_copies
    assert [r.logprob for r in repeated] == [
        unique[0].logprob,
        unique[1].logprob,
        unique[0].logprob,
    ]


def test_context_is_never_masked(model_dir):
    """Every copy the engine builds keeps the context tokens visible."""
    scorer = scorer_for(model_dir, "sentence_l2r")
    seen = []
    states = scorer.runner.parts.states

    def spy(input_ids, rows, positions):
        seen.append(input_ids.clone())
        return states(input_ids, rows, positions)

    scorer.runner.parts = dataclasses.replace(scorer.runner.parts, states=spy)
    context, continuation = "The hooligan wrecked", " the souvenir."
    scorer.score_requests([(context, continuation)])
    ids, _, targets = target_positions(scorer.tokenizer, context, continuation)
    context_positions = [i for i in range(1, targets[0])]
    copies = torch.cat(seen)
    assert copies.shape[0] == len(targets)
    for position in context_positions:
        assert (copies[:, position] == ids[position]).all()


def test_whitespace_and_leading_space_do_not_change_scores(model_dir):
    """lm-eval's tasks prepend a space to continuations; ours pass whole sentences."""
    scorer = scorer_for(model_dir, "word_l2r")
    a, b, c = scorer.score_requests(
        [
            ("", "The traveler lost the souvenir."),
            ("", " The traveler lost the souvenir."),
            ("The traveler", " lost the souvenir."),
        ]
    )
    assert a.logprob == b.logprob
    assert a.tokens == b.tokens
    assert c.tokens == a.tokens[-len(c.tokens) :]


def test_is_greedy_reflects_argmax(model_dir, reference):
    model64, tokenizer = reference
    scorer = scorer_for(model_dir, "original")
    result = scorer.score(["The traveler lost the souvenir."])[0]
    ids, _, targets = target_positions(tokenizer, "", "The traveler lost the souvenir.")
    for target, greedy in zip(targets, result.token_greedy, strict=True):
        masked = list(ids)
        masked[target] = tokenizer.mask_token_id
        logits = model64(input_ids=torch.tensor([masked])).logits[0, target]
        assert greedy == (int(logits.argmax()) == ids[target])
    assert result.is_greedy == all(result.token_greedy)


def test_empty_continuation_scores_zero(model_dir):
    scorer = scorer_for(model_dir, "word_l2r")
    empty, spaces = scorer.score_requests([("The cat", ""), ("", "   ")])
    assert empty.logprob == 0.0 and empty.is_greedy and empty.tokens == ()
    assert spaces.logprob == 0.0


@pytest.mark.parametrize(
    "real_dir",
    real_model_dirs()
    or [pytest.param(None, marks=pytest.mark.skip(reason="no checkpoints in ../shared/models"))],
)
@pytest.mark.parametrize("metric", PLL_METRICS)
def test_real_checkpoints_match_naive_reference(real_dir, metric):
    """The same check on real checkpoints when ../shared/models/ provides them."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real_dir)
    model64 = float64_model(AutoModelForMaskedLM.from_pretrained(real_dir))
    results = scorer_for(real_dir, metric).score_requests(REQUESTS[:4] + PAIRS[:2])
    for (context, continuation), result in zip(REQUESTS[:4] + PAIRS[:2], results, strict=True):
        want = naive_pll(model64, tokenizer, context, continuation, metric)
        assert result.logprob == pytest.approx(math.fsum(want), abs=TOLERANCE)


def test_score_function_refuses_to_change_an_existing_scorers_metric(model_dir):
    from pll_harness import score

    scorer = scorer_for(model_dir, "original")
    assert score(["A cat sat."], scorer)[0].logprob == scorer.score(["A cat sat."])[0].logprob
    assert score(["A cat sat."], scorer, pll_metric="original")[0].logprob < 0
    with pytest.raises(ValueError, match="pll_metric='original'"):
        score(["A cat sat."], scorer, pll_metric="word_l2r")
    with pytest.raises(ValueError, match="fixed settings"):
        score(["A cat sat."], scorer, max_batch_tokens=64)


def test_model_split_over_devices_by_accelerate_scores_the_same(model_dir, tmp_path):
    """What parallelize=True builds on several GPUs, with the CPU and the disk as the two
    devices: accelerate's hooks move activations between them; the scores are unchanged."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    plain = scorer_for(model_dir, "word_l2r").score_requests(REQUESTS)
    base = AutoModelForMaskedLM.from_pretrained(model_dir).base_model_prefix
    device_map = {  # the embeddings stay with the tied output layer
        f"{base}.embeddings": "cpu",
        f"{base}.encoder.layer.0": "cpu",
        f"{base}.encoder.layer.1": "disk",
        "lm_head" if base == "roberta" else "cls": "cpu",
    }
    model = AutoModelForMaskedLM.from_pretrained(
        model_dir, device_map=device_map, offload_folder=str(tmp_path)
    )
    assert set(model.hf_device_map.values()) == {"cpu", "disk"}
    split = PLLScorer(model, AutoTokenizer.from_pretrained(model_dir), "word_l2r")
    assert split.device == torch.device("cpu")
    assert split.score_requests(REQUESTS) == plain


def test_one_string_is_one_text_not_its_characters(tiny_bert_dir):
    from pll_harness import score

    scorer = scorer_for(tiny_bert_dir, "word_l2r")
    (alone,) = score("The cat sat.", model=scorer)
    (listed,) = score(["The cat sat."], model=scorer)
    assert alone == listed
    (by_name,) = score("The cat sat.", model=tiny_bert_dir, device="cpu")
    assert by_name.logprob == pytest.approx(listed.logprob, abs=1e-5)


@pytest.mark.parametrize("name", ["max_length", "batch_size", "max_batch_tokens"])
@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_sizes_must_be_positive_integers(tiny_bert_dir, name, value):
    from pll_harness import score

    with pytest.raises(ValueError, match=f"{name}={value!r} is not valid"):
        scorer_for(tiny_bert_dir, "word_l2r", **{name: value})
    with pytest.raises(ValueError, match=f"{name}={value!r} is not valid"):
        score(["The cat sat."], model=tiny_bert_dir, device="cpu", **{name: value})


@pytest.mark.parametrize("model_dir", ["tiny_bert_dir", "tiny_roberta_dir"])
def test_a_max_length_with_room_for_special_tokens_only_is_refused(request, model_dir):
    """[CLS] [SEP] (<s> </s>) take two positions: max_length=2 could score nothing, and
    one more position is the least that scores every token (one window per token)."""
    folder = request.getfixturevalue(model_dir)
    with pytest.raises(ValueError, match="max_length=2 leaves no room for text tokens"):
        scorer_for(folder, "word_l2r", max_length=2)
    (scored,) = scorer_for(folder, "original", max_length=3).score(["The cat sat."])
    assert len(scored.tokens) > 1 and all(math.isfinite(lp) for lp in scored.token_logprobs)


def width_stand_in(hidden: int, intermediate: int, dtype: torch.dtype) -> torch.nn.Module:
    """A module with what the token budget reads: a config's widths and a parameter's dtype."""
    module = torch.nn.Linear(1, 1, dtype=dtype)
    module.config = SimpleNamespace(hidden_size=hidden, intermediate_size=intermediate)
    return module


@pytest.mark.parametrize(
    ("hidden", "intermediate", "dtype", "tokens"),
    [
        (768, 3072, torch.float32, 320),  # bert-base: the budget measured best for it
        (384, 1536, torch.float32, 640),  # pll-demo: half as wide
        (256, 1024, torch.float32, 960),  # the first pll-demo: three times narrower
        (8, 32, torch.float32, 30720),  # the benchmark's nano model
        (2, 8, torch.float32, 1 << 16),  # no narrower than the most tokens
        (1024, 4096, torch.float32, 240),  # bert-large
        (8192, 32768, torch.float32, 128),  # no wider than the fewest tokens
        (768, 3072, torch.bfloat16, 640),  # half the bytes per element
    ],
)
def test_cpu_token_budget_follows_activation_memory(hidden, intermediate, dtype, tokens):
    model = width_stand_in(hidden, intermediate, dtype)
    assert default_batch_tokens(model, torch.device("cpu")) == tokens


@pytest.mark.parametrize("model_dir", ["tiny_bert_dir", "tiny_roberta_dir"])
def test_special_tokens_written_in_the_text_are_reported_once(model_dir, request, caplog):
    import logging

    directory = request.getfixturevalue(model_dir)
    scorer = PLLScorer.from_pretrained(directory, device="cpu")
    mask = scorer.tokenizer.mask_token
    with caplog.at_level(logging.WARNING):
        scorer.score(["The cat sat on the mat.", "[UNK] and <unk> are words here."])
    assert "special tokens written out" not in caplog.text
    sep, cls, pad = (
        scorer.tokenizer.sep_token,
        scorer.tokenizer.cls_token,
        scorer.tokenizer.pad_token,
    )
    with caplog.at_level(logging.WARNING):
        (masked,) = scorer.score([f"The cat {mask} on the mat."])
        (bounded,) = scorer.score([f"{cls} The cat {sep} sat on the mat. {pad}"])
    assert mask in masked.tokens  # scored like a word, as minicons does
    assert not {sep, cls, pad} & set(bounded.tokens)  # visible, never scored, as in minicons
    (plain,) = scorer.score(["The cat sat on the mat."])
    assert bounded.logprob != pytest.approx(plain.logprob, abs=1e-3)  # the model saw them
    assert caplog.text.count("special tokens written out in the text") == 1
    assert repr(mask) in caplog.text


def test_texts_must_be_strings_and_empty_ones_are_pointed_out(tiny_bert_dir, caplog):
    import logging

    import numpy as np

    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu", max_batch_tokens=np.int64(64))
    for texts, message in (
        (["The cat sat.", float("nan")], r"Text 1 is float nan, not a string"),
        ([None], r"Text 0 is NoneType None"),
        (b"The cat sat.", r"decode the bytes first"),
        (None, r"texts is NoneType None: give one string, or a list"),
    ):
        with pytest.raises(TypeError, match=message):
            scorer.score(texts)
    with caplog.at_level(logging.WARNING):
        scores = scorer.score(t for t in ("The cat sat.", "   "))
    assert scores[1].logprob == 0.0 and scores[0].logprob < 0
    assert "1 of 2 distinct texts have no token to score" in caplog.text


def test_texts_that_the_tokenizer_empties_are_pointed_out(tiny_bert_dir, caplog):
    """A zero-width space, a byte-order mark alone (files joined end to end), a soft hyphen
    or a control character passes any check of the text (``strip()`` keeps them), but
    WordPiece's normalizer drops them: no token, a score of 0.0 that beats every sentence.
    The warning counts them from the tokens, each distinct text once."""
    import logging

    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    dropped = ["\u200b", "\ufeff", "\u00ad", "\x07"]
    assert all(text.strip() for text in dropped)
    texts = ["The cat sat.", *dropped, "\u200b", "A dog ran."]
    with caplog.at_level(logging.WARNING):
        scores = scorer.score(texts)
    assert [len(s.token_ids) for s in scores[1:6]] == [0] * 5
    assert [s.logprob for s in scores[1:6]] == [0.0] * 5
    assert "4 of 6 distinct texts have no token to score" in caplog.text


@pytest.mark.parametrize(
    ("argument", "meant"),
    [("max_batch_size", "batch_size"), ("torch_dtype", "dtype"), ("pll_metrc", "pll_metric")],
)
def test_an_unknown_argument_names_the_one_meant(tiny_bert_dir, argument, meant):
    from pll_harness import score

    with pytest.raises(
        ValueError, match=f"no argument '{argument}' \\(did you mean '{meant}'\\?\\)"
    ):
        score("The cat sat.", model=tiny_bert_dir, device="cpu", **{argument: 2})


def test_a_scorer_under_another_metric_shares_the_model_and_its_warnings(tiny_bert_dir, caplog):
    import logging

    base = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="original", device="cpu")
    sibling = base.with_metric("word_l2r")
    fresh = PLLScorer.from_pretrained(tiny_bert_dir, pll_metric="word_l2r", device="cpu")
    texts = ["The traveler lost the souvenir.", "A cat sat."]
    assert [s.logprob for s in sibling.score(texts)] == pytest.approx(
        [s.logprob for s in fresh.score(texts)], abs=1e-5
    )
    assert (base.metric, sibling.metric) == ("original", "word_l2r")
    assert sibling.model is base.model and sibling.runner is base.runner
    with caplog.at_level(logging.WARNING):
        base.score(["", "The cat sat."])
        sibling.score(["", "The dog sat."])
        base.score([" "])
    assert caplog.text.count("no token to score") == 1
    with pytest.raises(ValueError, match="nope"):
        base.with_metric("nope")


def test_the_tokenizer_is_probed_for_whitespace_once(tiny_bert_dir, monkeypatch):
    """Which whitespace a tokenizer keeps inside words depends on the tokenizer alone: the
    scorer asks once, not once per call (a tool scores sentence by sentence)."""
    from pll_harness import encoding

    scorer = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")

    def probed(tokenizer):
        raise AssertionError("probed again")

    monkeypatch.setattr(encoding, "whitespace_inside_words", probed)
    scorer.score(["A cat sat."])
    scorer.score_requests([("The cat", " sat.")])


def test_scores_read_out_of_a_run_are_values_like_a_record(tiny_bert_dir):
    """A score is a view into its run's flat results; it must still read, compare, hash and
    pickle as the record of its own tokens, and say which tokens are whose."""
    scorer = PLLScorer.from_pretrained(tiny_bert_dir)
    texts = ["The traveler lost the souvenir.", "A cat sat.", "", "A cat sat."]
    scores = scorer.score(texts)
    for text, score in zip(texts, scores, strict=True):
        record = SentenceScore(
            text, score.tokens, score.token_ids, score.token_logprobs, score.token_greedy
        )
        assert record == score and hash(record) == hash(score) and repr(record) == repr(score)
        assert pickle.loads(pickle.dumps(score)) == score
        assert score.logprob == math.fsum(score.token_logprobs)
        assert score.is_greedy == all(score.token_greedy)
        assert score.text == text and score.as_dict()["tokens"] == list(score.tokens)
    tokenizer = scorer.tokenizer
    for text, score in zip(texts[:2], scores, strict=False):
        assert score.tokens == tuple(tokenizer.tokenize(text))
        assert score.token_ids == tuple(tokenizer(text, add_special_tokens=False).input_ids)
    assert scores[2].tokens == () and scores[2].logprob == 0.0
    assert scores[1] == scores[3] and scores[0] != scores[1]
    assert len({scores[1], scores[3]}) == 1
    with pytest.raises(AttributeError):
        scores[0].text = "changed"
    match scores[1]:
        case SentenceScore(text, tokens, _, logprobs, _):
            assert (text, tokens, logprobs) == (
                texts[1],
                scores[1].tokens,
                scores[1].token_logprobs,
            )
    assert weakref.ref(scores[0])() is scores[0]
    alone = SentenceScore(*scores[0].values())
    assert alone == scores[0] and alone._block is not scores[0]._block
    assert len(alone._block.logprobs) == len(alone.token_logprobs)


def test_a_score_pickled_as_the_frozen_dataclass_it_was_still_loads(monkeypatch):
    """Until 2026-11 SentenceScore was a frozen dataclass, pickled with its fields as state."""

    @dataclasses.dataclass(frozen=True)
    class SentenceScore:  # the old class, under the name pickle records
        text: str
        tokens: tuple[str, ...]
        token_ids: tuple[int, ...]
        token_logprobs: tuple[float, ...]
        token_greedy: tuple[bool, ...]

    SentenceScore.__module__ = scorer_module.__name__
    SentenceScore.__qualname__ = "SentenceScore"
    values = ("A cat", ("A", "cat"), (5, 6), (-1.5, -0.25), (True, False))
    monkeypatch.setattr(scorer_module, "SentenceScore", SentenceScore)
    old = pickle.dumps(SentenceScore(*values))
    monkeypatch.undo()
    loaded = pickle.loads(old)
    assert isinstance(loaded, scorer_module.SentenceScore)
    assert loaded == scorer_module.SentenceScore(*values) and loaded.logprob == -1.75


def test_a_score_needs_one_value_of_each_kind_per_token():
    with pytest.raises(ValueError, match="one token, id, logprob and flag per token"):
        SentenceScore("A cat", ("A", "cat"), (1, 2), (-1.0,), (True, False))


MANY = [("", f"{SENTENCES[i % len(SENTENCES)]} Number {i}.") for i in range(120)] + [
    (f"Question {i}:", " the answer") for i in range(40)
]


def test_requests_in_any_order_get_the_same_scores_exactly(tiny_bert_dir):
    """A request's part follows from its content (pll_harness.parts), so the batches, and
    every bit of every score, do not depend on where it stands."""
    scorer = scorer_for(tiny_bert_dir, "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    _, jobs = scorer.distinct_jobs(MANY)
    assert np.count_nonzero(np.diff(jobs.bounds)) >= 4
    order = list(range(len(MANY)))
    random.Random(5).shuffle(order)
    scores = scorer.score_requests(MANY)
    shuffled = scorer.score_requests([MANY[i] for i in order])
    assert shuffled == [scores[i] for i in order]


@pytest.mark.parametrize("model", ["tiny_bert_dir", "tiny_roberta_dir"])
def test_scores_in_parts_equal_scores_in_one_part(request, model):
    """Parts only change which copies share a batch: float32 rounding at most."""
    scorer = scorer_for(request.getfixturevalue(model), "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    keys, jobs = scorer.distinct_jobs(MANY)
    one_part = scorer.score_jobs(scorer_module.Jobs(jobs.texts, jobs.encodings))
    in_parts = scorer.score_requests(MANY)
    assert len(in_parts) == len(MANY)
    for key, score in zip(keys, in_parts, strict=True):
        assert score.tokens == one_part[key].tokens
        assert score.token_logprobs == pytest.approx(one_part[key].token_logprobs, abs=1e-5)


def scored_in_turn_and_ahead(
    scorer: PLLScorer,
    monkeypatch: pytest.MonkeyPatch,
    install: Callable[[], None],
    waits: Callable[[], bool],
    event: threading.Event,
) -> tuple[bool, list[Any], list[Any]]:
    """MANY scored in parts in turn; then, after ``install()``, with prepare_ahead, the
    first batch for which ``waits()`` holds waiting (at most 10 s) for ``event``: whether
    it came, and the two runs' scores and progress counts side by side."""
    told_in_turn: list[int] = []
    in_turn = scorer.score_requests(MANY, told_in_turn.append)
    install()
    states = scorer.runner.parts.states
    waited = []

    def waiting(input_ids, rows, positions):
        if not waited and waits():
            waited.append(event.wait(timeout=10))
        return states(input_ids, rows, positions)

    monkeypatch.setattr(
        scorer.runner, "parts", dataclasses.replace(scorer.runner.parts, states=waiting)
    )
    scorer.prepare_ahead = True
    told_ahead: list[int] = []
    ahead = scorer.score_requests(MANY, told_ahead.append)
    assert sum(told_ahead) == len(MANY)
    return waited == [True], [ahead, told_ahead], [in_turn, told_in_turn]


def test_the_next_part_is_tokenized_while_a_part_is_scored(tiny_bert_dir, monkeypatch):
    """With prepare_ahead (on accelerators), part k + 1 is tokenized in a thread while
    part k's batches run: the first batch waits for the second part's tokenizing to
    begin, which tokenizing in turn would never do; the scores are those of the parts
    scored in turn, bit for bit, and so is what progress is told."""
    scorer = scorer_for(tiny_bert_dir, "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    assert not scorer.prepare_ahead  # on the CPU
    tokenizing = []
    second_begun = threading.Event()
    jobs_of = scorer._jobs

    def tokenize(pairs):
        tokenizing.append(threading.current_thread().name)
        if len(tokenizing) == 2:
            second_begun.set()
        return jobs_of(pairs)

    came, ahead, in_turn = scored_in_turn_and_ahead(
        scorer,
        monkeypatch,
        lambda: monkeypatch.setattr(scorer, "_jobs", tokenize),
        lambda: True,
        second_begun,
    )
    assert came and len(tokenizing) >= 4
    assert threading.current_thread().name not in tokenizing
    assert ahead == in_turn


def test_a_part_is_assembled_while_the_next_part_runs(tiny_bert_dir, monkeypatch):
    """With prepare_ahead, each part is assembled in a thread once its results are back,
    while the runner goes on with the next: the second part's first batch waits for the
    first part's assembling to begin, which assembling after the run would never do; the
    scores and what progress is told are those of the parts scored in turn, bit for bit."""
    scorer = scorer_for(tiny_bert_dir, "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    launches, assembling = [], []
    first_begun = threading.Event()
    launch, assemble = scorer.runner.launch, scorer.assemble

    def launching(*args, **kwargs):
        launches.append(1)
        return launch(*args, **kwargs)

    def assembling_part(*args, **kwargs):
        assembling.append(threading.current_thread().name)
        first_begun.set()
        return assemble(*args, **kwargs)

    def install() -> None:
        monkeypatch.setattr(scorer.runner, "launch", launching)
        monkeypatch.setattr(scorer, "assemble", assembling_part)

    came, ahead, in_turn = scored_in_turn_and_ahead(
        scorer, monkeypatch, install, lambda: len(launches) == 2, first_begun
    )
    assert came and len(launches) >= 4
    assert assembling == ["pll-assemble"] * len(launches)
    assert ahead == in_turn


def test_a_stopped_run_leaves_no_thread_behind_and_assembles_nothing_more(
    tiny_bert_dir, monkeypatch
):
    """A run that stops in its third part (an error, an interrupt) ends the assembling
    thread too, rather than leaving it waiting for parts that will never come, and the
    thread assembles no part after the one it was on: the second part, launched before
    the stop, is left alone."""
    scorer = scorer_for(tiny_bert_dir, "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    scorer.prepare_ahead = True
    launches, assembling = [], []
    stopped = threading.Event()
    launch, assemble = scorer.runner.launch, scorer.assemble

    def failing_third(*args, **kwargs):
        launches.append(1)
        if len(launches) == 3:
            raise KeyboardInterrupt
        return launch(*args, **kwargs)

    def assembling_after_the_stop(*args, **kwargs):
        assembling.append(1)
        stopped.wait(timeout=10)
        return assemble(*args, **kwargs)

    monkeypatch.setattr(scorer.runner, "launch", failing_third)
    monkeypatch.setattr(scorer, "assemble", assembling_after_the_stop)
    with pytest.raises(KeyboardInterrupt) as stop:
        scorer.score_requests(MANY)
    stopped.set()  # the traceback, kept as a process stopping keeps it, holds the run's locals
    for thread in threading.enumerate():
        if thread.name in ("pll-assemble", "pll-next-parts"):
            thread.join(timeout=10)
            assert not thread.is_alive()
    assert assembling == [1] and stop.traceback


def test_a_run_in_parts_waits_for_the_device_once_at_its_end(tiny_bert_dir, monkeypatch):
    """The parts queue behind each other in one InFlight, and the host waits for all of
    them once, after the last launch, not at every part's end."""
    scorer = scorer_for(tiny_bert_dir, "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    queues, finished = [], []
    launch, finish = scorer.runner.launch, scorer_module.InFlight.finish

    def launching(metric, n_slots, batches, in_flight, on_batch_done=None):
        queues.append(in_flight)
        return launch(metric, n_slots, batches, in_flight, on_batch_done)

    def finishing(in_flight):
        finished.append(len(queues))
        finish(in_flight)

    monkeypatch.setattr(scorer.runner, "launch", launching)
    monkeypatch.setattr(scorer_module.InFlight, "finish", finishing)
    scorer.score_requests(MANY)
    assert len(queues) >= 4 and all(queue is queues[0] for queue in queues)
    assert finished == [len(queues)]


def test_an_error_while_preparing_the_next_part_stops_the_run(tiny_bert_dir, monkeypatch):
    scorer = scorer_for(tiny_bert_dir, "word_l2r", max_batch_tokens=300)
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    scorer.prepare_ahead = True
    calls = []
    jobs_of = scorer._jobs

    def tokenize(pairs):
        calls.append(len(pairs))
        if len(calls) == 3:
            raise ValueError("the third part failed")
        return jobs_of(pairs)

    monkeypatch.setattr(scorer, "_jobs", tokenize)
    with pytest.raises(ValueError, match="the third part failed"):
        scorer.score_requests(MANY)
    assert len(calls) == 3


def test_special_tokens_written_out_are_counted_over_every_part(tiny_bert_dir, caplog):
    """The warning comes once, with the count of the whole run, not of the part where the
    first one was found."""
    import logging

    scorer = scorer_for(tiny_bert_dir, "word_l2r")
    scorer.parts_from = 1  # in parts, as a large run on a GPU
    texts = [f"The cat [MASK] on mat number {i}." for i in range(100)]
    with caplog.at_level(logging.WARNING):
        scorer.score(texts)
    assert np.count_nonzero(np.diff(scorer.distinct_jobs([("", t) for t in texts])[1].bounds)) > 2
    assert caplog.text.count("100 tokens of the input are special tokens") == 1


def test_requests_may_come_from_a_generator(tiny_bert_dir):
    scorer = scorer_for(tiny_bert_dir, "word_l2r")
    given = scorer.score_requests(pair for pair in REQUESTS)
    assert given == scorer.score_requests(REQUESTS)
    keys, _ = scorer.distinct_jobs(pair for pair in REQUESTS)
    assert keys == scorer.distinct_jobs(REQUESTS)[0]


@pytest.mark.parametrize(
    "requests",
    [("He", "is"), ["ok"], [("", "A cat."), ("a", "b", "c")], [("", None)], [("", "A"), "Bc"]],
)
def test_requests_that_are_not_pairs_of_strings_are_refused(tiny_bert_dir, requests):
    """One request given alone, or plain strings, would be taken apart into pairs of
    characters (``("He", "is")`` as ``("H", "e")`` and ``("i", "s")``) and scored."""
    scorer = scorer_for(tiny_bert_dir, "word_l2r")
    with pytest.raises(TypeError, match=r"\(context, continuation\) pairs of strings"):
        scorer.score_requests(requests)
    with pytest.raises(TypeError, match=r"\(context, continuation\) pairs of strings"):
        scorer.distinct_jobs(requests)
    assert scorer.score_requests([["", "He is."]]) == scorer.score_requests([("", "He is.")])


@pytest.mark.parametrize("model", ["tiny_bert_dir", "tiny_roberta_dir"])
def test_a_text_with_a_lone_surrogate_is_named(request, model):
    """The Rust tokenizer refuses such a string with a TypeError about its argument's type;
    the scorer names the text and the character instead."""
    scorer = scorer_for(request.getfixturevalue(model), "word_l2r")
    with pytest.raises(ValueError, match=r"'a\\ud800b' holds a lone surrogate .* at character 1"):
        scorer.score(["The cat sat.", "a\ud800b"])
    scorer.parts_from = 1  # a large run on an accelerator: split into parts first
    with pytest.raises(ValueError, match=r"'a\\ud800b' holds a lone surrogate .* at character 1"):
        scorer.score(["The cat sat.", "a\ud800b"])


def test_only_large_runs_are_split_and_only_where_parts_are_prepared_ahead(
    tiny_bert_dir, monkeypatch
):
    """Parts cost partly filled batches and pay only where tokenizing overlaps the device:
    a CPU scorer never splits, an accelerator's (here the meta device, which needs no
    hardware, and on which the model's check of its attention cannot run) splits from
    PARTS_FROM requests on."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from pll_harness.parts import PARTS_FROM

    monkeypatch.setattr(scorer_module, "_attends_causally", lambda *args: False)
    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    elsewhere = PLLScorer(model, tokenizer, device="meta", max_batch_tokens=100)
    assert elsewhere.prepare_ahead and elsewhere.parts_from == PARTS_FROM
    scorer = scorer_for(tiny_bert_dir, "word_l2r")
    assert scorer.parts_from is None and not scorer.prepare_ahead
    assert not scorer.splits(10 * PARTS_FROM)
    assert scorer.distinct_jobs(MANY)[1].bounds == (0, len(MANY))
    scorer.parts_from = PARTS_FROM  # an accelerator's
    assert not scorer.splits(PARTS_FROM - 1) and scorer.splits(PARTS_FROM)
    scorer.parts_from = len(MANY)
    assert len(scorer.distinct_jobs(MANY)[1].bounds) == 6
    assert scorer.distinct_jobs(MANY[1:] + MANY[1:2] * 3)[1].bounds == (0, len(MANY) - 1)
    assert scorer.distinct_jobs(MANY[1:])[1].bounds == (0, len(MANY) - 1)
    assert len(scorer.distinct_jobs(MANY[1:], parts=True)[1].bounds) == 6


def test_a_run_of_one_part_starts_no_thread(tiny_bert_dir, monkeypatch):
    scorer = scorer_for(tiny_bert_dir, "word_l2r")
    scorer.prepare_ahead = True  # as on an accelerator, with a run too small to split

    def refused(items):
        raise AssertionError("a thread prepares the only part")

    monkeypatch.setattr(scorer_module, "prepared_ahead", refused)
    assert [s.text for s in scorer.score(SENTENCES)] == SENTENCES


def test_a_model_built_as_a_decoder_is_refused(tiny_bert_dir):
    """Loaded with ``is_decoder`` a BERT attends to the left only, so no masked token sees
    its right context: it scored without a word, transformers' own warning aside.  The
    flag alone is no refusal: DistilBERT, among others, ignores it."""
    from transformers import (
        AutoModelForMaskedLM,
        AutoTokenizer,
        DistilBertConfig,
        DistilBertForMaskedLM,
    )

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir, is_decoder=True)
    with pytest.raises(ValueError, match=r"built as a decoder .* lm-eval's `hf` model"):
        PLLScorer(model, tokenizer, device="cpu")
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=8, n_layers=1, n_heads=2,
                              hidden_dim=16, is_decoder=True)  # fmt: skip
    assert PLLScorer(DistilBertForMaskedLM(config), tokenizer, device="cpu").score(["Hi"])


@pytest.mark.parametrize("architecture", ["roformer", "xlm"])
def test_a_model_that_attends_causally_at_run_time_is_refused(tiny_bert_dir, architecture):
    """RoFormer (as BigBird, RemBERT and MegatronBERT) reads ``is_decoder`` when it runs,
    XLM reads ``causal``: neither left a causal module to find, and both were scored as
    left-to-right models under the name of PLL.  Built bidirectional, each is scored."""
    from transformers import (
        AutoTokenizer,
        RoFormerConfig,
        RoFormerForMaskedLM,
        XLMConfig,
        XLMWithLMHeadModel,
    )

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    size = {"vocab_size": len(tokenizer), "max_position_embeddings": 32}

    def build(causal: bool) -> torch.nn.Module:
        if architecture == "roformer":
            config = RoFormerConfig(**size, hidden_size=16, embedding_size=16,
                                    num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=16, is_decoder=causal)  # fmt: skip
            return RoFormerForMaskedLM(config).eval()
        config = XLMConfig(**size, emb_dim=16, n_layers=1, n_heads=2, causal=causal,
                           use_lang_emb=False, n_langs=1,
                           mask_token_id=tokenizer.mask_token_id)  # fmt: skip
        return XLMWithLMHeadModel(config).eval()

    with pytest.raises(ValueError, match="built as a decoder"):
        PLLScorer(build(causal=True), tokenizer, device="cpu")
    assert PLLScorer(build(causal=False), tokenizer, device="cpu").score(["Hi"])


def test_a_model_that_needs_inputs_of_one_length_is_refused_as_it_loads(tiny_bert_dir):
    """Nystromformer's attention reshapes a sequence into its landmarks, so only its padded
    length runs: it crashed inside the model, at the first sentence, with a bare reshape
    error, although the README said models without a spec still score."""
    from transformers import AutoTokenizer, NystromformerConfig, NystromformerForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    config = NystromformerConfig(vocab_size=len(tokenizer), hidden_size=16,
                                 num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16, num_landmarks=8,
                                 segment_means_seq_len=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"fails on a 4-token input .* one fixed length"):
        PLLScorer(NystromformerForMaskedLM(config).eval(), tokenizer, device="cpu")


def test_token_ids_beyond_the_models_vocabulary_are_refused_with_what_to_do(tiny_bert_dir):
    """A token added to the tokenizer without growing the model's embeddings stopped the run
    inside the embedding layer with a bare ``index out of range``."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    tokenizer.add_tokens(["zzyzx"])
    scorer = PLLScorer(model, tokenizer, device="cpu")
    assert scorer.score(["The cat sat."])[0].logprob < 0
    beyond = rf"token 'zzyzx' id {len(tokenizer) - 1}, beyond the model's vocabulary"
    with pytest.raises(ValueError, match=rf"{beyond} .*resize_token_embeddings"):
        scorer.score(["The zzyzx sat."])
    tokenizer.add_special_tokens({"mask_token": "[MASK2]"})
    with pytest.raises(ValueError, match=r"mask token '\[MASK2\]' has id .* beyond the model"):
        PLLScorer(model, tokenizer, device="cpu")


def test_token_strings_of_a_vocabulary_with_unused_ids(tiny_bert_dir):
    """A tokenizer whose ids skip numbers has fewer entries than its largest id: looking the
    strings up by ``range(len(tokenizer))`` failed with an IndexError on ``.tokens``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "[PAD]": 4, "hello": 10, "foo": 12}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **{f"{name}_token": f"[{name.upper()}]" for name in ("unk", "cls", "sep", "mask", "pad")},
    )
    assert len(tokenizer) < 13
    config = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)  # fmt: skip
    score = PLLScorer(BertForMaskedLM(config), tokenizer, "original", device="cpu")
    assert score.score(["hello foo"])[0].tokens == ("hello", "foo")


def test_twin_sequences_read_their_twins_flags_as_well_as_their_scores(model_dir):
    """Two requests with the same tokens and targets are planned once; the twin that was
    not run must read both the log-probabilities and the greedy flags of the one that was
    (kills reading the twin's own, never-scored slots for the flags in assemble)."""
    scorer = scorer_for(model_dir, "original")
    sentence = "The traveler lost the souvenir."
    (alone,) = scorer.score([sentence])
    assert any(alone.token_greedy)  # flags that a never-scored slot (False) would lose
    for twin in scorer.score_requests([("", sentence), ("  ", f"{sentence} ")]):
        assert twin.token_logprobs == alone.token_logprobs
        assert twin.token_greedy == alone.token_greedy
        assert twin.is_greedy == alone.is_greedy


def test_names_and_loaded_objects_given_in_each_others_place_say_which_to_use(tiny_bert_dir):
    """A tokenizer's name read as a slow tokenizer, and a loaded model as a bad path."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from pll_harness import score

    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    with pytest.raises(TypeError, match=r"tokenizer is the name .* let PLLScorer.from_pretrained"):
        PLLScorer(model, tiny_bert_dir)
    with pytest.raises(TypeError, match=r"model is the name"):
        PLLScorer(tiny_bert_dir, tokenizer)
    with pytest.raises(TypeError, match=r"pretrained is a loaded BertForMaskedLM: .*PLLScorer\("):
        PLLScorer.from_pretrained(model)
    with pytest.raises(TypeError, match=r"tokenizer is a loaded"):
        PLLScorer.from_pretrained(tiny_bert_dir, tokenizer=tokenizer)
    with pytest.raises(TypeError, match=r"pretrained is a loaded BertForMaskedLM"):
        score("The cat sat.", model=model)


def test_a_loaded_model_goes_to_the_device_asked_for(tiny_bert_dir, monkeypatch, caplog):
    """As from_pretrained loads it: CUDA on a machine without it falls back to the CPU with
    a warning, and the model is moved (left behind, a CPU model fed CUDA inputs failed
    with an error about fixed-length models).  The meta device stands in for an
    accelerator; the model's check of its attention cannot run there."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with caplog.at_level(logging.WARNING):
        scorer = PLLScorer(model, tokenizer, device="cuda")
    assert scorer.device == torch.device("cpu") and "CUDA is not available" in caplog.text
    assert scorer.score(["The cat sat."])[0].token_logprobs
    monkeypatch.setattr(scorer_module, "_attends_causally", lambda *args: False)
    assert PLLScorer(model, tokenizer, device="meta").device == torch.device("meta")
    assert {parameter.device.type for parameter in model.parameters()} == {"meta"}


@pytest.mark.parametrize("bad", [{"pll_metric": "cuda"}, {"batch_size": 0}])
def test_from_pretrained_refuses_a_bad_metric_or_size_before_loading(bad, monkeypatch):
    """A model on the Hub can take minutes to download before the error came."""

    def load(*args, **kwargs):
        raise AssertionError("loaded before the arguments were checked")

    monkeypatch.setattr(scorer_module, "load_masked_lm", load)
    with pytest.raises(ValueError, match=r"Unknown pll_metric|is not valid"):
        PLLScorer.from_pretrained("bert-base-cased", **bad)


@pytest.mark.parametrize("kind", ["AutoModel", "AutoModelForSequenceClassification"])
def test_a_loaded_model_without_a_masked_lm_head_is_refused(tiny_bert_dir, kind):
    """AutoModel is the newcomer's first guess; it failed with a bare AttributeError ('no
    attribute logits'), a classifier with an IndexError."""
    import transformers

    model = getattr(transformers, kind).from_pretrained(tiny_bert_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_bert_dir)
    with pytest.raises(ValueError, match=r"gives no masked-LM logits.*AutoModelForMaskedLM"):
        PLLScorer(model, tokenizer, device="cpu").score(["The cat sat."])
