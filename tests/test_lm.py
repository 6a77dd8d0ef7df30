"""The lm-eval adapter: request semantics, long inputs and errors that say what to do."""

from __future__ import annotations

import gc
import itertools
import json
import math
import re
import subprocess
import sys

import pytest
import torch
from conftest import FIRST_COMMIT, NEXT_COMMIT
from lm_eval.api.instance import Instance
from reference_pll import float64_model, masked_set, naive_pll
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
)

from pll_harness.arguments import DTYPE_NAMES
from pll_harness.lm import PLLMaskedLM
from pll_harness.metrics import PLL_METRICS
from pll_harness.provenance import scoring_model
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
        ({"pll_metric": "within_word_l2r"}, f"Choose one of: {', '.join(PLL_METRICS)}"),
        ({"dtype": "float8"}, f"Choose one of: {', '.join(DTYPE_NAMES)}"),
        ({"device": "tpu:7"}, "Unknown device"),
        ({"batch_size": "lots"}, "batch_size='lots' is not valid"),
        ({"max_batch_tokens": 0}, "max_batch_tokens must be at least 1"),
        ({"max_length": 100000}, "exceeds what this model accepts"),
        ({"parallelize": "maybe"}, "is not a boolean"),
        ({"batch_size": "auto:abc"}, "batch_size='auto:abc' is not valid"),
        ({"batch_size": "autoxyz"}, "batch_size='autoxyz' is not valid"),
        ({"max_batch_size": 2.5}, "max_batch_size=2.5 is not valid"),
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


@pytest.mark.parametrize("value", ["1000", "None"])
def test_a_pretrained_that_lm_eval_reads_as_a_number_or_none_is_named(value, tmp_path):
    """lm-eval hands ``pretrained=1000`` over as the number 1000: taken for a loaded model,
    it was refused as a model without its tokenizer object."""
    from lm_eval.api.registry import get_model

    with pytest.raises(ValueError, match=rf"^pretrained={value} names no model: .* \./1000"):
        get_model("pll-mlm").create_from_arg_string(f"pretrained={value},device=cpu")


def test_a_path_object_is_a_folder(tiny_bert_dir):
    from pathlib import Path

    lm = PLLMaskedLM(pretrained=Path(tiny_bert_dir), device="cpu")
    assert lm.loglikelihood([instance("loglikelihood", ("", "The cat sat."))])[0][0] < 0


