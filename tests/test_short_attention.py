"""The short-sequence attention kernel (``pll_harness.short_attention``) computes what SDPA
computes, and is used exactly where it may be.

Without a GPU, triton interprets the kernel on the CPU (``TRITON_INTERPRET``, set in
conftest.py), so these tests run the kernel's own code everywhere.  Where there is a GPU,
triton compiles it instead, which CPU tensors cannot feed: the kernel is then tested
against float64 on the GPU in half precision, the tests that run models through it on the
CPU are skipped, and the test named ``cuda`` runs a scorer through it.
Tolerances, relative to the largest output: float32 1e-5 (the interpreter's products are
exact float32; against SDPA's float32 logits, after two layers), float16 2e-3 and bfloat16
2**-6 (against float64 attention: the output's rounding, a few units in its last place).
"""

from __future__ import annotations

import contextlib
import os

import pytest
import torch
from test_architectures import CASES, tiny_model, tokens

from pll_harness import PLLScorer
from pll_harness import short_attention as short

triton = pytest.importorskip("triton")

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2**-6}
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
KERNEL_DEVICE = "cpu" if INTERPRETED else "cuda"
"""Where the kernel runs in these tests."""
CPU_TENSORS_NEED_THE_INTERPRETER = "triton compiles for the GPU here, which CPU tensors cannot feed"
SENTENCES = ["The cat sat on the mat.", "A souvenir was bought.", "Dogs bark"]


def fused_inputs(copies: int, heads: int, length: int, size: int, dtype: torch.dtype):
    """Query, key and value as transformers hands them over: ``[copies, heads, length,
    size]`` views, with strides, of one projection's ``[copies, length, 3, heads, size]``."""
    torch.manual_seed(copies * 1000 + length)
    fused = torch.randn(copies, length, 3, heads, size).to(dtype).to(KERNEL_DEVICE)
    return tuple(fused[:, :, i].transpose(1, 2) for i in range(3))


def attention_in_float64(query, key, value, scale):
    scores = query.double() @ key.double().transpose(-1, -2) * scale
    return (scores.softmax(-1) @ value.double()).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    ("copies", "heads", "length", "size"),
    [
        (5, 3, 12, 64),  # BLiMP's typical copy, padded to 16 inside the kernel
        (3, 2, 1, 32),  # a single token
        (7, 2, 20, 64),  # padded to 32
        (2, 4, 32, 64),  # the longest the kernel takes
        (9, 2, 17, 16),  # just past a tile, the smallest head size
    ],
)
def test_the_kernel_equals_attention_in_float64(copies, heads, length, size, dtype):
    if dtype == torch.float32 and not INTERPRETED:
        pytest.skip("compiled, float32 products round through TF32 (float32 stays on SDPA)")
    query, key, value = fused_inputs(copies, heads, length, size, dtype)
    scale = size**-0.5
    out = short.short_attention(query, key, value, scale)
    expected = attention_in_float64(query, key, value, scale)
    assert out.shape == (copies, length, heads, size)
    assert out.dtype == dtype
    error = (out.double() - expected).abs().max().item()
    assert error <= TOLERANCE[dtype] * expected.abs().max().item()


def taken(**change) -> bool:
    """Whether the kernel takes a call like a BERT layer's on CUDA, with ``change`` made."""
    shape = change.pop("shape", (4, 2, 12, 64))
    dtype = change.pop("dtype", torch.bfloat16)
    key_shape = change.pop("key_shape", shape)
    query = torch.empty(shape, dtype=dtype)
    key = value = torch.empty(key_shape, dtype=dtype)
    call = {"attention_mask": None, "dropout": 0.0, "is_causal": False, "kwargs": {}, **change}
    return short.kernel_takes(query, key, value, **call)


