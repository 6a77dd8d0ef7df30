"""What a results file records about how its numbers were scored.

lm-eval merges ``LM.get_model_info()`` into the ``config`` of every results JSON, so these
entries say which checkpoint, weights, dtype, metric and package version produced a number
without anyone having to parse the ``model_args`` string.  The commit of a hub checkpoint
is read from the local Hugging Face cache (never from the network): it is known for hub
names and for folders inside that cache, and None for other local folders.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import torch

import pll_harness
from pll_harness.loading import model_identity
from pll_harness.models import DEMO_MODEL_DIR, DEMO_MODEL_NAME

_COMMIT = re.compile(r"[0-9a-f]{40}")


def checkpoint_commit(checkpoint: str | None, revision: str | None = None) -> str | None:
    """The commit hash of ``checkpoint`` at ``revision`` (default ``main``) if the local
    Hugging Face cache knows it, else None."""
    if not checkpoint:
        return None
    folder = Path(checkpoint)
    if folder.is_dir():  # a cache snapshot folder is named by its commit
        folder = folder.resolve()
        inside_cache = folder.parent.name == "snapshots"
        return folder.name if inside_cache and _is_commit(folder.name) else None
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(checkpoint, "config.json", revision=revision)
    except ValueError:  # not a valid hub name either: nothing to look up
        return None
    if not isinstance(cached, str):
        return None
    commit = Path(cached).parent.name
    return commit if _is_commit(commit) else None


def _is_commit(name: str) -> bool:
    return _COMMIT.fullmatch(name) is not None


HASHED_FILE_BYTES = 64 << 20
"""Files up to this size are fingerprinted by their content (the packaged ``pll-demo``'s
weights, 28.0 MB, in about 30 ms); larger ones by size and modification time, which every
save changes, so that a check costs no read of a model's gigabytes."""


NOT_MODEL_FILES = (".md", ".csv", ".tsv", ".jsonl", ".png", ".db")
"""Suffixes of the files in a model's folder that no score depends on: documentation, and
what a run may write beside the model (``pll-harness`` outputs and plots, lm-eval's
``--use_cache`` database), which would otherwise make the folder another model to the
next run that resumes them."""

NOT_MODEL_FILE_NAMES = frozenset({"NOTICE", "LICENSE", "COPYING"})
"""Licence texts without a suffix (``pll-demo`` ships a ``NOTICE``): an edit to them
changes no score."""