def test_a_loaded_model_takes_a_loaded_tokenizer(model_dir):
    """From Python, ``pretrained`` may be a model object; its tokenizer must come as one
    too (a name would load a tokenizer that may not be the model's)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    for missing in (None, str(model_dir)):
        with pytest.raises(ValueError, match="Pass the tokenizer object along with a loaded"):
            PLLMaskedLM(pretrained=model, tokenizer=missing, device="cpu")
    lm = PLLMaskedLM(pretrained=model, tokenizer=tokenizer, device="cpu")
    by_name = PLLMaskedLM(pretrained=model_dir, device="cpu")
    request = [instance("loglikelihood", ("", "The cat sat."))]
    assert lm.loglikelihood(request)[0][0] == pytest.approx(
        by_name.loglikelihood(request)[0][0], abs=1e-5
    )


def test_a_loaded_model_refuses_the_arguments_that_only_loading_applies(tiny_bert_dir):
    """dtype, revision, ... change nothing once the model is loaded: taken silently,
    dtype=bfloat16 would leave the user believing a float32 model scored in bfloat16."""
    model = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    for given in (
        {"dtype": "bfloat16"},
        {"revision": "v2"},
        {"trust_remote_code": "True"},
        {"attn_implementation": "eager"},
        {"parallelize": True},
    ):
        (name,) = given
        with pytest.raises(ValueError, match=rf"applies {name}=.* only as it loads"):
            PLLMaskedLM(pretrained=model, tokenizer=tokenizer, device="cpu", **given)
    loaded = {"dtype": "auto", "revision": "main", "trust_remote_code": False}
    lm = PLLMaskedLM(pretrained=model, tokenizer=tokenizer, device="cpu", **loaded)
    assert lm.get_model_info()["model_dtype"] == "torch.float32"


def test_causal_lm_is_refused_with_advice(tmp_path, tiny_bert_dir):
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)).save_pretrained(
        tmp_path
    )
    with pytest.raises(ValueError, match=r"not a masked language model.*`hf`"):
        PLLMaskedLM(pretrained=str(tmp_path), tokenizer=tiny_bert_dir, device="cpu")


def test_token_log_records_per_token_scores(model_dir, tmp_path):
    log = tmp_path / "tokens.jsonl"
    lm = PLLMaskedLM(pretrained=model_dir, device="cpu", token_log=str(log))
    (result,) = lm.loglikelihood([instance("loglikelihood", ("The hooligan", " wrecked it."))])
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["context"] == "The hooligan"
    assert record["logprob"] == pytest.approx(result[0])
    assert len(record["tokens"]) == len(record["token_logprobs"]) >= 3
    assert record["pll_metric"] == "word_l2r"
    assert record["model"] == scoring_model(model_dir)


def test_token_log_records_say_which_model_and_settings_scored_them(tiny_bert_dir, tmp_path):
    """Records appended by runs of two models, or of one model in two dtypes, tell apart
    which scored them, as the tools' records do."""
    log = tmp_path / "tokens.jsonl"
    request = instance("loglikelihood", ("", "A cat sat."))
    for dtype in ("auto", "bfloat16"):
        lm = PLLMaskedLM(
            pretrained=tiny_bert_dir,
            device="cpu",
            dtype=dtype,
            token_log=str(log),
            token_log_mode="append",
        )
        lm.loglikelihood([request])
        lm.token_log.close()
    models = [json.loads(line)["model"] for line in log.read_text().splitlines()]
    assert models == [scoring_model(tiny_bert_dir), scoring_model(tiny_bert_dir, "bfloat16")]
    assert models[0] != models[1] and " files=" in models[0]
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    shape = {"hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 16}
    built = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), num_hidden_layers=1, **shape))
    lm = PLLMaskedLM(
        pretrained=built.eval(),
        tokenizer=tokenizer,
        device="cpu",
        token_log=str(tmp_path / "built.jsonl"),
    )
    lm.loglikelihood([request])
    (record,) = [json.loads(line) for line in (tmp_path / "built.jsonl").read_text().splitlines()]
    assert record["model"] == "BertForMaskedLM"  # no name: its class


def test_token_log_names_the_commit_a_hub_model_was_loaded_from(hub_cache, tmp_path):
    """Records appended by runs of two commits of one hub model tell them apart: main, then
    a revision given by its commit."""
    log = tmp_path / "tokens.jsonl"
    request = instance("loglikelihood", ("", "A cat sat."))
    for revision in (None, NEXT_COMMIT):
        lm = PLLMaskedLM(
            pretrained="org/tiny",
            revision=revision,
            device="cpu",
            token_log=str(log),
            token_log_mode="append",
        )
        lm.loglikelihood([request])
        lm.token_log.close()
    models = [json.loads(line)["model"] for line in log.read_text().splitlines()]
    assert models == [f"org/tiny commit={FIRST_COMMIT}", f"org/tiny commit={NEXT_COMMIT}"]


def test_token_log_skips_lm_evals_padding_copies(tiny_bert_dir, tmp_path):
    """With several processes lm-eval pads a shorter share with its last request, the same
    object again: one record per request, not one per copy."""
    log = tmp_path / "tokens.jsonl"
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", token_log=str(log))
    cat, dog = (instance("loglikelihood", ("", s)) for s in ("A cat sat.", "A dog ran."))
    again = instance("loglikelihood", ("", "A cat sat."))  # a request of its own
    assert len(lm.loglikelihood([cat, dog, again, dog, dog])) == 5
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["continuation"] for r in records] == ["A cat sat.", "A dog ran.", "A cat sat."]


def test_token_log_has_one_writer_and_overwrite_waits_for_records(tiny_bert_dir, tmp_path):
    log = tmp_path / "tokens.jsonl"
    log.write_text('{"earlier": "run"}\n')
    first = PLLMaskedLM(
        pretrained=tiny_bert_dir, device="cpu", token_log=str(log), token_log_mode="append"
    )
    with pytest.raises(ValueError, match="is being written by another writer"):
        PLLMaskedLM(
            pretrained=tiny_bert_dir, device="cpu", token_log=str(log), token_log_mode="append"
        )
    first.token_log.close()
    second = PLLMaskedLM(
        pretrained=tiny_bert_dir, device="cpu", token_log=str(log), token_log_mode="overwrite"
    )
    assert log.read_text() == '{"earlier": "run"}\n'  # kept until this run has records
    second.loglikelihood([instance("loglikelihood", ("", "A cat sat."))])
    second.loglikelihood([instance("loglikelihood", ("", "A dog ran."))])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["continuation"] for r in records] == ["A cat sat.", "A dog ran."]


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


