"""The lm-eval adapter: request semantics, long inputs and errors that say what to do."""

from __future__ import annotations

import math

import pytest
import torch
from lm_eval.api.instance import Instance
from reference_pll import float64_model, masked_set
from transformers import AutoModelForMaskedLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel

from pll_harness.lm import PLLMaskedLM
from pll_harness.metrics import PLL_METRICS
from pll_harness.windows import plan_windows


def instance(kind: str, args: tuple, task: str = "unit_task") -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=0, metadata=(task, 0, 1))


@pytest.fixture(scope="module", params=["tiny_bert_dir", "tiny_roberta_dir"])
def model_dir(request) -> str:
    return request.getfixturevalue(request.param)


def test_loglikelihood_returns_sum_and_greedy(model_dir):
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu")
    requests = [
        instance("loglikelihood", ("The hooligan", " wrecked the souvenir.")),
        instance("loglikelihood", ("", "The traveler lost the souvenir.")),
    ]
    results = lm.loglikelihood(requests)
    scores = lm.scorer.score_requests([r.args for r in requests])
    assert results == [(s.logprob, s.is_greedy) for s in scores]
    assert all(isinstance(lp, float) and lp < 0 for lp, _ in results)


def test_some_tokens_are_greedy(model_dir):
    """The fixture models are trained a little: frequent tokens win their own slot."""
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu", pll_metric="original")
    scores = lm.scorer.score(["The traveler lost the souvenir.", "The cat sat on the mat."])
    greedy = [g for s in scores for g in s.token_greedy]
    assert any(greedy)
    assert not all(greedy)


@pytest.mark.parametrize("metric", PLL_METRICS)
def test_rolling_scores_each_token_once_by_window(model_dir, metric):
    """A text longer than max_length: the sum over windows, each built and scored naively."""
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu", pll_metric=metric)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model64 = float64_model(AutoModelForMaskedLM.from_pretrained(model_dir))
    text = " ".join(["The traveler lost the souvenir near the old harbour."] * 12)
    (rolled,) = lm.loglikelihood_rolling([instance("loglikelihood_rolling", (text,))])

    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    body, words = enc["input_ids"], enc.word_ids()
    capacity = lm.scorer.max_length - 2
    assert len(body) > 2 * capacity
    windows = plan_windows(len(body), 0, capacity)
    expected, scored = [], []
    for w in windows:
        ids = [tokenizer.cls_token_id, *body[w.start : w.end], tokenizer.sep_token_id]
        window_words = [None, *words[w.start : w.end], None]
        for t in range(w.target_start, w.target_end):
            target = t - w.start + 1
            targets = list(range(1, len(ids) - 1))
            masked = list(ids)
            for j in masked_set(window_words, targets, target, metric):
                masked[j] = tokenizer.mask_token_id
            with torch.no_grad():
                logits = model64(input_ids=torch.tensor([masked])).logits[0, target]
            expected.append(float(torch.log_softmax(logits, -1)[ids[target]]))
            scored.append(t)
    assert scored == list(range(len(body)))
    assert rolled == pytest.approx(math.fsum(expected), abs=1e-3)


def test_long_context_keeps_the_whole_continuation(model_dir, caplog):
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu")
    context = " ".join(["The traveler lost the souvenir."] * 30)
    continuation = " The hooligan wrecked it."
    (long_result,) = lm.loglikelihood([instance("loglikelihood", (context, continuation))])
    n_cont = len(lm.scorer.score_requests([("The end.", continuation)])[0].tokens)
    scores = lm.scorer.score_requests([(context, continuation)])
    assert len(scores[0].tokens) == n_cont
    assert "cut from the left" in caplog.text
    assert math.isfinite(long_result[0])


def test_generate_until_names_the_task(model_dir):
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu")
    with pytest.raises(NotImplementedError, match=r"cannot generate.*gsm8k"):
        lm.generate_until([instance("generate_until", ("Q:", {"until": ["\n"]}), "gsm8k")])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pll_metric": "within_word_l2r"}, "Choose one of: original, word_l2r"),
        ({"dtype": "float8"}, "Choose one of: auto, float32, bfloat16, float16"),
        ({"device": "tpu:7"}, "Unknown device"),
        ({"batch_size": "lots"}, "batch_size='lots' is not valid"),
        ({"max_batch_tokens": 0}, "max_batch_tokens must be at least 1"),
        ({"max_length": 100000}, "exceeds what this model accepts"),
        ({"parallelize": "maybe"}, "is not a boolean"),
    ],
)
def test_bad_arguments_are_explained(model_dir, kwargs, message):
    with pytest.raises(ValueError, match=message):
        PLLMaskedLM(pretrained=model_dir, **{"device": "cpu", **kwargs})


def test_model_without_mask_token_is_refused(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    tokenizer.mask_token = None
    with pytest.raises(ValueError, match="no mask token"):
        PLLMaskedLM(pretrained=model, tokenizer=tokenizer, device="cpu")


def test_causal_lm_is_refused_with_advice(tmp_path, tiny_bert_dir):
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)).save_pretrained(
        tmp_path
    )
    with pytest.raises(ValueError, match=r"not a masked language model.*`hf`"):
        PLLMaskedLM(pretrained=str(tmp_path), tokenizer=tiny_bert_dir, device="cpu")


def test_token_log_records_per_token_scores(model_dir, tmp_path):
    import json

    log = tmp_path / "tokens.jsonl"
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu", token_log=str(log))
    (result,) = lm.loglikelihood([instance("loglikelihood", ("The hooligan", " wrecked it."))])
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["context"] == "The hooligan"
    assert record["logprob"] == pytest.approx(result[0])
    assert len(record["tokens"]) == len(record["token_logprobs"]) >= 3
    assert record["pll_metric"] == "word_l2r"


def test_parallelize_loads_with_a_device_map_and_scores_the_same(model_dir, monkeypatch):
    """parallelize=True asks transformers for device_map="auto" (one GPU here would hold it
    all; tests/test_scorer.py checks a model really split by accelerate)."""
    import pll_harness.lm as lm_module

    seen = {}
    real_load = lm_module.load_masked_lm

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(lm_module, "load_masked_lm", spy)
    requests = [instance("loglikelihood", ("The hooligan", " wrecked the souvenir."))]
    split = PLLMaskedLM(pretrained=model_dir, device="cpu", parallelize=True)
    assert seen["device_map"] == "auto"
    plain = PLLMaskedLM(pretrained=model_dir, device="cpu")
    assert split.loglikelihood(requests) == plain.loglikelihood(requests)
