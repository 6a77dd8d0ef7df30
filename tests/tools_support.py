"""Helpers shared by the ``test_tools_*`` files: tiny causal LMs and PNG checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import TINY_ROBERTA_DIR

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LLAMA_TEXT = "The traveler lost the souvenir. A cat sat on the mat. She is a nurse."
"""What the tiny Llama's tokenizer is trained on."""


def build_tiny_gpt2(folder: Path) -> Path:
    """A random 1-layer GPT-2 beside a copy of the tiny RoBERTa's byte-level BPE tokenizer
    (``<s>`` serves as BOS): loadable by ``AutoModelForCausalLM`` from a local folder."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY_ROBERTA_DIR / name, folder / name)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sizes = {"n_positions": 64, "n_embd": 16, "n_layer": 1, "n_head": 2}
    return _save_random(folder, tokenizer, GPT2Config, GPT2LMHeadModel, **sizes)


def build_tiny_llama(folder: Path) -> Path:
    """A random 1-layer Llama with transformers' own ``LlamaTokenizer`` (BPE over a
    Metaspace pre-tokenizer that does not split at spaces, as Llama's and Mistral's do),
    trained on a few sentences; it adds ``<s>`` itself."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"])
    bpe.train_from_iterator([LLAMA_TEXT] * 20, trainer)
    learnt = json.loads(bpe.to_str())["model"]
    tokenizer = LlamaTokenizer(vocab=learnt["vocab"], merges=[tuple(m) for m in learnt["merges"]])
    tokenizer.save_pretrained(folder)
    sizes = {
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "max_position_embeddings": 64,
    }
    return _save_random(folder, tokenizer, LlamaConfig, LlamaForCausalLM, **sizes)


def _save_random(
    folder: Path, tokenizer: Any, config_class: type, model_class: type, **sizes: int
) -> Path:
    """A causal LM of ``model_class`` with seeded random weights, sized by ``sizes`` and
    fitted to ``tokenizer`` (its vocabulary, BOS and EOS), saved to ``folder``."""
    import torch

    torch.manual_seed(0)
    config = config_class(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **sizes,
    )
    model_class(config).eval().save_pretrained(folder)
    return folder


def causal_reference(folder: Path, sentence: str, context: str = "") -> float:
    """log P(sentence | BOS [+ context]) computed the plain way, one forward pass."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    full = tokenizer.encode((context + sentence).strip(), add_special_tokens=False)
    prefix = tokenizer.encode(context.strip(), add_special_tokens=False) if context else []
    ids = [tokenizer.bos_token_id, *full]
    with torch.no_grad():
        logprobs = model(torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
    per_token = logprobs.gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    return float(per_token[len(prefix) :].sum())


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC), path