def test_the_kernel_takes_only_calls_it_computes_as_sdpa_does(monkeypatch):
    monkeypatch.setattr(short, "KERNEL_DEVICES", ("cpu",))
    assert taken()
    assert taken(dtype=torch.float16)
    assert taken(shape=(4, 2, short.MAX_LENGTH, 16))
    assert taken(kwargs={"sliding_window": None, "position_bias": None})
    assert not taken(dtype=torch.float32)
    assert not taken(attention_mask=torch.zeros(4, 1, 12, 12))
    assert not taken(dropout=0.1)
    assert not taken(is_causal=True)
    for name in ("position_bias", "softcap", "s_aux"):
        assert not taken(kwargs={name: 1})
    assert taken(kwargs={"sliding_window": 64})  # the mask says where a window cuts
    assert not taken(key_shape=(4, 1, 12, 64))  # grouped key-value heads
    assert not taken(shape=(4, 2, short.MAX_LENGTH + 1, 64))
    assert not taken(shape=(4, 2, 12, 8))
    assert not taken(shape=(4, 2, 12, 48))
    query = torch.empty(4, 2, 12, 128, dtype=torch.bfloat16)[..., ::2]  # last stride 2
    assert not short.kernel_takes(query, query, query, None, 0.0, False, {})
    monkeypatch.setattr(short, "KERNEL_DEVICES", ("cuda",))
    assert not taken()  # a CPU tensor
    monkeypatch.setattr(short, "KERNEL_DEVICES", ("cpu",))
    monkeypatch.setattr(short, "_kernel", lambda: None)  # no triton
    assert not taken()


def recorded_kernel_calls(monkeypatch) -> list[tuple[int, ...]]:
    """The query shape of each call of the kernel from now on."""
    calls: list[tuple[int, ...]] = []
    kernel = short.short_attention

    def recorded(query, *args):
        calls.append(tuple(query.shape))
        return kernel(query, *args)

    monkeypatch.setattr(short, "short_attention", recorded)
    return calls