def test_parallelize_under_several_processes_is_refused(tiny_bert_dir, monkeypatch):
    """Each process would spread its own copy over the same GPUs and score every request."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"several processes.*Run one process"):
        PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", parallelize=True)


def test_token_log_refuses_an_earlier_runs_file_unless_told(tiny_bert_dir, tmp_path):
    log = tmp_path / "tokens.jsonl"
    request = [instance("loglikelihood", ("The hooligan", " wrecked it."))]

    def run(**kwargs) -> list[dict]:
        lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", token_log=str(log), **kwargs)
        lm.loglikelihood(request)
        lm.loglikelihood(request)  # every request type of one run goes to the file
        return [json.loads(line) for line in log.read_text().splitlines()]

    assert len(run()) == 2
    with pytest.raises(ValueError, match=r"token_log_mode=overwrite.*token_log_mode=append"):
        run()
    assert len(run(token_log_mode="overwrite")) == 2
    assert len(run(token_log_mode="append")) == 4
    with pytest.raises(ValueError, match="token_log_mode='keep' is not valid"):
        run(token_log_mode="keep")


# ------------------------------------------------------------------- lm-eval's own way in


def lm_eval_cli_config(monkeypatch, *argv: str):
    """What lm-eval's CLI hands to simple_evaluate for ``lm_eval --model pll-mlm ARGV``."""
    import sys

    from lm_eval._cli.harness import HarnessCLI
    from lm_eval.config.evaluate_config import EvaluatorConfig

    monkeypatch.setattr(sys, "argv", ["lm_eval", "run", "--model", "pll-mlm", *argv])
    return EvaluatorConfig.from_cli(HarnessCLI().parse_args())


def lm_from_cli(monkeypatch, *argv: str) -> PLLMaskedLM:
    """The model exactly as simple_evaluate builds it from lm-eval's CLI config."""
    from lm_eval.api.registry import get_model

    config = lm_eval_cli_config(monkeypatch, "--tasks", "unit_task", *argv)
    flags = {
        "batch_size": config.batch_size,
        "max_batch_size": config.max_batch_size,
        "device": config.device,
    }
    return get_model(config.model).create_from_arg_obj(config.model_args, flags)


def test_device_and_batch_size_may_sit_in_model_args(monkeypatch, tiny_bert_dir, tmp_path):
    """The README lists device and batch_size as model args: lm-eval's CLI also sends its
    own --device/--batch_size (defaults included), which must not clash with them."""
    import lm_eval
    from lm_eval.tasks import TaskManager
    from lm_eval_runs import write_pair_task

    model_args = f"pretrained={tiny_bert_dir},device=cpu,batch_size=4,max_batch_size=3"
    lm = lm_from_cli(monkeypatch, "--model_args", model_args)
    assert lm.device == torch.device("cpu")
    assert lm.scorer.batching.batch_size == 3
    config = lm_eval_cli_config(monkeypatch, "--model_args", model_args, "--tasks", "unit_pairs")
    write_pair_task(tmp_path, "unit_pairs", [("A cat sat.", "A sat cat.")])
    results = lm_eval.simple_evaluate(
        model=config.model,
        model_args=config.model_args,
        tasks=["unit_pairs"],
        batch_size=config.batch_size,
        device=config.device,
        task_manager=TaskManager(include_path=str(tmp_path)),
    )
    assert 0.0 <= results["results"]["unit_pairs"]["acc,none"] <= 1.0
    as_string = PLLMaskedLM.create_from_arg_string(model_args, {"device": "cuda:3"})
    assert as_string.device == torch.device("cpu")


def test_lm_evals_default_device_gives_no_warning(monkeypatch, tiny_bert_dir, caplog):
    import logging

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with caplog.at_level(logging.WARNING):
        lm = lm_from_cli(monkeypatch, "--model_args", f"pretrained={tiny_bert_dir}")
    assert lm.device == torch.device("cpu")
    assert "CUDA is not available" not in caplog.text
    with caplog.at_level(logging.WARNING):  # asked for by name: worth a warning
        PLLMaskedLM(pretrained=tiny_bert_dir, device="cuda:0")
    assert "CUDA is not available" in caplog.text


