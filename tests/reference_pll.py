"""A slow, obviously-correct PLL: one masked copy per forward pass, float64 throughout.

It shares no code with the engine: it encodes with the tokenizer's own special tokens,
decides the masked set of each target with a plain loop over the definitions, and reads
the target's log-probability from the full logits.  Only the metric's name is checked
against the registry, so that an unknown name fails here as it does in the engine.
"""

from __future__ import annotations

import copy

import torch

from pll_harness.metrics import get_metric


def with_whole_offsets(tokenizer):
    """The tokenizer with offsets that cover each token's whole text.  RoBERTa's trim the
    whitespace off them (``trim_offsets``): a token of spaces alone gets an empty span
    after them, which says nothing of which side of a boundary its spaces lie on."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    processor = None if backend is None else backend.post_processor
    if not getattr(processor, "trim_offsets", False):
        return tokenizer
    untrimmed = copy.deepcopy(tokenizer)
    untrimmed.backend_tokenizer.post_processor.trim_offsets = False
    return untrimmed


def target_positions(tokenizer, context: str, continuation: str) -> tuple[list[int], list]:
    """Return the encoding's input ids, word ids and the indices of continuation tokens:
    those whose text does not lie wholly inside the context."""
    full = context + continuation
    # Unicode's White_Space: what str.isspace() says, but for the information separators
    whitespace = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
    whitespace = whitespace.translate(dict.fromkeys(range(0x1C, 0x20)))
    text = full.strip(whitespace)
    boundary = max(len(context) - (len(full) - len(full.lstrip(whitespace))), 0)
    enc = with_whole_offsets(tokenizer)(text, add_special_tokens=True, return_offsets_mapping=True)
    words = enc.word_ids()
    targets = [
        i
        for i, (start, end) in enumerate(enc["offset_mapping"])
        if words[i] is not None and (end > boundary or start >= boundary)
    ]
    return enc["input_ids"], words, targets


DEFINITIONS = {
    "original": lambda j, target, same_word: j == target,
    "word_l2r": lambda j, target, same_word: j == target or (same_word and j > target),
    "whole_word": lambda j, target, same_word: j == target or same_word,
    "sentence_l2r": lambda j, target, same_word: j >= target,
}
"""Each metric's definition, written out per position: is ``j`` hidden for ``target``?"""


def masked_set(words: list, targets: list[int], target: int, metric: str) -> set[int]:
    """Positions hidden when scoring ``target``: the metric's definition, context excluded.

    A name the registry does not know fails as it does everywhere; a registered metric
    without a definition here fails with a KeyError, so a new metric needs one."""
    hides = DEFINITIONS[get_metric(metric).name]
    context = {i for i, w in enumerate(words) if w is not None and i not in targets}
    return {
        j
        for j, word in enumerate(words)
        if j not in context and hides(j, target, word is not None and word == words[target])
    }


def float64_model(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model).double().eval()


@torch.no_grad()
def naive_scores(
    model64: torch.nn.Module,
    tokenizer,
    ids: list[int],
    words: list,
    targets: list[int],
    metric: str,
) -> list[float]:
    """Log-probability of each target of ``ids``, one forward pass per target, with the
    metric's mask; tokens that are not targets stay visible."""
    scores = []
    for target in targets:
        masked = list(ids)
        for j in masked_set(words, targets, target, metric):
            masked[j] = tokenizer.mask_token_id
        logits = model64(input_ids=torch.tensor([masked])).logits[0, target]
        scores.append(float(torch.log_softmax(logits.double(), -1)[ids[target]]))
    return scores


def naive_pll(
    model64: torch.nn.Module, tokenizer, context: str, continuation: str, metric: str
) -> list[float]:
    """Per-target log-probabilities of the continuation, one forward pass per target."""
    ids, words, targets = target_positions(tokenizer, context, continuation)
    return naive_scores(model64, tokenizer, ids, words, targets, metric)