@pytest.fixture
def kernel_calls(monkeypatch):
    """The kernel runs on the CPU tensors of the tests in float32 too (where the
    interpreter's products are exact), and each call's query shape is recorded."""
    if not INTERPRETED:
        pytest.skip(CPU_TENSORS_NEED_THE_INTERPRETER)
    monkeypatch.setattr(short, "KERNEL_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(short, "KERNEL_DTYPES", (torch.float32, *short.KERNEL_DTYPES))
    return recorded_kernel_calls(monkeypatch)


@pytest.mark.parametrize(("architecture", "variant"), CASES)
def test_every_architecture_attends_as_with_sdpa(architecture, variant, kernel_calls):
    model = tiny_model(architecture, variant)
    input_ids = tokens(3, 11)
    implementation = model.config._attn_implementation
    with torch.no_grad():
        expected = model(input_ids=input_ids).logits
        switched = short.use_short_attention(model, torch.device("cpu"))
        logits = model(input_ids=input_ids).logits
    assert switched == (implementation == "sdpa")
    assert model.config._attn_implementation == (short.SHORT_SDPA if switched else implementation)
    assert bool(kernel_calls) == switched
    assert (logits - expected).abs().max() <= TOLERANCE[torch.float32] * expected.abs().max()


@pytest.mark.parametrize(("length", "calls"), [(3, 2), (11, 1)])
def test_a_sliding_window_layer_takes_the_kernel_where_its_window_spans_the_input(
    length, calls, kernel_calls
):
    """ModernBERT's local layer (window 8, four tokens each side, in this config): over 3
    tokens it attends to all, as the kernel does; over 11, SDPA gets its mask."""
    model = tiny_model("ModernBertForMaskedLM", "sliding_last")
    input_ids = tokens(3, length)
    with torch.no_grad():
        expected = model(input_ids=input_ids).logits
        assert short.use_short_attention(model, torch.device("cpu"))
        logits = model(input_ids=input_ids).logits
    assert len(kernel_calls) == calls
    assert (logits - expected).abs().max() <= TOLERANCE[torch.float32] * expected.abs().max()


def test_a_module_that_does_not_say_it_is_bidirectional_counts_as_causal(kernel_calls):
    """As in transformers' SDPA function: without ``is_causal`` on the module, or with it
    True, the call is causal and goes to SDPA; with it False, to the kernel."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    query, key, value = fused_inputs(2, 2, 12, 32, torch.float32)
    module = torch.nn.Module()
    for causal in (None, True, False):
        if causal is not None:
            module.is_causal = causal
        got, _ = short.short_sdpa_forward(module, query, key, value, None)
        expected, _ = sdpa_attention_forward(module, query, key, value, None)
        assert (got - expected).abs().max() <= 1e-5
        assert bool(kernel_calls) == (causal is False)


def test_a_kernel_that_cannot_be_built_leaves_sdpa_in_place(monkeypatch, caplog):
    """The model is switched only once its kernels are compiled: a failure there must not
    leave it on a kernel that the first batch would fail in."""

    def fails(dtype: torch.dtype, size: int) -> None:
        raise RuntimeError("no compiler for this GPU")

    monkeypatch.setattr(short, "compile_ahead", fails)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    model = tiny_model("BertForMaskedLM", "base").to(torch.bfloat16)
    assert not short.use_short_attention(model, torch.device("cuda"))
    assert model.config._attn_implementation == "sdpa"
    assert "keeps SDPA attention: no compiler for this GPU" in caplog.text


@pytest.mark.skipif(not INTERPRETED, reason=CPU_TENSORS_NEED_THE_INTERPRETER)
def test_other_attention_and_devices_are_left_alone(monkeypatch):
    eager = tiny_model("BertForMaskedLM", "base")
    eager.set_attn_implementation("eager")
    assert not short.use_short_attention(eager, torch.device("cuda"))
    assert eager.config._attn_implementation == "eager"
    on_cpu = tiny_model("BertForMaskedLM", "base")
    assert not short.use_short_attention(on_cpu, torch.device("cpu"))
    assert on_cpu.config._attn_implementation == "sdpa"
    monkeypatch.setattr(short, "_kernel", lambda: None)  # no triton
    assert not short.use_short_attention(on_cpu, torch.device("cuda"))
    assert on_cpu.config._attn_implementation == "sdpa"


def test_the_loader_switches_sdpa_models_and_they_score_as_before(tiny_bert_dir, kernel_calls):
    ours = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu")
    assert ours.model.config._attn_implementation == short.SHORT_SDPA
    sdpa = PLLScorer.from_pretrained(tiny_bert_dir, device="cpu", attn_implementation="sdpa")
    assert sdpa.model.config._attn_implementation == "sdpa"  # a named choice is kept
    kernel_calls.clear()  # the start-up probe of ours ran the kernel: not what is tested
    expected = [score.logprob for score in sdpa.score(SENTENCES)]
    assert kernel_calls == []
    got = [score.logprob for score in ours.score(SENTENCES)]
    assert kernel_calls
    assert got == pytest.approx(expected, abs=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_scores_with_the_kernel_equal_sdpa_scores(tiny_bert_dir, monkeypatch):
    """Compiled for the GPU (ahead, at loading): in bfloat16 the scorer's model runs its
    attention through the kernel, and its scores equal SDPA's within bfloat16 rounding
    (0.05 nats a sentence of a few tokens)."""
    ours = PLLScorer.from_pretrained(tiny_bert_dir, device="cuda", dtype="bfloat16")
    assert ours.model.config._attn_implementation == short.SHORT_SDPA
    sdpa = PLLScorer.from_pretrained(
        tiny_bert_dir, device="cuda", dtype="bfloat16", attn_implementation="sdpa"
    )
    expected = [score.logprob for score in sdpa.score(SENTENCES * 50)]
    calls = recorded_kernel_calls(monkeypatch)
    got = [score.logprob for score in ours.score(SENTENCES * 50)]
    assert calls
    assert got == pytest.approx(expected, abs=0.05)


def test_the_kernel_takes_the_head_sizes_of_the_supported_models():
    """Powers of two from 16 to 128 (bert-base's and bert-large's heads are 64 wide): a
    size lost here would silently lose the kernel, scores unchanged."""
    assert [size for size in range(1, 300) if short.takes_head_size(size)] == [16, 32, 64, 128]