def test_packing_is_the_default_and_max_batch_size_caps_it(monkeypatch, tiny_bert_dir):
    """lm-eval sends batch_size=1 unless told otherwise; packing copies of many sentences
    under the token budget must still be what a plain command gets."""
    plain = lm_from_cli(monkeypatch, "--model_args", f"pretrained={tiny_bert_dir}")
    assert plain.scorer.batching.batch_size is None
    for argv in (
        ["--model_args", f"pretrained={tiny_bert_dir}", "--max_batch_size", "2"],
        ["--model_args", f"pretrained={tiny_bert_dir},max_batch_size=2", "--batch_size", "8"],
    ):
        assert lm_from_cli(monkeypatch, *argv).scorer.batching.batch_size == 2
    requests = [instance("loglikelihood", ("", s)) for s in ("A cat sat.", "The dog ran off.")]
    capped = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", max_batch_size=1)
    packed, one_by_one = plain.loglikelihood(requests), capped.loglikelihood(requests)
    assert [lp for lp, _ in packed] == pytest.approx([lp for lp, _ in one_by_one], abs=1e-5)


def test_lm_evals_auto_batch_sizes_are_accepted(tiny_bert_dir):
    for value in ("auto", "auto:4", "auto:0.5"):
        lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", batch_size=value)
        assert lm.scorer.batching.batch_size is None
    assert (
        PLLMaskedLM(
            pretrained=tiny_bert_dir, device="cpu", max_batch_size=2.0
        ).scorer.batching.batch_size
        == 2
    )


def test_an_unknown_model_arg_names_the_known_ones(tiny_bert_dir):
    with pytest.raises(
        ValueError,
        match=r"pll-mlm \(--model_args.*no argument 'pll_metrc' "
        r"\(did you mean 'pll_metric'\?\).*token_log_mode",
    ):
        PLLMaskedLM.create_from_arg_string(f"pretrained={tiny_bert_dir},pll_metrc=original")


@pytest.mark.parametrize(
    ("argument", "advice"),
    [
        ("device_map=auto", "'device_map' (use parallelize=True"),
        ("add_bos_token=True", "'add_bos_token' (pll-mlm adds the tokenizer's own special"),
        ("use_fast_tokenizer=False", "'use_fast_tokenizer' (pll-mlm loads the fast tokenizer"),
        ("truncation=True", "'truncation' (pll-mlm never truncates"),
        ("peft=adapter", "'peft' (merge the adapter"),
        ("token=hf_abc", "'token' (the Hub token comes from HF_TOKEN"),
    ],
)
def test_an_hf_model_arg_says_what_to_do_instead(tiny_bert_dir, argument, advice):
    """A command line carried over from ``--model hf``: the closest spelling among
    pll-mlm's own arguments (device_map: device, add_bos_token: max_batch_tokens) would
    send the user to the wrong one."""
    with pytest.raises(ValueError) as refused:
        PLLMaskedLM.create_from_arg_string(f"pretrained={tiny_bert_dir},{argument}")
    assert advice in str(refused.value)
    assert "did you mean" not in str(refused.value)


def test_a_named_cuda_device_without_cuda_is_a_warning(monkeypatch, tiny_bert_dir, caplog):
    import logging

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with caplog.at_level(logging.INFO):
        lm = lm_from_cli(monkeypatch, "--model_args", f"pretrained={tiny_bert_dir}")
    (default,) = [r for r in caplog.records if "CUDA is not available" in r.message]
    assert default.levelno == logging.INFO and "--device cuda:0" in default.message
    caplog.clear()
    with caplog.at_level(logging.INFO):
        lm = lm_from_cli(
            monkeypatch, "--model_args", f"pretrained={tiny_bert_dir}", "--device", "cuda:1"
        )
    (named,) = [r for r in caplog.records if "CUDA is not available" in r.message]
    assert named.levelno == logging.WARNING and "--device cuda:1" in named.message
    assert lm.get_model_info()["pll_device"] == "cpu"


# ------------------------------------------------------------------- lm-eval's answer cache


def caching(lm: PLLMaskedLM, path) -> object:
    from lm_eval.api.model import CachingLM

    return CachingLM(lm, str(path))


