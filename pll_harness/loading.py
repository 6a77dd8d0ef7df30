"""Load a masked LM and its tokenizer from a hub name or a local folder, with checks.

Every bad value gets an error that names the valid ones, because a wrong dtype or device
would otherwise show up much later as a confusing failure or a silently different number.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pll_harness.architectures import max_positions
from pll_harness.models import DEMO_MODEL_DIR, DEMO_MODEL_NAME

logger = logging.getLogger(f"lm_eval.{__name__}")

DTYPES: dict[str, torch.dtype | str] = {
    "auto": "auto",
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def resolve_pretrained(name: str) -> str:
    """Map ``pll-demo`` to the small model shipped inside the package.

    A local folder called ``pll-demo`` wins (as any local folder wins over a hub name in
    transformers), with a warning so that nobody mistakes it for the packaged model.
    """
    if name != DEMO_MODEL_NAME:
        return name
    if Path(name).is_dir():
        logger.warning(
            "Using the local folder ./%s, not the demo model packaged with pll_harness.", name
        )
        return name
    if not (DEMO_MODEL_DIR / "config.json").is_file():
        raise ValueError(f"The demo model is missing from this installation ({DEMO_MODEL_DIR}).")
    return str(DEMO_MODEL_DIR)


@dataclass(frozen=True)
class LoadedModel:
    model: torch.nn.Module
    tokenizer: Any
    device: torch.device


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | str:
    """Map a dtype name to what ``from_pretrained`` takes."""
    if dtype is None:
        return "auto"
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"Unknown dtype {dtype!r}. Choose one of: {', '.join(DTYPES)}.")
    return DTYPES[dtype]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` picks CUDA when present.  lm-eval's CLI asks for ``cuda:0`` by default, so a
    CUDA request on a machine without CUDA falls back to the CPU with a warning."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise ValueError(
            f"Unknown device {device!r}. Use cpu, cuda, cuda:N (or mps where available)."
        ) from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        logger.warning("device=%s requested but CUDA is not available; using the CPU.", device)
        return torch.device("cpu")
    if (
        resolved.type == "cuda"
        and resolved.index is not None
        and resolved.index >= torch.cuda.device_count()
    ):
        raise ValueError(
            f"device={device} but only {torch.cuda.device_count()} CUDA device(s) exist."
        )
    return resolved


def load_masked_lm(
    pretrained: str,
    tokenizer: str | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
    dtype: str | torch.dtype | None = "auto",
    attn_implementation: str | None = None,
    device: str | torch.device | None = None,
    device_map: str | dict | None = None,
) -> LoadedModel:
    """``AutoModelForMaskedLM`` plus a fast ``AutoTokenizer`` (slow only if no fast exists)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    torch_dtype = parse_dtype(dtype)
    target = resolve_device(device)
    pretrained = resolve_pretrained(pretrained)
    if tokenizer is not None:
        tokenizer = resolve_pretrained(tokenizer)
    model_kwargs: dict[str, Any] = {
        "revision": revision or "main",
        "trust_remote_code": trust_remote_code,
        "dtype": torch_dtype,
    }
    if attn_implementation is not None:
        model_kwargs["attn_implementation"] = attn_implementation
    if device_map is not None:
        model_kwargs["device_map"] = device_map
    try:
        model = AutoModelForMaskedLM.from_pretrained(pretrained, **model_kwargs)
    except ValueError as error:
        if "Unrecognized configuration class" in str(error):
            raise ValueError(
                f"{pretrained!r} is not a masked language model (no AutoModelForMaskedLM "
                "class for its config). pll-mlm scores masked LMs; use lm-eval's `hf` model "
                "for causal LMs."
            ) from error
        raise
    tok = AutoTokenizer.from_pretrained(
        tokenizer or pretrained,
        revision=revision or "main",
        trust_remote_code=trust_remote_code,
    )
    if device_map is None:
        model = model.to(target)
    else:
        target = next(model.parameters()).device
    return LoadedModel(model.eval(), tok, target)


def model_max_length(model: torch.nn.Module, tokenizer: Any) -> int:
    """The longest input, special tokens included, that both the tokenizer's declared
    limit and the model's position table allow."""
    limits = []
    declared = getattr(tokenizer, "model_max_length", None)
    if declared and declared < 1_000_000:
        limits.append(int(declared))
    positions = max_positions(model)
    if positions:
        limits.append(positions)
    return min(limits) if limits else 512
