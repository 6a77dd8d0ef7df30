"""A causal LM beside the masked one: log P(text | BOS), the convention of Kauf & Ivanova
(2023) and of lm-eval for an empty context, with per-token parts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pll_harness.encoding import encode_requests, whitespace_inside_words

PROBE = "The cat sat on the mat."
"""A text whose first tokens test that a loaded model is causal."""

CAUSAL_TOLERANCE = 1e-2
"""How far (nats) a causal model's predictions may move when a later token is appended:
float rounding of two sequence lengths (TF32 or fused kernels on a GPU) stays far below it,
while a masked LM's move by nats (4.3 on the tiny test models)."""


@dataclass(frozen=True)
class CausalScore:
    """log P(text | BOS) from a causal LM, with its per-token parts (natural log)."""

    text: str
    tokens: tuple[str, ...]
    token_logprobs: tuple[float, ...]

    @property
    def logprob(self) -> float:
        return math.fsum(self.token_logprobs)


class CausalScorer:
    """A causal LM (``AutoModelForCausalLM``, e.g. ``gpt2``) scoring log P(text | BOS),
    the convention of the paper and of lm-eval for an empty context."""

    def __init__(
        self,
        model: str,
        device: str | None = None,
        batch_size: int = 16,
        trust_remote_code: bool = False,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from pll_harness.loading import (
            CAUSAL_LM_HINT,
            check_model_source,
            explained_load_errors,
            refuse_a_tokenizer_without_vocabulary,
            resolve_device,
        )
        from pll_harness.provenance import loaded_commit, model_label

        self.name = model
        self.device = resolve_device(device)
        check_model_source(model, "--causal", CAUSAL_LM_HINT)
        with explained_load_errors(model, CAUSAL_LM_HINT):
            self.tokenizer = AutoTokenizer.from_pretrained(
                model, trust_remote_code=trust_remote_code
            )
            loaded = AutoModelForCausalLM.from_pretrained(
                model, trust_remote_code=trust_remote_code, dtype=torch.float32
            )
        refuse_a_tokenizer_without_vocabulary(self.tokenizer, model)
        self.label = model_label(model, loaded_commit(model))
        """What records of its scores say in their ``causal_model`` field (a hub model's
        commit is known once it has loaded)."""
        self.model = loaded.to(self.device).eval()
        if not self._sees_only_the_past():
            raise ValueError(
                f"{model!r} is not a causal LM: its prediction for a token changes with the "
                "tokens after it (a masked LM such as BERT loads as a causal model but "
                f"attends both ways). --causal needs {CAUSAL_LM_HINT}."
            )
        tok = self.tokenizer
        self.bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        if self.bos is None:
            raise ValueError(f"The causal model {model!r} has neither a BOS nor an EOS token.")
        positions = getattr(self.model.config, "n_positions", None) or getattr(
            self.model.config, "max_position_embeddings", 1024
        )
        self.max_length = int(positions)
        self.batch_size = batch_size
        self._whitespace_inside_words = whitespace_inside_words(tok)

    def _sees_only_the_past(self) -> bool:
        """Whether appending a token leaves the predictions before it unchanged.  Asked of
        the model itself, since ``AutoModelForCausalLM`` also loads masked LMs (BERT,
        RoBERTa) without ``is_decoder``: they then attend both ways and would give
        meaningless numbers without an error."""
        import torch

        probe = self.encode(PROBE)[:3]
        with torch.no_grad():
            longer = self.model(torch.tensor([probe], device=self.device)).logits.float()
            shorter = self.model(torch.tensor([probe[:-1]], device=self.device)).logits.float()
        before = longer[:, :-1].log_softmax(-1)
        return torch.allclose(before, shorter.log_softmax(-1), atol=CAUSAL_TOLERANCE, rtol=0.0)

    def encode(self, text: str) -> list[int]:
        """The text's token ids, without the warning transformers gives for a text longer
        than the model: such a text is scored in windows (:meth:`score`), so it is wrong."""
        encoded = self.tokenizer(text.strip(), add_special_tokens=False, verbose=False)
        return list(encoded["input_ids"])

    def word_ids(self, text: str) -> list[int]:
        """Word index per token by the masked-LM engine's rule (the fast tokenizer's words,
        never spanning whitespace: Llama's, Mistral's and Gemma's tokenizers do not split
        at spaces before BPE, so their own word ids make a whole sentence one word), or one
        word per token for a slow tokenizer."""
        encoded = encode_requests(self.tokenizer, [("", text)], self._whitespace_inside_words)
        return list(encoded.item(0).word_ids)

    def score(self, texts: Sequence[str], context: str = "") -> list[CausalScore]:
        """Score each text (given an optional ``context``, visible and never scored)."""
        from pll_harness.encoding import common_prefix_length

        jobs = []
        for text in texts:
            if context:
                full = self.encode(context + text)
                prefix = self.encode(context)
                cut = common_prefix_length(full, prefix)
            else:
                full, cut = self.encode(text), 0
            jobs.append((full, cut))
        results: list[CausalScore | None] = [None] * len(jobs)
        short = [i for i, (full, _) in enumerate(jobs) if len(full) < self.max_length]
        for i in (i for i in range(len(jobs)) if len(jobs[i][0]) >= self.max_length):
            full, cut = jobs[i]
            values = self._score_long(full)
            results[i] = self._result(texts[i], full[cut:], values[cut:])
        order = sorted(short, key=lambda i: len(jobs[i][0]))
        for begin in range(0, len(order), self.batch_size):
            batch = order[begin : begin + self.batch_size]
            rows = [[self.bos, *jobs[i][0]] for i in batch]
            for row_index, values in enumerate(self._forward(rows)):
                full, cut = jobs[batch[row_index]]
                results[batch[row_index]] = self._result(
                    texts[batch[row_index]], full[cut:], values[cut:]
                )
        return [r for r in results if r is not None]

    def _result(self, text: str, ids: Sequence[int], values: Sequence[float]) -> CausalScore:
        return CausalScore(
            text, tuple(self.tokenizer.convert_ids_to_tokens(list(ids))), tuple(values)
        )

    def _forward(self, rows: Sequence[Sequence[int]]) -> list[list[float]]:
        """log P(row[k] | row[:k]) for k >= 1 of each row (right-padded batch)."""
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.bos, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
        with torch.no_grad():
            logits = self.model(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
            ).logits.float()
        logprobs = logits[:, :-1].log_softmax(-1)
        gathered = logprobs.gather(2, ids[:, 1:, None].to(self.device))[..., 0].cpu()
        return [gathered[r, : len(row) - 1].tolist() for r, row in enumerate(rows)]

    def _score_long(self, full: Sequence[int]) -> list[float]:
        """A text longer than the model's window: score blocks of half a window, each
        block given the preceding tokens that fit (BOS while it fits), every token once."""
        seq = [self.bos, *full]
        stride = max(self.max_length // 2, 1)
        values: list[float] = []
        position = 1
        while position < len(seq):
            end = min(position + stride, len(seq))
            start = max(0, end - self.max_length)
            (window_values,) = self._forward([seq[start:end]])
            values += window_values[position - start - 1 :]
            position = end
        return values