def test_a_cache_answers_only_runs_with_its_settings(tiny_bert_dir, tmp_path):
    """lm-eval keys cached answers by request alone: another metric or dtype must not be
    answered from them."""
    cache = tmp_path / "cache_rank0.db"
    requests = [instance("loglikelihood", ("", "The hooligan wrecked the souvenir."))]
    word = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    fresh = caching(word, cache).loglikelihood(requests)
    again = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    again.loglikelihood = None  # answered from the cache, or this fails
    assert caching(again, cache).loglikelihood(requests) == fresh
    for other, changed in (
        ({"pll_metric": "original"}, "pll_metric=word_l2r (this run: original)"),
        ({"dtype": "bfloat16"}, "model_dtype=torch.float32 (this run: torch.bfloat16)"),
        ({"max_length": 8}, "pll_max_length=64 (this run: 8)"),
    ):
        lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", **other)
        with pytest.raises(ValueError, match=re.escape(changed) + ".*its own --use_cache path"):
            caching(lm, cache)


@pytest.mark.parametrize("metric", ["original", "word_l2r"])
def test_add_prefix_space_scores_the_first_word_as_the_others(tiny_roberta_dir, metric):
    """BabyBERTa (Zorro's model) was trained with add_prefix_space=True: without it, a
    byte-level BPE tokenizer splits the first word otherwise (``t he``, not ``Ġthe``).
    The option reaches the tokenizer, the scores equal the float64 reference on a
    tokenizer loaded with it (1e-4, float32 against float64), they differ from the
    default's, and the results and the --use_cache record say which was used."""
    text = "the wolf brought me the souvenir."
    spaced = PLLMaskedLM(
        pretrained=tiny_roberta_dir, device="cpu", pll_metric=metric, add_prefix_space="True"
    )
    default = PLLMaskedLM(pretrained=tiny_roberta_dir, device="cpu", pll_metric=metric)
    tokenizer = AutoTokenizer.from_pretrained(tiny_roberta_dir, add_prefix_space=True)
    assert tokenizer.tokenize(text)[0] == "Ġthe" != default.scorer.tokenizer.tokenize(text)[0]
    model64 = float64_model(spaced.scorer.model)
    [(got, _)] = spaced.loglikelihood([instance("loglikelihood", ("", text))])
    assert got == pytest.approx(sum(naive_pll(model64, tokenizer, "", text, metric)), abs=1e-4)
    [(other, _)] = default.loglikelihood([instance("loglikelihood", ("", text))])
    assert abs(got - other) > 1e-3
    assert spaced.get_model_info()["pll_add_prefix_space"] is True
    assert default.get_model_info()["pll_add_prefix_space"] is None
    assert spaced._scoring_settings != default._scoring_settings


def test_add_prefix_space_is_refused_with_a_tokenizer_object(tiny_roberta_dir):
    model = AutoModelForMaskedLM.from_pretrained(tiny_roberta_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_roberta_dir)
    with pytest.raises(ValueError, match="add_prefix_space=True only as it loads"):
        PLLMaskedLM(pretrained=model, tokenizer=tokenizer, add_prefix_space=True)
    with pytest.raises(ValueError, match="add_prefix_space='maybe' is not a boolean"):
        PLLMaskedLM(pretrained=tiny_roberta_dir, add_prefix_space="maybe")


def test_a_cache_knows_a_folder_however_it_is_written(tiny_bert_dir, tmp_path, monkeypatch):
    import os

    cache = tmp_path / "cache_rank0.db"
    lm = PLLMaskedLM(pretrained=os.path.abspath(tiny_bert_dir) + "/", device="cpu")
    caching(lm, cache).loglikelihood([instance("loglikelihood", ("", "A cat sat."))])
    monkeypatch.chdir(os.path.dirname(os.path.abspath(tiny_bert_dir)))
    caching(PLLMaskedLM(pretrained=os.path.basename(tiny_bert_dir), device="cpu"), cache)