def folder_fingerprint(name: str | None) -> str | None:
    """A digest of a local model folder's files as they are now, or None for a hub name.

    A local folder has no commit (:func:`checkpoint_commit`), and a model trained again
    into the same ``output_dir`` keeps its path: this is what tells the two apart.  The
    files directly in the folder count, by name, except hidden ones and those no score
    depends on (:data:`NOT_MODEL_FILES`, :data:`NOT_MODEL_FILE_NAMES`)."""
    if not name or not Path(name).is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(Path(name).resolve().iterdir()):
        if (
            path.name.startswith(".")
            or path.suffix in NOT_MODEL_FILES
            or path.name in NOT_MODEL_FILE_NAMES
            or not path.is_file()
        ):
            continue
        status = path.stat()
        digest.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        if status.st_size <= HASHED_FILE_BYTES:
            with path.open("rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        else:
            digest.update(f"{status.st_size} {status.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def model_info(
    model: torch.nn.Module,
    pll_metric: str,
    max_length: int,
    checkpoint: str | None = None,
    revision: str | None = None,
    device: torch.device | str | None = None,
    add_prefix_space: bool | None = None,
    tokenizer: str | None = None,
) -> dict[str, Any]:
    """The entries lm-eval adds to a results file's ``config``.

    ``checkpoint`` is the name the model was loaded by (hub name, folder or ``pll-demo``),
    recorded as :func:`model_identity` gives it (a folder as its absolute path, however it
    was written); None means the model was passed in as an object, and its ``name_or_path``
    stands in.
    ``device`` is where the scoring ran (``pll_device``): lm-eval's own ``device`` entry
    records its ``--device`` flag, which names CUDA on a machine without it when the flag
    is left out.  ``model_files`` is :func:`folder_fingerprint` of the folder the weights
    came from (None for a hub model, whose ``model_sha`` says it): a local folder, or the
    packaged ``pll-demo``, has no commit, and a later model saved under the same name is
    told apart by it.  ``pll_add_prefix_space`` is the tokenizer option as asked (None:
    the tokenizer's own), which changes a byte-level BPE model's scores.  ``tokenizer`` is
    the name or folder the tokenizer was loaded from (``model_tokenizer``, as
    :func:`model_identity` gives it): another than the checkpoint's changes every score,
    and a model passed in as an object leaves no ``model_args`` to say so.  Key names follow
    lm-eval's own HF model (``model_dtype``, ``model_revision``, ``model_sha``,
    ``model_num_parameters``) where they mean the same thing.
    """
    name = checkpoint or getattr(model, "name_or_path", None) or None
    return {
        "pll_metric": pll_metric,
        "pll_max_length": max_length,
        "pll_device": None if device is None else str(device),
        "pll_add_prefix_space": add_prefix_space,
        "pll_harness_version": pll_harness.__version__,
        "model_checkpoint": model_identity(name) if name else None,
        "model_tokenizer": model_identity(tokenizer) if tokenizer else None,
        "model_architecture": type(model).__name__,
        "model_revision": revision,
        "model_sha": checkpoint_commit(name, revision),
        "model_files": folder_fingerprint(getattr(model, "name_or_path", None)),
        "model_dtype": str(getattr(model, "dtype", None) or next(model.parameters()).dtype),
        "model_num_parameters": sum(p.numel() for p in model.parameters()),
    }


def scoring_model(
    model: str,
    dtype: str | None = "auto",
    max_length: int | None = None,
    add_prefix_space: bool | None = None,
    commit: str | None = None,
) -> str:
    """The masked LM as a record's ``model`` field shows it: :func:`model_identity`; for a
    local folder, a digest of its files (``files=...``, :func:`folder_fingerprint`), since
    a model saved again into the folder keeps its path; then each setting that changes its
    numbers and is not the default (``dtype=bfloat16``, ``max_length=128``,
    ``add_prefix_space=True``); last, a hub model's ``commit`` (:func:`loaded_commit`),
    once it has loaded.  A resumed file never mixes two models', two settings' or two
    commits' scores.  A dtype that a local checkpoint's config
    declares is its default (``auto`` loads it in that dtype), so writing it out resumes
    the same file."""
    if dtype in (None, "auto") or dtype == _declared_dtype(model):
        dtype = None
    settings = {"dtype": dtype, "max_length": max_length, "add_prefix_space": add_prefix_space}
    given = "".join(f" {name}={value}" for name, value in settings.items() if value is not None)
    return _with_commit(model_label(model) + given, commit)


def _declared_dtype(model: str) -> str | None:
    """The dtype a local checkpoint's ``config.json`` declares (``dtype``, or transformers
    4's ``torch_dtype``); None where it says none or the model is not a local folder (a hub
    name, whose config this does not fetch)."""
    folder = DEMO_MODEL_DIR if model_identity(model) == DEMO_MODEL_NAME else Path(model)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    declared = (
        config.get("dtype") or config.get("torch_dtype") if isinstance(config, dict) else None
    )
    return declared if isinstance(declared, str) else None


def model_label(model: str, commit: str | None = None) -> str:
    """:func:`model_identity`, and for a local folder the digest of its files.  The
    packaged demo model's too: a later version of the package ships a model trained
    again under the same name.  A hub model's ``commit`` (:func:`loaded_commit`) comes
    last.  The digest reads the folder's files: a scorer takes its
    label once (``MLMScorers.label``, ``CausalScorer.label``) rather than per chunk."""
    identity = model_identity(model)
    files = folder_fingerprint(str(DEMO_MODEL_DIR) if identity == DEMO_MODEL_NAME else model)
    return _with_commit(identity if files is None else f"{identity} files={files}", commit)


def loaded_commit(model: str, revision: str | None = None) -> str | None:
    """The commit of the hub model ``model`` that was loaded (at ``revision``, default
    ``main``), for its label: asked once it has loaded, since loading online resolves
    ``main`` to the commit it loads and records that in the cache (transformers 5 no
    longer puts it in the model's config), and the cache may have held an older ``main``
    before.  None for a local folder and for
    ``pll-demo``, whose ``files=`` digest tells their versions apart (a cache snapshot
    folder included, which has a commit), and where the cache does not know it."""
    if model_identity(model) == DEMO_MODEL_NAME or Path(model).is_dir():
        return None
    return checkpoint_commit(model, revision)


_LABEL_COMMIT = re.compile(r"(?P<label>.*) commit=(?P<commit>[0-9a-f]{40})", re.DOTALL)
"""A label's commit: last, after the settings, so that no folder's path (which may hold
spaces) reads as one: a folder's label ends with its ``files=`` digest or a setting."""


def _with_commit(label: str, commit: str | None) -> str:
    return label if commit is None else f"{label} commit={commit}"


def split_commit(label: str) -> tuple[str, str | None]:
    """A label (:func:`scoring_model`, :func:`model_label`) without its commit, and the
    commit: None for a local folder or ``pll-demo``, for a label taken before the model
    loaded, and in records written before labels named a hub model's commit."""
    found = _LABEL_COMMIT.fullmatch(label)
    return (label, None) if found is None else (found["label"], found["commit"])
