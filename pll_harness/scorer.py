"""Score sentences and lm-eval requests with a masked LM: the public Python API.

``PLLScorer`` ties the pieces together: tokenization (``encoding``), long-input windows
(``windows``), masking plans (``masking``) and the batched engine (``runner``).  It
deduplicates identical requests and returns every token's log-probability, so callers
can look inside a sentence score, not only at its sum.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pll_harness.encoding import (
    Encoded,
    SpecialTokens,
    encode_request,
    require_fast_tokenizer,
    special_tokens,
)
from pll_harness.heads import split_masked_lm
from pll_harness.loading import LoadedModel, load_masked_lm, model_max_length
from pll_harness.masking import DEFAULT_METRIC, NO_WORD, WORD_LEVEL_METRICS, check_metric
from pll_harness.runner import (
    Batch,
    Batching,
    CopyPlan,
    PLLRunner,
    TargetScores,
    build_copy_plan,
    plan_batches,
)
from pll_harness.windows import Window, plan_windows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SentenceScore:
    """The PLL of one scored text (or continuation) and its per-token parts.

    ``logprob`` is the natural-log sum over ``tokens``; ``is_greedy`` is True when every
    scored token was the model's argmax at its own masked position.
    """

    text: str
    tokens: tuple[str, ...]
    token_ids: tuple[int, ...]
    token_logprobs: tuple[float, ...]
    token_greedy: tuple[bool, ...]

    @property
    def logprob(self) -> float:
        return math.fsum(self.token_logprobs)

    @property
    def is_greedy(self) -> bool:
        return all(self.token_greedy)

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "logprob": self.logprob,
            "is_greedy": self.is_greedy,
            "tokens": list(self.tokens),
            "token_logprobs": list(self.token_logprobs),
            "token_greedy": list(self.token_greedy),
        }


@dataclass(frozen=True)
class Job:
    """One distinct request: its tokens and the windows it is scored in."""

    text: str
    encoded: Encoded
    windows: tuple[Window, ...]


@dataclass(frozen=True)
class Work:
    """The copy plans of some jobs (``plan_jobs[p]`` is plan p's job) and their batches."""

    plans: list[CopyPlan]
    plan_jobs: list[int]
    batches: list[Batch]


class PLLScorer:
    """Pseudo-log-likelihood scorer for one masked LM and one metric."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        pll_metric: str = DEFAULT_METRIC,
        device: str | torch.device | None = None,
        max_batch_tokens: int | None = None,
        batch_size: int | None = None,
        max_length: int | None = None,
    ) -> None:
        self.metric = check_metric(pll_metric)
        check_sizes(max_batch_tokens=max_batch_tokens, batch_size=batch_size, max_length=max_length)
        require_fast_tokenizer(tokenizer, pll_metric, pll_metric in WORD_LEVEL_METRICS)
        if tokenizer.mask_token_id is None:
            raise ValueError(
                f"The tokenizer of {type(model).__name__} has no mask token, so it cannot be "
                "scored by pseudo-log-likelihood. pll-mlm needs a masked language model "
                "(BERT, RoBERTa, DeBERTa, ELECTRA generator, ModernBERT, ...); for causal LMs "
                "use lm-eval's `hf` model."
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device) if device is not None else _model_device(model)
        self.specials: SpecialTokens = special_tokens(tokenizer)
        limit = model_max_length(model, tokenizer)
        if max_length is not None and max_length > limit:
            raise ValueError(
                f"max_length={max_length} exceeds what this model accepts ({limit} tokens, "
                "special tokens included). Use max_length<=" + str(limit) + "."
            )
        self.max_length = max_length or limit
        if self.max_length <= self.specials.count:
            raise ValueError(f"max_length={self.max_length} leaves no room for text tokens.")
        pad_id = tokenizer.pad_token_id
        self.runner = PLLRunner(
            split_masked_lm(model),
            mask_token_id=tokenizer.mask_token_id,
            pad_token_id=pad_id if pad_id is not None else tokenizer.mask_token_id,
            device=self.device,
            batching=Batching(
                max_batch_tokens or default_batch_tokens(model, self.device), batch_size
            ),
            vocab_size=_vocab_size(model),
        )
        self._warned_truncation = False

    @classmethod
    def from_pretrained(
        cls,
        pretrained: str,
        pll_metric: str = DEFAULT_METRIC,
        device: str | None = None,
        max_batch_tokens: int | None = None,
        batch_size: int | None = None,
        max_length: int | None = None,
        **load_kwargs: Any,
    ) -> PLLScorer:
        """Load a checkpoint (hub name or local folder) and build a scorer for it.

        ``load_kwargs`` go to :func:`pll_harness.loading.load_masked_lm` (tokenizer,
        revision, trust_remote_code, dtype, attn_implementation).
        """
        loaded: LoadedModel = load_masked_lm(pretrained, device=device, **load_kwargs)
        return cls(
            loaded.model,
            loaded.tokenizer,
            pll_metric=pll_metric,
            device=loaded.device,
            max_batch_tokens=max_batch_tokens,
            batch_size=batch_size,
            max_length=max_length,
        )

    @property
    def capacity(self) -> int:
        """Text tokens that fit in one forward pass beside the special tokens."""
        return self.max_length - self.specials.count

    def score(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> list[SentenceScore]:
        """PLL of whole texts of any length (windows past the model's maximum length)."""
        return self.score_requests([("", text) for text in texts], progress)

    def score_requests(
        self,
        requests: Sequence[tuple[str, str]],
        progress: Callable[[int], None] | None = None,
    ) -> list[SentenceScore]:
        """Score each continuation given its context (visible, never masked).

        ``progress(n)`` is called as requests finish, with how many finished.
        """
        keys, jobs = self.distinct_jobs(requests)
        multiplicity = [0] * len(jobs)
        for key in keys:
            multiplicity[key] += 1
        scores = self.score_jobs(jobs, progress, multiplicity)
        return [scores[key] for key in keys]

    def distinct_jobs(self, requests: Sequence[tuple[str, str]]) -> tuple[list[int], list[Job]]:
        """Map each request to a distinct job (``keys[i]`` is request i's job); identical
        requests are tokenized and scored once."""
        index: dict[tuple[str, str], int] = {}
        keys, jobs = [], []
        for context, continuation in requests:
            key = (context, continuation)
            if key not in index:
                index[key] = len(jobs)
                encoded = encode_request(self.tokenizer, context, continuation)
                jobs.append(Job(continuation, encoded, tuple(self._windows(encoded))))
            keys.append(index[key])
        return keys, jobs

    def score_jobs(
        self,
        jobs: Sequence[Job],
        progress: Callable[[int], None] | None = None,
        weights: Sequence[int] | None = None,
    ) -> list[SentenceScore]:
        """Score jobs in one engine run; ``progress(weights[j])`` fires when job j is done."""
        weights = weights if weights is not None else [1] * len(jobs)
        work = self.plan_work(jobs)
        remaining = [len(job.windows) for job in jobs]

        def plan_done(plan_index: int) -> None:
            job_index = work.plan_jobs[plan_index]
            remaining[job_index] -= 1
            if remaining[job_index] == 0 and progress is not None:
                progress(weights[job_index])

        def batch_done(batch: Batch) -> None:
            for segment in batch:
                if segment.stop == work.plans[segment.plan].n_copies:
                    plan_done(segment.plan)

        if progress is not None:
            progress(sum(w for job, w in zip(jobs, weights, strict=True) if not job.windows))
        for plan_index, plan in enumerate(work.plans):
            if plan.n_copies == 0:
                plan_done(plan_index)
        results = self.runner.run(work.plans, work.batches, batch_done)
        return self.assemble(jobs, work, results)

    def plan_work(self, jobs: Sequence[Job]) -> Work:
        """Copy plans for every window of every job, packed into batches."""
        plans, plan_jobs = [], []
        for job_index, job in enumerate(jobs):
            for window in job.windows:
                plans.append(self._plan(job.encoded, window))
                plan_jobs.append(job_index)
        return Work(plans, plan_jobs, plan_batches(plans, self.runner.batching))

    def assemble(
        self, jobs: Sequence[Job], work: Work, results: Sequence[TargetScores]
    ) -> list[SentenceScore]:
        """Per-job scores from the per-plan results of ``work`` (all of its batches run)."""
        if any(bool(torch.isnan(r.logprobs).any()) for r in results):
            raise RuntimeError(
                "Some target log-probabilities are NaN: either the model produced NaN (in "
                "float16, try dtype=float32 or bfloat16) or not every batch was run."
            )
        per_job: list[list[TargetScores]] = [[] for _ in jobs]
        for job_index, result in zip(work.plan_jobs, results, strict=True):
            per_job[job_index].append(result)
        return [self._assemble(job, parts) for job, parts in zip(jobs, per_job, strict=True)]

    def _windows(self, encoded: Encoded) -> list[Window]:
        if encoded.n_targets == 0:
            return []
        windows = plan_windows(len(encoded.ids), encoded.first_target, self.capacity)
        if windows[0].start > 0 and len(windows) == 1 and not self._warned_truncation:
            logger.warning(
                "An input is longer than the model's maximum length (%d tokens): its context "
                "was cut from the left so that the whole continuation is scored. Further "
                "truncations are not reported.",
                self.max_length,
            )
            self._warned_truncation = True
        return windows

    def _plan(self, encoded: Encoded, window: Window) -> CopyPlan:
        prefix, suffix = self.specials.prefix, self.specials.suffix
        body = encoded.ids[window.start : window.end]
        words = encoded.word_ids[window.start : window.end]
        input_ids = torch.tensor(prefix + body + suffix, dtype=torch.long)
        word_ids = torch.tensor(
            (NO_WORD,) * len(prefix) + words + (NO_WORD,) * len(suffix), dtype=torch.long
        )
        offset = len(prefix) - window.start
        targets = torch.arange(window.target_start, window.target_end) + offset
        protected = torch.zeros(input_ids.shape[0], dtype=torch.bool)
        context_end = encoded.first_target + offset
        protected[len(prefix) : max(context_end, len(prefix))] = True
        return build_copy_plan(input_ids, word_ids, targets, self.metric, protected)

    def _assemble(self, job: Job, parts: list[TargetScores]) -> SentenceScore:
        ids = job.encoded.ids[job.encoded.first_target :]
        if parts:
            logprobs = torch.cat([p.logprobs for p in parts]).tolist()
            greedy = torch.cat([p.greedy for p in parts]).tolist()
        else:
            logprobs, greedy = [], []
        return SentenceScore(
            text=job.text,
            tokens=tuple(self.tokenizer.convert_ids_to_tokens(list(ids))),
            token_ids=ids,
            token_logprobs=tuple(logprobs),
            token_greedy=tuple(bool(g) for g in greedy),
        )


SIZE_ARGUMENTS = ("max_batch_tokens", "batch_size", "max_length")


def check_sizes(**sizes: Any) -> None:
    """Each size is None (the default) or a positive integer: 0 or -3 would otherwise pass
    unnoticed until it made empty batches or an empty window somewhere deeper."""
    for name, value in sizes.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"{name}={value!r} is not valid; use a positive integer or None.")


def default_batch_tokens(model: torch.nn.Module, device: torch.device) -> int:
    """A token budget per forward pass that keeps activations well inside memory.

    On CPU, 512 tokens already keep the matrix multiplications at full speed (benchmarked
    in ``pll_harness.bench``: a 768-wide encoder's GEMMs run as fast with 512-8192 rows, and
    64 bert-base BLiMP sentences take the same time at 512 and 1024), while a bigger budget
    adds padding (each batch spans more lengths: 2.1% padded tokens at 1024 and 15% at 8192
    on BLiMP) and activation memory (peak RSS 16 MB lower at 512 than at 1024).  On a GPU
    the budget grows with free memory, estimated from the model's width and depth.
    """
    if device.type != "cuda":
        return 512
    free, _ = torch.cuda.mem_get_info(device)
    config = model.config
    hidden = getattr(config, "hidden_size", 768)
    intermediate = getattr(config, "intermediate_size", 4 * hidden)
    element = next(model.parameters()).element_size()
    per_token = (8 * hidden + 2 * intermediate) * element
    return int(max(2048, min(free * 0.4 / per_token, 1 << 20)))


def _vocab_size(model: torch.nn.Module) -> int:
    output = model.get_output_embeddings()
    if output is not None and hasattr(output, "weight"):
        return int(output.weight.shape[0])
    return int(model.config.vocab_size)


def _model_device(model: torch.nn.Module) -> torch.device:
    """Where inputs go: the first parameter that is materialised.  A model dispatched by
    accelerate (``device_map``) keeps offloaded weights on the meta device; its hooks move
    activations between devices themselves."""
    for parameter in model.parameters():
        if parameter.device.type != "meta":
            return parameter.device
    return torch.device("cpu")


def score(
    texts: str | Sequence[str],
    model: str | PLLScorer,
    pll_metric: str | None = None,
    **kwargs: Any,
) -> list[SentenceScore]:
    """PLL of each text with per-token log-probabilities.

    ``model`` is a checkpoint (hub name or local folder; ``pll_metric`` defaults to
    word_l2r and ``kwargs`` go to :meth:`PLLScorer.from_pretrained`) or an existing
    :class:`PLLScorer`, whose metric and settings are fixed: asking it for another metric or
    setting is an error rather than a silently different score.  One string is one text
    (as in minicons), never a sequence of one-character texts.
    """
    if isinstance(texts, str):
        texts = [texts]
    check_sizes(**{name: kwargs[name] for name in SIZE_ARGUMENTS if name in kwargs})
    if isinstance(model, PLLScorer):
        if kwargs or (pll_metric is not None and pll_metric != model.metric):
            raise ValueError(
                f"This PLLScorer scores with pll_metric={model.metric!r} and fixed settings; "
                "build another PLLScorer (or pass a model name) for other ones."
            )
        return model.score(texts)
    scorer = PLLScorer.from_pretrained(model, pll_metric=pll_metric or DEFAULT_METRIC, **kwargs)
    return scorer.score(texts)