def test_a_cache_refuses_a_folder_whose_model_was_saved_again(tiny_bert_dir, tmp_path):
    """A model trained again into the same folder keeps the folder's path and has no
    commit: the cache must not answer it with the old model's scores (it did until the
    folder's files were fingerprinted).  A byte-identical copy of the files, elsewhere, is
    another path and stays refused; an edit of the model card changes no score and is let
    through."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    cache = tmp_path / "cache_rank0.db"
    requests = [instance("loglikelihood", ("", "The hooligan wrecked the souvenir."))]
    caching(PLLMaskedLM(pretrained=str(folder), device="cpu"), cache).loglikelihood(requests)
    (folder / "README.md").write_text("# edited card\n")
    caching(PLLMaskedLM(pretrained=str(folder), device="cpu"), cache)
    weights = load_file(folder / "model.safetensors")
    save_file(
        {name: tensor * 0.5 for name, tensor in weights.items()}, folder / "model.safetensors"
    )
    with pytest.raises(ValueError, match=r"model_files=\w+ \(this run: \w+\)"):
        caching(PLLMaskedLM(pretrained=str(folder), device="cpu"), cache)


def test_a_cache_takes_the_same_model_however_it_is_named(tiny_bert_dir, tmp_path):
    """``revision=main`` is the default (None) spelt out, and the packaged demo model's
    folder is ``pll-demo``: neither may be refused as another model."""
    from pll_harness.models import DEMO_MODEL_DIR

    cache = tmp_path / "cache_rank0.db"
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    caching(lm, cache).loglikelihood([instance("loglikelihood", ("", "A cat sat."))])
    caching(PLLMaskedLM(pretrained=tiny_bert_dir, revision="main", device="cpu"), cache)
    demo = tmp_path / "demo_rank0.db"
    named = PLLMaskedLM(pretrained="pll-demo", device="cpu")
    caching(named, demo).loglikelihood([instance("loglikelihood", ("", "A cat sat."))])
    caching(PLLMaskedLM(pretrained=str(DEMO_MODEL_DIR), device="cpu"), demo)
    assert named.get_model_info()["model_checkpoint"] == "pll-demo"


def test_a_cache_that_answered_nothing_takes_any_settings(tiny_bert_dir, tmp_path):
    """With several processes each has a database of its own; one whose run stopped before
    it scored anything (another process refused its own database, say) holds no answers,
    so it must not refuse the next run for settings that scored none."""
    cache = tmp_path / "cache_rank1.db"
    caching(PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", pll_metric="original"), cache)
    word = caching(PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu"), cache)
    word.loglikelihood([instance("loglikelihood", ("", "A cat sat."))])
    with pytest.raises(ValueError, match=re.escape("pll_metric=word_l2r (this run: original)")):
        caching(PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", pll_metric="original"), cache)


def test_a_cache_whose_first_scoring_failed_takes_any_settings(tiny_bert_dir, tmp_path):
    """A run that stops in its first chunk (an out-of-memory error, Ctrl-C) has stored no
    answer, so it must leave no settings record that refuses the next run."""
    cache = tmp_path / "cache_rank0.db"
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", pll_metric="original")
    lm.scorer.score_requests = lambda *_args, **_kwargs: 1 / 0
    with pytest.raises(ZeroDivisionError):
        caching(lm, cache).loglikelihood([instance("loglikelihood", ("", "A cat sat."))])
    del lm  # the run is over (its process ended): its hold on the cache goes with it
    gc.collect()
    caching(PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu"), cache)


def test_two_runs_started_together_on_one_empty_cache_do_not_mix(tiny_bert_dir, tmp_path):
    """Two runs with other settings opened one cache while it was empty: both passed the
    start-up check, and whichever looked its requests up after the other had answered
    them was answered with the other's numbers.  While a run uses a cache, one with other
    settings is refused as it starts; once the run is over, its record holds."""
    cache = tmp_path / "cache_rank0.db"
    requests = [instance("loglikelihood", ("", "The hooligan wrecked the souvenir."))]
    first = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", pll_metric="original")
    first = caching(first, cache)
    same = caching(
        PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", pll_metric="original"), cache
    )
    in_use = "is in use by a run with pll_metric=original (this run: word_l2r)"
    with pytest.raises(ValueError, match=re.escape(in_use)):
        caching(PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu"), cache)
    want = first.loglikelihood(requests)
    assert same.loglikelihood(requests) == want  # the same settings share the cache
    del first, same
    gc.collect()
    with pytest.raises(ValueError, match=re.escape("holds answers scored with pll_metric=orig")):
        caching(PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu"), cache)


def test_a_cache_of_another_model_or_with_a_token_log_is_refused(tiny_bert_dir, tmp_path):
    from sqlitedict import SqliteDict

    foreign = tmp_path / "hf_rank0.db"
    with SqliteDict(str(foreign), autocommit=True) as database:
        database["0" * 64] = (-1.0, True)
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    with pytest.raises(ValueError, match="without a record of their settings"):
        caching(lm, foreign)
    log = tmp_path / "logs" / "t.jsonl"
    logged = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", token_log=str(log))
    with pytest.raises(ValueError, match="Drop --use_cache or token_log"):
        caching(logged, tmp_path / "new_rank0.db")
    assert not log.parent.exists()  # the refused run leaves no empty log behind
    with pytest.raises(ValueError, match="built as a decoder"):
        broken = AutoModelForMaskedLM.from_pretrained(tiny_bert_dir, is_decoder=True)
        tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
        PLLMaskedLM(pretrained=broken, tokenizer=tokenizer, device="cpu", token_log=str(log))
    assert not log.parent.exists()


# ------------------------------------------------------------------- text in front of sentences


@pytest.fixture(scope="module")
def packaged_tasks():
    from lm_eval.tasks import TaskManager

    from pll_harness.task_paths import TASK_DIR

    return TaskManager(include_defaults=False, include_path=str(TASK_DIR))


def test_a_system_instruction_on_a_verbatim_task_is_refused(tiny_bert_dir, packaged_tasks):
    import lm_eval

    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    task = "blimp_pll_anaphor_gender_agreement"
    plain = lm_eval.simple_evaluate(model=lm, tasks=[task], limit=2, task_manager=packaged_tasks)
    assert plain["results"][task]["acc,none"] in (0.0, 0.5, 1.0)
    with pytest.raises(
        ValueError,
        match=f"Task\\(s\\) {task} score each sentence as written.*'Judge grammar.'.*"
        "--system_instruction, or from the task's YAML",
    ):
        lm_eval.simple_evaluate(
            model=lm,
            tasks=[task],
            limit=2,
            task_manager=packaged_tasks,
            system_instruction="Judge grammar.",
        )
    # A context is what other loglikelihood tasks are made of.
    (scored,) = lm.loglikelihood([instance("loglikelihood", ("Judge grammar.", " A cat sat."))])
    assert scored[0] < 0


def test_a_chat_template_is_refused_before_any_request(tiny_bert_dir, packaged_tasks):
    import lm_eval

    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    lm.loglikelihood = None  # never reached
    assert lm.chat_template(False) == ""
    with pytest.raises(ValueError, match="no chat template"):
        lm_eval.simple_evaluate(
            model=lm,
            tasks=["blimp_pll_anaphor_gender_agreement"],
            limit=2,
            task_manager=packaged_tasks,
            apply_chat_template=True,
        )
    with pytest.raises(ValueError, match="no chat template"):
        lm.apply_chat_template([{"role": "user", "content": "hi"}])


def test_a_cached_run_keeps_the_chunks_it_finished(tiny_bert_dir, tmp_path, monkeypatch):
    """--use_cache: lm-eval stores a call's answers only when it returns; the chunks that
    finished before an interruption must be in the cache, and the re-run must score only
    the rest and answer exactly as an uninterrupted run."""
    import pll_harness.lm as lm_module

    monkeypatch.setattr(lm_module, "CACHE_CHUNK_BATCHES", 1)
    sentences = [f"The {animal} sat on the mat." for animal in ("cat", "dog", "cow", "hen")]
    requests = [instance("loglikelihood", ("", s)) for s in sentences]
    plain = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", max_batch_tokens=32)
    expected = plain.loglikelihood(requests)

    interrupted = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", max_batch_tokens=32)
    cache = caching(interrupted, tmp_path / "cache_rank0.db")
    assert len(interrupted._cache_chunks([r.args for r in requests])) == 4
    real = interrupted.scorer.score_requests
    calls = []

    def stop_after_two(pairs, progress=None):
        calls.append(pairs)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(pairs, progress)

    monkeypatch.setattr(interrupted.scorer, "score_requests", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        cache.loglikelihood(requests)

    resumed = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu", max_batch_tokens=32)
    asked = []
    real_resumed = resumed.loglikelihood
    monkeypatch.setattr(
        resumed, "loglikelihood", lambda reqs, *a: asked.extend(reqs) or real_resumed(reqs, *a)
    )
    answers = caching(resumed, tmp_path / "cache_rank0.db").loglikelihood(requests)
    assert [r.args for r in asked] == [r.args for r in requests[2:]]
    assert [lp for lp, _ in answers] == pytest.approx([lp for lp, _ in expected], abs=1e-5)
    assert [greedy for _, greedy in answers] == [greedy for _, greedy in expected]


def test_a_cache_with_several_processes_scores_each_share_alone(tiny_bert_dir, tmp_path):
    """Under --use_cache lm-eval calls the model only on processes with uncached requests
    (another --limit, another task): a process that waited there for the others, in
    scoring or in the prompt check, would wait forever."""

    class NoOtherProcessComes:
        world_size = 2

        def __getattr__(self, name):
            raise AssertionError(f"{name}: no other process comes to this call")

    requests = [instance("loglikelihood", ("", "The hooligan wrecked the souvenir."))]
    expected = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu").loglikelihood(requests)
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    cached = caching(lm, tmp_path / "cache_rank1.db")  # every process meets at the hand-over
    lm._group = NoOtherProcessComes()
    assert cached.loglikelihood(requests) == expected


@pytest.mark.parametrize(("rank", "shown"), [(0, True), (1, False)])
def test_a_cache_with_several_processes_shows_rank_0s_progress_only(
    tiny_bert_dir, tmp_path, capsys, rank, shown
):
    """Under --use_cache each process scores its share alone; a bar from every process
    would garble the terminal (lm-eval's convention: rank 0 shows progress)."""
    lm = PLLMaskedLM(pretrained=tiny_bert_dir, device="cpu")
    lm._rank, lm._world_size = rank, 2
    requests = [instance("loglikelihood", ("", "The hooligan wrecked the souvenir."))]
    caching(lm, tmp_path / f"cache_rank{rank}.db").loglikelihood(requests)
    assert ("Running loglikelihood requests" in capsys.readouterr().err) == shown


def test_processes_refuse_a_prompt_together():
    """A process whose share holds no prompted request must stop with the others rather
    than wait for them in scoring."""
    from lm_eval.api.instance import Instance as Request

    from pll_harness.lm import _refuse_context_on_verbatim_tasks
    from pll_harness.tasks.minimal_pairs import VerbatimRow

    class TwoProcesses:
        def all_gather_object(self, obj):
            return [obj, {"blimp_pll_x": "Judge grammar."}]

    mine = [Request("loglikelihood", VerbatimRow(), ("", "A cat sat."), 0, ("blimp_pll_y", 0, 1))]
    _refuse_context_on_verbatim_tasks(mine, None)
    with pytest.raises(ValueError, match="blimp_pll_x score each sentence as written"):
        _refuse_context_on_verbatim_tasks(mine, TwoProcesses())


def test_the_model_imports_none_of_the_researcher_tools():
    """Every ``lm_eval --model pll-mlm`` run imports the adapter: it must not pull in the
    ``pll-harness`` tools (compare, diagnose, plotting, ...), which it never uses."""
    code = (
        "import sys, pll_harness.lm; "
        "print(sorted(m for m in sys.modules if m.startswith('pll_harness.tools')))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == "[]"


def test_the_readme_table_of_model_arguments_is_the_signature():
    """The table is the one description of pll-mlm's model arguments: each parameter has
    its row, and the metric and dtype lists in it are the registries'."""
    import inspect

    from conftest import REPO_ROOT

    from pll_harness.metrics import DEFAULT_METRIC

    lines = (REPO_ROOT / "README.md").read_text().split("\n")
    start = lines.index("| argument | default | meaning |") + 2
    rows = {}
    for line in itertools.takewhile(str.strip, lines[start:]):
        name, default, meaning = (cell.strip() for cell in line.strip("|").split(" | ", 2))
        rows[name.strip("`")] = (default, meaning)
    parameters = [p for p in inspect.signature(PLLMaskedLM.__init__).parameters if p != "self"]
    assert sorted(rows) == sorted(parameters)
    default, meaning = rows["pll_metric"]
    assert default == f"`{DEFAULT_METRIC}`"
    assert meaning == ", ".join(f"`{name}`" for name in PLL_METRICS)
    assert ", ".join(f"`{name}`" for name in DTYPE_NAMES) in rows["dtype"][1].replace(
        " (the checkpoint's)", ""
    )
