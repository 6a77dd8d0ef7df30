"""Attention for the short, unpadded sequences a PLL run feeds the encoder, on CUDA.

Every batch holds masked copies of one length, most of them under 20 tokens (BLiMP's
longest is 33), and no padding.  SDPA's kernels are built for long sequences: on an H100
(torch 2.11, bf16, random-weight bert-base, all of BLiMP) the memory-efficient kernel, the
fastest of them there, took 1.9 s of the run's 8.2 s of GPU time in tiles of 64 queries,
for sequences of about 12 tokens (bench/README.md).  The kernel here gives one program one
copy and head, the copy's whole ``[length, length]`` score matrix held in registers: it
reads the queries, keys and values once and writes the output once, which at these
lengths is all attention costs.

It is one more kernel of SDPA, not another attention: :data:`SHORT_SDPA` is registered
with transformers' attention and mask interfaces, masks are made as for SDPA, and every
call the kernel does not take (a mask, for padding or for a sliding window narrower than
the sequence; dropout; causal attention; a position bias; grouped key-value heads; a
sequence over :data:`MAX_LENGTH`; float32; a device other than CUDA; no triton) goes to
transformers' own SDPA function, under the kernel choice of
:func:`pll_harness.runner.attention_kernels`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

import torch

logger = logging.getLogger(f"lm_eval.{__name__}")

SHORT_SDPA = "pll_sdpa_short"
"""The attention implementation's name in transformers' registries."""

MAX_LENGTH = 32
"""Longest sequence the kernel takes.  On an H100, one layer's attention in bf16 (12 heads of
64, ``bench/short_attention_gpu.py``): at 16, 24 and 32 tokens the kernel took 2.85, 3.65
and 3.58 ms against the memory-efficient kernel's 8.39, 5.24 and 4.38; at 33 tokens, padded
to 64, its best took 7.50 ms against 4.24 (bench/README.md)."""

PADDED_LENGTHS = (16, 32)
"""The kernel's tile heights: triton's products take 16 rows and up, in powers of two."""

KERNEL_DEVICES = ("cuda",)
"""Device types the kernel runs on (tests add the CPU, where triton interprets it)."""

KERNEL_DTYPES = (torch.bfloat16, torch.float16)
"""float32 stays on SDPA: the kernel's products would round it through TF32."""

_UNTAKEN_KWARGS = ("position_bias", "softcap", "s_aux")
"""Arguments some architectures pass to the attention function for terms the kernel does
not implement (a position bias, a soft cap on the scores, attention sinks): a call with
any of them set goes to SDPA.
``sliding_window`` is not one: SDPA attends within a window through the mask alone, which
is None where the window spans the whole sequence (ModernBERT's local layers, whose
windows of 128 span every sequence the kernel takes)."""


@functools.cache
def _kernel() -> Any:
    """The triton kernel, compiled on first use; None where triton is not installed.

    One program per copy and head, with one warp: on an H100 that took 2.46 ms for a layer
    of 65,535 copies of 12 tokens, against 3.03-5.93 ms for two to eight copies a program
    or more warps (bench/results/gpu-h100-2026-11-26/)."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    # Lengths and strides are plain arguments: specialized on their values (divisible by
    # 16, equal to 1), new batch shapes would compile the kernel anew, each for a second.
    @triton.jit(do_not_specialize=[4, *range(6, 18)])
    def short_attention(
        q,
        k,
        v,
        out,
        length,
        scale,
        q_copy,
        q_head,
        q_row,
        k_copy,
        k_head,
        k_row,
        v_copy,
        v_head,
        v_row,
        out_copy,
        out_head,
        out_row,
        PADDED: tl.constexpr,
        SIZE: tl.constexpr,
    ):
        copy = tl.program_id(0).to(tl.int64)
        head = tl.program_id(1)
        rows = tl.arange(0, PADDED)
        cols = tl.arange(0, SIZE)
        real = rows < length
        at = rows[:, None] * q_row + cols[None, :]
        query = tl.load(q + copy * q_copy + head * q_head + at, mask=real[:, None], other=0.0)
        at = rows[:, None] * k_row + cols[None, :]
        key = tl.load(k + copy * k_copy + head * k_head + at, mask=real[:, None], other=0.0)
        at = rows[:, None] * v_row + cols[None, :]
        value = tl.load(v + copy * v_copy + head * v_head + at, mask=real[:, None], other=0.0)
        # float32 operands: bfloat16 and float16 values are exact in the TF32 products they
        # get, and triton's interpreter (the CPU tests) multiplies bfloat16 wrongly.
        scores = tl.dot(query.to(tl.float32), tl.trans(key.to(tl.float32))) * scale
        scores = tl.where(real[None, :], scores, float("-inf"))
        weights = tl.exp(scores - tl.max(scores, 1)[:, None])
        total = tl.sum(weights, 1)
        rounded = weights.to(value.dtype).to(tl.float32)
        mixed = tl.dot(rounded, value.to(tl.float32)) / total[:, None]
        at = rows[:, None] * out_row + cols[None, :]
        tl.store(
            out + copy * out_copy + head * out_head + at,
            mixed.to(out.dtype.element_ty),
            mask=real[:, None],
        )

    return short_attention


def takes_head_size(size: int) -> bool:
    """Whether the kernel is built for heads of ``size``: its tiles are powers of two, and
    triton's products take 16 columns and up."""
    return 16 <= size <= 128 and size & (size - 1) == 0


