"""Load a masked LM and its tokenizer from a hub name or a local folder, with checks.

Every bad value gets an error that names the valid ones, because a wrong dtype or device
would otherwise show up much later as a confusing failure or a silently different number.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pll_harness.architectures import max_positions
from pll_harness.arguments import DTYPE_NAMES
from pll_harness.busy_cpu import warn_if_cpu_is_busy
from pll_harness.models import DEMO_MODEL_DIR, DEMO_MODEL_NAME
from pll_harness.short_attention import use_short_attention

logger = logging.getLogger(f"lm_eval.{__name__}")

DTYPES: dict[str, torch.dtype | str] = {
    name: name if name == "auto" else getattr(torch, name) for name in DTYPE_NAMES
}


MODEL_FILES = ("config.json", "tokenizer_config.json")
"""A local folder named ``pll-demo`` with one of these holds a model or a tokenizer, and wins
over the packaged model; any other (lm-eval's ``--output_path .`` writes its results into a
folder named after the model) is passed over."""


def _local_demo_folder(name: str) -> bool:
    """Whether ``name`` is ``pll-demo`` and names a local folder that holds a model or a
    tokenizer, which then stands for it rather than the packaged model."""
    folder = Path(name)
    return (
        name == DEMO_MODEL_NAME
        and folder.is_dir()
        and any((folder / file).is_file() for file in MODEL_FILES)
    )


def resolve_pretrained(name: str) -> str:
    """Map ``pll-demo`` to the small model shipped inside the package.

    A local folder called ``pll-demo`` that holds a model or a tokenizer wins (as any local
    folder wins over a hub name in transformers), with a warning so that nobody mistakes it
    for the packaged model; one that holds neither, lm-eval's results of an earlier run
    among them, is passed over with a warning.
    """
    if name != DEMO_MODEL_NAME:
        return name
    if _local_demo_folder(name):
        logger.warning(
            "Using the local folder ./%s, not the demo model packaged with pll_harness.", name
        )
        return name
    if Path(name).is_dir():
        logger.warning(
            "The local folder ./%s holds no model (no %s; lm-eval's results of an earlier run?): "
            "using the demo model packaged with pll_harness.",
            name,
            " or ".join(MODEL_FILES),
        )
    if not (DEMO_MODEL_DIR / "config.json").is_file():
        raise ValueError(f"The demo model is missing from this installation ({DEMO_MODEL_DIR}).")
    return str(DEMO_MODEL_DIR)


def model_identity(name: str) -> str:
    """The model a name stands for, as records of it compare: a local folder as its
    absolute path (however it was written: relative, with a trailing slash), but the
    packaged demo model's folder as ``pll-demo`` (its name, whichever way it was given, and
    no path of this machine's); anything else (a hub name, ``pll-demo`` where no local
    folder of a model stands for it, :func:`resolve_pretrained`) as given."""
    if not name or not Path(name).is_dir():
        return name
    if name == DEMO_MODEL_NAME and not _local_demo_folder(name):
        return DEMO_MODEL_NAME
    folder = Path(name).resolve()
    return DEMO_MODEL_NAME if folder == DEMO_MODEL_DIR.resolve() else str(folder)


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
    """``None`` picks CUDA when present; an explicit CUDA request on a machine without CUDA
    falls back to the CPU with a warning (lm-eval's own default, ``cuda:0``, is dropped
    before it gets here: see ``PLLMaskedLM.create_from_arg_obj``)."""
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
    backend = getattr(torch, resolved.type, None)  # torch.mps, torch.xpu, ...
    if resolved.type != "cuda" and not getattr(backend, "is_available", lambda: True)():
        raise ValueError(
            f"device={device} but this machine has no {resolved.type} device (or this torch "
            "was built without it). Use cpu, or cuda where available."
        )
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
    add_prefix_space: bool | None = None,
) -> LoadedModel:
    """``AutoModelForMaskedLM`` plus a fast ``AutoTokenizer`` (slow only if no fast exists).

    ``add_prefix_space`` (None: the tokenizer's own setting) goes to the tokenizer: True
    makes a byte-level BPE tokenizer read a text's first word as it reads the others
    (``Ġthe``, not ``t he``), which models trained that way need (BabyBERTa's model card:
    "it will not work properly with the tokenizer defaults"); tokenizers without the
    option, WordPiece among them, ignore it.

    Without an ``attn_implementation``, a model that transformers gives SDPA attention runs
    on CUDA with the short-sequence kernel where it applies
    (:func:`pll_harness.short_attention.use_short_attention`); one named, ``"sdpa"``
    included, is kept."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    torch_dtype = parse_dtype(dtype)
    target = resolve_device(device)
    pretrained = resolve_pretrained(pretrained)
    if tokenizer is not None:
        tokenizer = resolve_pretrained(tokenizer)
    check_model_source(pretrained, "pretrained")
    if revision not in (None, "", "main") and Path(pretrained).is_dir():
        raise ValueError(
            f"revision={revision!r} picks a commit of a Hugging Face Hub repository, but "
            f"{pretrained} is a local folder, whose files transformers loads as they are. "
            "Check that revision out in the folder (or give the hub name) and drop revision."
        )
    if tokenizer is not None:
        check_model_source(tokenizer, "tokenizer", checkpoint=False)
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
        with explained_load_errors(pretrained):
            model, loading_info = AutoModelForMaskedLM.from_pretrained(
                pretrained, output_loading_info=True, **model_kwargs
            )
    except ValueError as error:
        if "Unrecognized configuration class" in str(error):
            raise ValueError(
                f"{pretrained!r} is not a masked language model (no AutoModelForMaskedLM "
                f"class for its config). pll-mlm scores masked LMs; {FOR_CAUSAL_LMS}"
            ) from error
        raise
    refuse_untrained_weights(pretrained, loading_info.get("missing_keys", ()))
    with explained_load_errors(tokenizer or pretrained):
        tok = AutoTokenizer.from_pretrained(
            tokenizer or pretrained,
            revision=revision or "main",
            trust_remote_code=trust_remote_code,
            **({} if add_prefix_space is None else {"add_prefix_space": add_prefix_space}),
        )
    refuse_a_tokenizer_without_vocabulary(tok, tokenizer or pretrained)
    if device_map is None:
        model = model.to(target)
    else:
        target = next(model.parameters()).device
    if attn_implementation is None:
        use_short_attention(model, target)
    if target.type == "cpu":
        warn_if_cpu_is_busy()
    return LoadedModel(model.eval(), tok, target)


MASKED_LM_HINT = (
    "a masked LM (e.g. bert-base-cased or roberta-base on the Hub, or pll-demo, packaged "
    "with pll_harness and usable offline)"
)
CAUSAL_LM_HINT = "a causal LM (e.g. gpt2 on the Hub)"
FOR_CAUSAL_LMS = "for causal LMs use lm-eval's `hf` model."
"""The advice that ends every refusal of a model that is not a masked LM."""


def refuse_a_tokenizer_without_vocabulary(tokenizer: Any, name: str) -> None:
    """Refuse a tokenizer that knows no token but its added ones and reads plain words as
    nothing or as its unknown token.

    transformers builds one, without a word of warning, from a folder that holds a
    checkpoint's config and weights but none of its tokenizer files: every word then
    becomes the unknown token, so both sentences of a pair read the same and every score
    is wrong.  A tokenizer whose whole vocabulary was added token by token (a character
    vocabulary) reads words, and passes."""
    if len(tokenizer) > len(tokenizer.added_tokens_decoder):
        return
    ids = tokenizer(VOCABULARY_PROBE, add_special_tokens=False, verbose=False)["input_ids"]
    if any(token != tokenizer.unk_token_id for token in ids):
        return
    raise ValueError(
        f"{name} holds no tokenizer files (tokenizer.json, vocab.txt, merges.txt, ...): the "
        f"tokenizer transformers built from it knows only its {len(tokenizer)} added tokens "
        f"and reads {VOCABULARY_PROBE!r} as {len(ids)} unknown tokens, so every word would be "
        "scored as one. Save the checkpoint's tokenizer into the folder "
        "(tokenizer.save_pretrained), or, in lm-eval, name one with the model argument "
        "tokenizer=."
    )


VOCABULARY_PROBE = "The cat sat on the mat."
"""Plain words that any tokenizer with a vocabulary reads as something but unknowns."""


def refuse_untrained_weights(name: str, missing: Iterable[str]) -> None:
    """Refuse a checkpoint whose file lacks weights the masked-LM class needs.

    transformers fills them with random values and only prints a load report: a base
    model (``BertModel``, as sentence encoders ship), a classifier fine-tuned from BERT or
    an ELECTRA discriminator loads as ``AutoModelForMaskedLM`` with a random MLM head, and
    every score would then be noise that looks like a result.  A masked LM saved whole
    misses nothing (tied weights, such as the decoder that shares the embeddings, are not
    counted as missing)."""
    missing = sorted(missing)
    if not missing:
        return
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    raise ValueError(
        f"{name} has no trained weights for {len(missing)} parameter(s) of its masked-LM "
        f"class ({shown}): transformers would fill them with random values, so every score "
        "would be noise. It was not saved as a masked LM (a base model, a classifier or an "
        "ELECTRA discriminator saves no MLM head). Use a checkpoint trained for masked "
        "language modelling with its head (AutoModelForMaskedLM), e.g. an ELECTRA "
        "generator rather than its discriminator."
    )


def _looks_like_a_path(name: str) -> bool:
    """Hub ids are ``name`` or ``owner/name``; anything else can only be a local path, a
    name that ends in a slash (as a shell's completion writes a folder) included."""
    return (
        name.startswith(("/", ".", "~"))
        or name.endswith("/")
        or "\\" in name
        or name.count("/") > 1
    )


def check_model_source(
    name: str, argument: str, hint: str = MASKED_LM_HINT, checkpoint: bool = True
) -> None:
    """Fail before transformers does, in plain words, for a local path that cannot be
    loaded: one that does not exist (transformers would call it a malformed repo id), a
    file, or (for a ``checkpoint``, not a tokenizer) a folder without ``config.json``."""
    path = Path(name).expanduser()
    if path.is_dir():
        if checkpoint and not (path / "config.json").is_file():
            raise ValueError(
                f"{argument}={name!r} is a folder without config.json, so not a saved "
                "checkpoint (save_pretrained() writes one). Pass the folder that "
                f"save_pretrained() wrote, or a Hub name; this needs {hint}."
            )
    elif path.exists():
        raise ValueError(f"{argument}={name!r} is a file; pass the checkpoint's folder.")
    elif _looks_like_a_path(name):
        raise ValueError(
            f"{argument}={name!r}: no such folder. Pass an existing checkpoint folder or a "
            f"Hub name; this needs {hint}."
        )


@contextmanager
def explained_load_errors(name: str, hint: str = MASKED_LM_HINT) -> Iterator[None]:
    """Turn the Hub's failures into one short error that says what happened (not in the
    local cache while the Hub is off or unreachable; no such model; no such revision)
    instead of a chain of tracebacks that ends in a network error."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except OSError as error:
        causes: list[BaseException] = []
        cause: BaseException | None = error
        while cause is not None and len(causes) < 20:
            causes.append(cause)
            cause = cause.__cause__ or cause.__context__

        def caused_by(kind: type[BaseException]) -> bool:
            return any(isinstance(c, kind) for c in causes)

        if caused_by(LocalEntryNotFoundError):
            hub = (
                "the Hugging Face Hub is switched off (HF_HUB_OFFLINE=1)"
                if constants.HF_HUB_OFFLINE
                else "the Hugging Face Hub cannot be reached"
            )
            message = (
                f"{name!r} is not a local folder, {hub}, and {name!r} is not in the local "
                "Hugging Face cache. Download it where the Hub is reachable (`hf download "
                f"{name}`) or pass a local checkpoint folder; this needs {hint}."
            )
        elif caused_by(GatedRepoError):
            message = f"{name!r} is gated on the Hugging Face Hub: log in with access to it."
        elif caused_by(RepositoryNotFoundError):
            message = (
                f"{name!r} is neither a local folder nor a model on the Hugging Face Hub "
                f"(or it is private). Check the name; this needs {hint}."
            )
        elif caused_by(RevisionNotFoundError):
            message = f"{name!r} has no such revision on the Hugging Face Hub."
        else:
            raise
        raise ValueError(message) from None


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