def padded_length(length: int) -> int:
    """The kernel's tile height for ``length`` tokens."""
    return next(padded for padded in PADDED_LENGTHS if padded >= length)


def short_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
) -> torch.Tensor:
    """softmax(query keyᵀ · scale) value for ``[copies, heads, length, size]`` inputs of at
    most MAX_LENGTH tokens and any strides but a last one of 1, as ``[copies, length, heads,
    size]`` (the layout transformers' attention functions return).  Scores and the softmax
    are float32; the weights are rounded to the inputs' dtype before they multiply the
    values, as in SDPA's fused kernels."""
    copies, heads, length, size = query.shape
    out = torch.empty(copies, length, heads, size, dtype=query.dtype, device=query.device)
    # triton launches on the current device; under device_map, layers sit on several.
    with torch.cuda.device(query.device) if query.is_cuda else contextlib.nullcontext():
        _kernel()[(copies, heads)](
            query,
            key,
            value,
            out,
            length,
            scale,
            *query.stride()[:3],
            *key.stride()[:3],
            *value.stride()[:3],
            out.stride(0),
            out.stride(2),
            out.stride(1),
            PADDED=padded_length(length),
            SIZE=size,
            num_warps=1,
        )
    return out


def kernel_takes(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float,
    is_causal: bool | None,
    kwargs: dict[str, Any],
) -> bool:
    """Whether the call is one the kernel computes as SDPA would, up to rounding: full
    attention over one unpadded sequence per copy, in half precision, with no extra terms."""
    return (
        query.device.type in KERNEL_DEVICES
        and query.dtype in KERNEL_DTYPES
        and key.dtype == value.dtype == query.dtype
        and attention_mask is None
        and not dropout
        and not is_causal
        and all(kwargs.get(name) is None for name in _UNTAKEN_KWARGS)
        and query.shape == key.shape == value.shape
        and query.stride(-1) == key.stride(-1) == value.stride(-1) == 1
        and query.shape[2] <= MAX_LENGTH
        and takes_head_size(query.shape[-1])
        and _kernel() is not None
    )


def short_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: the kernel where it applies, else SDPA.
    A module that does not say whether it is causal counts as causal, as SDPA's function
    takes it."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if kernel_takes(query, key, value, attention_mask, dropout, causal, kwargs):
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        return short_attention(query, key, value, scale), None
    return sdpa_attention_forward(
        module,
        query,
        key,
        value,
        attention_mask,
        dropout=dropout,
        scaling=scaling,
        is_causal=is_causal,
        **kwargs,
    )


@functools.cache
def _registered() -> bool:
    """Register :data:`SHORT_SDPA` with transformers: its masks are SDPA's."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return False
    AttentionInterface.register(SHORT_SDPA, short_sdpa_forward)
    AttentionMaskInterface.register(SHORT_SDPA, sdpa_mask)
    return True


def use_short_attention(model: torch.nn.Module, device: torch.device) -> bool:
    """Switch ``model`` from SDPA to :data:`SHORT_SDPA` when it runs on CUDA and triton is
    there, and compile the kernel for it; other implementations (eager, flash, one the user
    chose by name other than SDPA) are left as they are, and a model that refuses the name
    or a kernel that triton cannot build leaves SDPA in place, with a warning.  Returns
    whether the model now uses it."""
    config = getattr(model, "config", None)
    if (
        device.type not in KERNEL_DEVICES
        or getattr(config, "_attn_implementation", None) != "sdpa"
        or _kernel() is None
        or not _registered()
    ):
        return False
    try:
        model.set_attn_implementation(SHORT_SDPA)
        size = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        if device.type == "cuda" and model.dtype in KERNEL_DTYPES:
            with torch.cuda.device(device):
                compile_ahead(model.dtype, size)
    except Exception as error:  # a model that refuses the name, a kernel triton cannot build
        logger.warning("%s keeps SDPA attention: %s", type(model).__name__, error)
        if config._attn_implementation != "sdpa":
            model.set_attn_implementation("sdpa")
        return False
    return config._attn_implementation == SHORT_SDPA


def compile_ahead(dtype: torch.dtype, size: int) -> None:
    """Compile the kernel for every padded length now, with the model's loading, rather
    than in the first run that reaches each length."""
    if not takes_head_size(size):
        return
    for padded in PADDED_LENGTHS:
        _kernel().warmup(
            *[dtype] * 4, 0, 1.0, *[0] * 12, PADDED=padded, SIZE=size, num_warps=1, grid=(1,)
        )
