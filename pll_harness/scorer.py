"""Score sentences and lm-eval requests with a masked LM: the public Python API.

``PLLScorer`` ties the pieces together: tokenization (``encoding``), long-input windows
(``windows``), masking plans (``masking``) and the batched engine (``runner``).  It
deduplicates identical requests and returns every token's log-probability, so callers
can look inside a sentence score, not only at its sum.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import logging
import math
import numbers
import os
import queue
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pll_harness.architectures import max_positions
from pll_harness.arguments import TRANSFORMERS_ALIASES, check_known, check_string_pairs
from pll_harness.collector import collector_paused
from pll_harness.encoding import (
    Encodings,
    SpecialTokens,
    encode_requests,
    require_fast_tokenizer,
    special_tokens,
    whitespace_inside_words,
)
from pll_harness.heads import split_masked_lm
from pll_harness.loading import (
    FOR_CAUSAL_LMS,
    LoadedModel,
    load_masked_lm,
    model_max_length,
    resolve_device,
)
from pll_harness.metrics import DEFAULT_METRIC, get_metric
from pll_harness.parts import PARTS_FROM, MadeAhead, in_parts, prepared_ahead, request_parts
from pll_harness.planning import Batching, Work, WorkPlanner
from pll_harness.runner import InFlight, PendingScores, PLLRunner, TargetScores

logger = logging.getLogger(f"lm_eval.{__name__}")

VOCABULARY_MISMATCH = (
    "The tokenizer is not the model's own, or tokens were added to it without growing the "
    "model's embeddings: load the tokenizer saved with the model, or call "
    "model.resize_token_embeddings(len(tokenizer)) (and train the new rows)."
)
"""What to do when the tokenizer gives ids that the model has no embedding for."""

BOUNDARY_TOKENS = ("cls", "sep", "pad", "bos", "eos")
"""Special tokens that a text can spell out but that are never scored, as minicons leaves
its ``cls``, ``sep`` and ``pad`` ids out of the targets (``bos``/``eos`` are the same ids
in every supported model that has them)."""


class ScoredTokens:
    """The per-token results of many texts, one flat tuple per field: text ``i`` owns
    positions ``bounds[i]:bounds[i + 1]``.

    Built once per run so that :meth:`PLLScorer.assemble` makes one small object per text
    instead of four tuples: on all of BLiMP (134,000 texts) the tuples and a frozen
    dataclass per text took 0.45-0.65 s, on a GPU a twentieth of the whole run
    (bench/README.md).  Token strings are looked up on first use, for all texts at once.
    """

    __slots__ = ("_tokens", "_vocabulary", "bounds", "greedy", "logprobs", "token_ids")

    def __init__(
        self,
        bounds: Sequence[int],
        token_ids: tuple[int, ...],
        logprobs: tuple[float, ...],
        greedy: tuple[bool, ...],
        vocabulary: Sequence[str] | None = None,
        tokens: tuple[str, ...] | None = None,
    ) -> None:
        self.bounds = bounds
        self.token_ids = token_ids
        self.logprobs = logprobs
        self.greedy = greedy
        self._vocabulary, self._tokens = vocabulary, tokens

    @property
    def tokens(self) -> tuple[str, ...]:
        if self._tokens is None:
            assert self._vocabulary is not None
            self._tokens = tuple(map(self._vocabulary.__getitem__, self.token_ids))
        return self._tokens


SCORE_FIELDS = ("text", "tokens", "token_ids", "token_logprobs", "token_greedy")
"""What a :class:`SentenceScore` holds, in the order its constructor takes them."""


class SentenceScore:
    """The PLL of one scored text (or continuation) and its per-token parts.

    ``logprob`` is the natural-log sum over ``tokens``; ``is_greedy`` is True when every
    scored token was the model's argmax at its own masked position.  The per-token parts
    are slices of a run's :class:`ScoredTokens`, made when read; a score compares, hashes,
    pickles and matches (``case SentenceScore(text, tokens, ...)``) by its values, like the
    frozen dataclass it was until 2026-11, and a score pickled then still loads.  It is no
    dataclass now: ``values()`` gives what ``dataclasses.astuple`` did, and ``as_dict()``
    a token log's record, not ``dataclasses.asdict``'s fields.  A score keeps
    its whole run's block alive; to keep a few scores of a large run without it, copy them
    (``SentenceScore(*score.values())``).
    """

    __slots__ = ("__weakref__", "_block", "_index", "_text")
    __match_args__ = SCORE_FIELDS

    def __init__(
        self,
        text: str,
        tokens: Sequence[str],
        token_ids: Sequence[int],
        token_logprobs: Sequence[float],
        token_greedy: Sequence[bool],
    ) -> None:
        block = ScoredTokens(
            (0, len(token_ids)),
            tuple(token_ids),
            tuple(token_logprobs),
            tuple(token_greedy),
            tokens=tuple(tokens),
        )
        if not len(block.tokens) == len(block.logprobs) == len(block.greedy) == len(token_ids):
            raise ValueError("A SentenceScore needs one token, id, logprob and flag per token.")
        self._text, self._block, self._index = text, block, 0

    @classmethod
    def in_block(cls, text: str, block: ScoredTokens, index: int) -> SentenceScore:
        """Text ``index`` of ``block``, without copying anything out of it."""
        score = cls.__new__(cls)
        score._text, score._block, score._index = text, block, index
        return score

    @property
    def text(self) -> str:
        return self._text

    def _span(self) -> slice:
        bounds = self._block.bounds
        return slice(bounds[self._index], bounds[self._index + 1])

    @property
    def tokens(self) -> tuple[str, ...]:
        return self._block.tokens[self._span()]

    @property
    def token_ids(self) -> tuple[int, ...]:
        return self._block.token_ids[self._span()]

    @property
    def token_logprobs(self) -> tuple[float, ...]:
        return self._block.logprobs[self._span()]

    @property
    def token_greedy(self) -> tuple[bool, ...]:
        return self._block.greedy[self._span()]

    # The two answers lm-eval reads of every request slice the block themselves: through
    # the properties above they took 0.14 s for all of BLiMP, and 0.08 s this way.
    @property
    def logprob(self) -> float:
        block, index = self._block, self._index
        return math.fsum(block.logprobs[block.bounds[index] : block.bounds[index + 1]])

    @property
    def is_greedy(self) -> bool:
        block, index = self._block, self._index
        return all(block.greedy[block.bounds[index] : block.bounds[index + 1]])

    def values(self) -> tuple[Any, ...]:
        """The fields in :data:`SCORE_FIELDS` order, which the constructor takes."""
        return (self.text, self.tokens, self.token_ids, self.token_logprobs, self.token_greedy)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SentenceScore):
            return NotImplemented
        return self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __reduce__(self) -> tuple[Any, ...]:
        return (SentenceScore, self.values())

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A score pickled as a frozen dataclass: its fields by name."""
        SentenceScore.__init__(self, *(state[name] for name in SCORE_FIELDS))

    def __repr__(self) -> str:
        fields = zip(SCORE_FIELDS, self.values(), strict=True)
        return f"SentenceScore({', '.join(f'{name}={value!r}' for name, value in fields)})"

    def as_dict(self) -> dict[str, Any]:
        """The score as ``token_log`` writes it (README "Token-level results"): with
        ``logprob`` and ``is_greedy``, without ``token_ids``."""
        return {
            "text": self.text,
            "logprob": self.logprob,
            "is_greedy": self.is_greedy,
            "tokens": list(self.tokens),
            "token_logprobs": list(self.token_logprobs),
            "token_greedy": list(self.token_greedy),
        }


@dataclass(frozen=True)
class Jobs:
    """Distinct requests: the continuation each scores and the tokens of all of them.

    Jobs ``part_bounds[k]:part_bounds[k + 1]`` form part ``k`` of the run
    (:mod:`pll_harness.parts`); without bounds, all jobs are one part."""

    texts: list[str]
    encodings: Encodings
    part_bounds: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def bounds(self) -> tuple[int, ...]:
        return (0, len(self)) if self.part_bounds is None else self.part_bounds

    def part(self, index: int) -> Jobs:
        """The jobs of part ``index``, as jobs of one part."""
        start, stop = self.bounds[index], self.bounds[index + 1]
        if (start, stop) == (0, len(self)):
            return Jobs(self.texts, self.encodings)
        return Jobs(self.texts[start:stop], self.encodings.select(np.arange(start, stop)))


class PLLScorer:
    """Pseudo-log-likelihood scorer for one masked LM and one metric.

    A run has four steps, each over all its requests at once (over all of a part's, when a
    large run on an accelerator is split into parts by content, :mod:`pll_harness.parts`,
    so that later parts are prepared while earlier ones run): the distinct requests are
    tokenized in one tokenizer call, :meth:`planner` plans copies and batches with array
    operations (:mod:`pll_harness.planning`), one group of one length at a time as the
    runner reaches it, the runner scores the batches, and :meth:`assemble` gives each job
    a view into one flat array of per-token results.
    """

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
        """A scorer of a loaded model; :meth:`from_pretrained` loads one by name.

        ``pll_metric`` is one of :data:`pll_harness.PLL_METRICS` (README "What PLL is, and
        which metric to pick"; minicons' ``within_word_l2r`` is ``word_l2r``).  ``device``
        (None: where the model is) is where the batches run; the model is moved there.
        ``max_batch_tokens`` bounds the tokens of one forward pass (by default from the
        memory at hand), and the masked copies of as many texts as fit share a pass:
        ``batch_size`` (lm-eval's ``max_batch_size``) only caps how many texts' copies
        do.  ``max_length`` is the longest input, special tokens included (default: the
        model's); a longer text is scored in windows.  Scores differ with the batching
        only through float rounding.
        """
        _check_given_as(loaded=True, model=model, tokenizer=tokenizer)
        self._metric = get_metric(pll_metric)
        self.metric = self._metric.name
        check_sizes(max_batch_tokens=max_batch_tokens, batch_size=batch_size, max_length=max_length)
        require_fast_tokenizer(tokenizer, pll_metric, self._metric.word_level)
        if tokenizer.mask_token_id is None:
            raise ValueError(
                f"The tokenizer of {type(model).__name__} has no mask token, so it cannot be "
                "scored by pseudo-log-likelihood. pll-mlm needs a masked language model "
                f"(BERT, RoBERTa, DeBERTa, ELECTRA generator, ModernBERT, ...); {FOR_CAUSAL_LMS}"
            )
        self._vocab_size = _vocab_size(model)
        if tokenizer.mask_token_id >= self._vocab_size:
            raise ValueError(
                f"The tokenizer's mask token {tokenizer.mask_token!r} has id "
                f"{tokenizer.mask_token_id}, beyond the model's vocabulary of "
                f"{self._vocab_size} ids. {VOCABULARY_MISMATCH}"
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = _placed(model, device)
        self.specials: SpecialTokens = special_tokens(tokenizer)
        if _attends_causally(model, tokenizer, self.specials, self.device):
            raise ValueError(
                f"This {type(model).__name__} was built as a decoder (config.is_decoder, or "
                "XLM's config.causal): each token sees only the tokens on its left, so a "
                "masked token never sees its right context, which PLL needs. pll-mlm scores "
                f"masked LMs built without it; {FOR_CAUSAL_LMS}"
            )
        self.max_length = _max_length(model, tokenizer, max_length)
        if self.max_length <= self.specials.count:
            raise ValueError(f"max_length={self.max_length} leaves no room for text tokens.")
        self.batching = Batching(
            max_batch_tokens or default_batch_tokens(model, self.device), batch_size
        )
        self.runner = PLLRunner(
            split_masked_lm(model),
            mask_token_id=tokenizer.mask_token_id,
            device=self.device,
            vocab_size=self._vocab_size,
        )
        accelerator = self.device.type != "cpu"
        self.prepare_ahead = accelerator
        """Whether the later parts of a run are prepared in a thread while the earlier ones
        run (see :meth:`_score_parts`): on accelerators, not on a CPU, whose cores would
        only be shared between the two."""
        self.parts_from: int | None = PARTS_FROM if accelerator else None
        """Fewest distinct requests of a run split into parts (:mod:`pll_harness.parts`);
        None: no run is.  Parts pay only where they are prepared ahead: not on a CPU."""
        self._vocabulary: list[str] | None = None
        self._whitespace_inside_words = whitespace_inside_words(tokenizer)
        self._warned: set[str] = set()
        """The one-time warnings already given, shared with :meth:`with_metric`'s scorers."""
        self._literal_specials = np.array(
            sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}), dtype=np.int64
        )
        boundaries = {getattr(tokenizer, f"{name}_token_id", None) for name in BOUNDARY_TOKENS}
        self._boundaries = np.array(
            sorted(boundaries - {None, tokenizer.mask_token_id, tokenizer.unk_token_id}),
            dtype=np.int64,
        )

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

        ``device`` None picks CUDA where there is one; the other arguments are as in
        :class:`PLLScorer`.  ``load_kwargs`` go to
        :func:`pll_harness.loading.load_masked_lm`: tokenizer (a name or folder),
        revision, trust_remote_code, dtype, attn_implementation, device_map and
        add_prefix_space.
        """
        check_known(load_kwargs, _loading_arguments(), "PLLScorer.from_pretrained", ALIASES)
        _check_given_as(loaded=False, pretrained=pretrained, tokenizer=load_kwargs.get("tokenizer"))
        get_metric(pll_metric)  # a bad metric or size stops before a load, not after it
        check_sizes(max_batch_tokens=max_batch_tokens, batch_size=batch_size, max_length=max_length)
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

    def with_metric(self, pll_metric: str) -> PLLScorer:
        """This scorer under another metric: the same model, tokenizer, settings and runner,
        so that a tool scoring every metric loads and prepares the model once, and says each
        one-time warning once rather than once per metric."""
        metric = get_metric(pll_metric)
        require_fast_tokenizer(self.tokenizer, pll_metric, metric.word_level)
        sibling = copy.copy(self)
        sibling._metric, sibling.metric = metric, metric.name
        return sibling

    def _warn_once(self, case: str, message: str, *args: Any) -> None:
        """Log ``message`` the first time ``case`` arises (for this scorer and its
        :meth:`with_metric` siblings)."""
        if case not in self._warned:
            self._warned.add(case)
            logger.warning(message, *args)

    @property
    def capacity(self) -> int:
        """Text tokens that fit in one forward pass beside the special tokens."""
        return self.max_length - self.specials.count

    def score(
        self,
        texts: str | Iterable[str],
        progress: Callable[[int], None] | None = None,
        warn_unscored: bool = True,
    ) -> list[SentenceScore]:
        """PLL of whole texts of any length (windows past the model's maximum length).

        One string is one text, not a sequence of characters.  Leading and trailing
        whitespace is not scored (as for lm-eval's requests, README "Request semantics");
        ``SentenceScore.text`` keeps the text as given.  A text with no token to score
        scores 0.0, the log of probability 1, which a warning points out: in a comparison
        it beats every sentence (see :meth:`score_requests`)."""
        texts = [texts] if isinstance(texts, str) else list(_texts(texts))
        return self.score_requests([("", text) for text in texts], progress, warn_unscored)

    def score_requests(
        self,
        requests: Iterable[tuple[str, str]],
        progress: Callable[[int], None] | None = None,
        warn_unscored: bool = True,
    ) -> list[SentenceScore]:
        """Score each continuation given its context (visible, never masked).

        ``progress(n)`` is called as batches finish, with how many more requests' worth of
        work is done (whole requests, see :class:`FinishedJobs`): a request scored in one
        batch counts when it is finished, a long one as its windows are scored.

        A large run on an accelerator (:meth:`splits`) is scored part by part
        (:mod:`pll_harness.parts`), the later parts tokenized and their planning begun in
        a thread while the device runs the earlier ones.

        A continuation with no token to score scores 0.0 (probability 1), and a warning
        says how many there are: not only empty or blank ones, but also those that hold
        only characters the tokenizer drops (a zero-width space, a byte-order mark, a soft
        hyphen, control characters), which no check of the text itself can tell.  A caller
        that names such texts itself (the tools, by their ids) passes
        ``warn_unscored=False``, so that the user is not told twice.
        """
        requests = requests if isinstance(requests, Sequence) else list(requests)
        keys, pairs, bounds = self._distinct(requests, None)
        weights = np.bincount(keys, minlength=len(pairs))
        parts = (
            (start, self._jobs(pairs[start:stop]))
            for start, stop in itertools.pairwise(bounds)
            if start < stop
        )
        scores = self._score_parts(parts, progress, weights, len(bounds) > 2)
        if warn_unscored:
            self.report_unscored(scores)
        return [scores[key] for key in keys.tolist()]

    def report_unscored(self, scores: Sequence[SentenceScore]) -> None:
        """Warn (once) of distinct continuations that have no token to score."""
        unscored = sum(1 for score in scores if _has_no_tokens(score))
        if unscored:
            self._warn_once(
                "empty",
                "%d of %d distinct texts have no token to score (empty, blank, or only "
                "characters the tokenizer drops, such as a zero-width space or a byte-order "
                "mark): each scores 0.0 (probability 1) and would beat any sentence it is "
                "compared with. Further cases are not reported.",
                unscored,
                len(scores),
            )

    def distinct_jobs(
        self, requests: Iterable[tuple[str, str]], parts: bool | None = None
    ) -> tuple[list[int], Jobs]:
        """Map each request to a distinct job (``keys[i]`` is request i's job) and tokenize
        the jobs in one call; identical requests are tokenized and scored once.  With
        ``parts`` (default: as :meth:`score_requests` would, :meth:`splits`) the jobs come
        part after part (:mod:`pll_harness.parts`)."""
        requests = requests if isinstance(requests, Sequence) else list(requests)
        keys, pairs, bounds = self._distinct(requests, parts)
        jobs = self._jobs(pairs)
        self._report_literal_specials([jobs.encodings])
        return keys.tolist(), Jobs(jobs.texts, jobs.encodings, tuple(bounds.tolist()))

    def splits(self, n_distinct: int) -> bool:
        """Whether a run of ``n_distinct`` distinct requests is scored in parts
        (:attr:`parts_from`).  Distinct ones, so that lm-eval's padding of data-parallel
        shares (copies of a share's last request) does not change the decision."""
        return self.parts_from is not None and n_distinct >= self.parts_from

    @collector_paused()
    def _distinct(
        self, requests: Sequence[tuple[str, str]], parts: bool | None
    ) -> tuple[np.ndarray, list[tuple[str, str]], np.ndarray]:
        """Each request's job, the distinct requests (part after part when ``parts``, or
        when None and :meth:`splits` says so for their number, see
        :func:`pll_harness.parts.in_parts`; else in the order they first come) and where
        each part starts among them, with their count at the end."""
        check_string_pairs(requests, "(context, continuation)")
        index: dict[tuple[str, str], int] = {}
        keys = np.fromiter(
            (index.setdefault(pair, len(index)) for pair in map(tuple, requests)),
            dtype=np.int64,
            count=len(requests),
        )
        pairs = list(index)
        if not (self.splits(len(pairs)) if parts is None else parts):
            return keys, pairs, np.array([0, len(pairs)])
        order, bounds = in_parts(request_parts(pairs))
        job = np.empty_like(order)
        job[order] = np.arange(order.shape[0])
        return job[keys], [pairs[i] for i in order.tolist()], bounds

    @collector_paused()
    def _jobs(self, pairs: Sequence[tuple[str, str]]) -> Jobs:
        """The distinct ``pairs`` as jobs, tokenized in one call."""
        encoded = encode_requests(self.tokenizer, pairs, self._whitespace_inside_words)
        self._refuse_ids_beyond_the_model(encoded)
        encodings = self._literal_specials_in(encoded)
        return Jobs([continuation for _, continuation in pairs], encodings)

    def _refuse_ids_beyond_the_model(self, encodings: Encodings) -> None:
        """A token id past the model's embeddings would stop the run inside the model with
        a bare ``index out of range``, or on a GPU with a device-side assert."""
        ids = encodings.ids
        if ids.shape[0] and int(ids.max()) >= self._vocab_size:
            token_id = int(ids[ids >= self._vocab_size][0])
            token = self.tokenizer.convert_ids_to_tokens(token_id)
            raise ValueError(
                f"The tokenizer gives the token {token!r} id {token_id}, beyond the model's "
                f"vocabulary of {self._vocab_size} ids. {VOCABULARY_MISMATCH}"
            )

    def _literal_specials_in(self, encodings: Encodings) -> Encodings:
        """A special token's text inside a request (``[MASK]``, ``[SEP]``, ``</s>``) becomes
        that token, as in lm-eval's ``hf`` model, minicons and the paper's code.  Sentence
        boundaries and padding (:data:`BOUNDARY_TOKENS`) then stay visible but are not
        scored, as minicons leaves them out (special tokens are never scored); the others,
        ``[MASK]`` above all, are scored like words, as minicons does.  Either way the
        model sees something else than the text, which :meth:`_report_literal_specials`
        says once a run's parts are all tokenized."""
        if not np.isin(encodings.ids, self._literal_specials).any():
            return encodings
        boundary = np.isin(encodings.ids, self._boundaries)
        return encodings.with_scored(encodings.scored & ~boundary)

    def _report_literal_specials(self, parts: Iterable[Encodings]) -> None:
        """Warn once, with their count over all ``parts``, of special tokens written out in
        the text (see :meth:`_literal_specials_in`)."""
        found = [
            encodings.ids[np.isin(encodings.ids, self._literal_specials)] for encodings in parts
        ]
        count = sum(ids.shape[0] for ids in found)
        if not count:
            return
        token = self.tokenizer.convert_ids_to_tokens(
            int(next(ids[0] for ids in found if ids.shape[0]))
        )
        self._warn_once(
            "literal specials",
            "%d tokens of the input are special tokens written out in the text (e.g. %r), "
            "which the tokenizer turns into the special token itself: sentence boundaries "
            "and padding stay visible but are not scored, others (such as the mask token) "
            "are scored like words, and the model sees them as such. Remove them from the "
            "text if that is not what you mean. Further cases are not reported.",
            count,
            token,
        )

    def score_jobs(
        self,
        jobs: Jobs,
        progress: Callable[[int], None] | None = None,
        weights: Sequence[int] | np.ndarray | None = None,
    ) -> list[SentenceScore]:
        """Score jobs in one engine run, part after part; ``progress(n)`` reports the work
        done in whole jobs, job j counting ``weights[j]`` (see :class:`FinishedJobs`)."""
        parts = (
            (start, jobs.part(index))
            for index, (start, stop) in enumerate(itertools.pairwise(jobs.bounds))
            if start < stop
        )
        return self._score_parts(parts, progress, weights, len(jobs.bounds) > 2)

    def _score_parts(
        self,
        parts: Iterable[tuple[int, Jobs]],
        progress: Callable[[int], None] | None,
        weights: Sequence[int] | np.ndarray | None,
        several: bool,
    ) -> list[SentenceScore]:
        """Score each part's jobs (given with the index of its first job) in turn;
        ``several``: there is more than one part, which alone makes preparing ahead pay.

        Groups are planned as the runner reaches them (:class:`WorkPlanner`), so on a GPU
        planning overlaps the batches already queued.  There each part is also launched
        behind the one before without waiting for it (:meth:`PLLRunner.launch`), and, when
        a run has several parts (:attr:`prepare_ahead`), the later parts are prepared
        (tokenized, their planners and progress counts made) in one thread and each part
        is assembled in another once its results are back, while the device runs the
        next: the host's work around the run is then the first part's preparing and the
        last part's assembling."""

        def prepare(start: int, jobs: Jobs) -> tuple[Jobs, WorkPlanner, FinishedJobs | None]:
            planner = self.planner(jobs.encodings)
            if progress is None:
                return jobs, planner, None
            share = None if weights is None else weights[start : start + len(jobs)]
            return jobs, planner, FinishedJobs(jobs.encodings, planner, share)

        prepared = itertools.starmap(prepare, parts)
        ahead = self.prepare_ahead and several
        if ahead:
            prepared = prepared_ahead(prepared)
        runs: queue.SimpleQueue[tuple[Jobs, Work, PendingScores] | None] = queue.SimpleQueue()
        assembled: Generator[list[SentenceScore], None, None] | MadeAhead[list[SentenceScore]]
        assembled = self._assembled(runs)
        in_flight = InFlight(self.runner.device)
        encodings = []
        try:
            if ahead:
                assembled = prepared_ahead(assembled, name="pll-assemble")
            for jobs, planner, finished in prepared:
                on_batch_done = None
                if progress is not None and finished is not None:
                    progress(finished.without_batches)
                    on_batch_done = lambda position, f=finished: progress(f.at(position))  # noqa: E731
                pending = self.runner.launch(
                    self._metric, planner.n_slots, planner, in_flight, on_batch_done
                )
                runs.put((jobs, planner.work(), pending))
                encodings.append(jobs.encodings)
        except BaseException:
            assembled.close()  # no part is assembled after a failure
            raise
        finally:
            runs.put(None)  # the end, or a stop: either way the assembling ends
        in_flight.finish()
        self._report_literal_specials(encodings)
        return [score for part in assembled for score in part]

    def _assembled(
        self, runs: queue.SimpleQueue[tuple[Jobs, Work, PendingScores] | None]
    ) -> Generator[list[SentenceScore], None, None]:
        """Each launched part's scores, assembled once its results are on the host, until
        the None that ends ``runs``."""
        for jobs, work, pending in iter(runs.get, None):
            yield self.assemble(jobs, work, pending.wait())

    def plan_work(self, encodings: Encodings) -> Work:
        """Copies and batches for every scored token of ``encodings``, all planned at once
        (see planning)."""
        return self.planner(encodings).work()

    def planner(self, encodings: Encodings) -> WorkPlanner:
        """The plan of ``encodings``' scoring, its groups planned when reached; a context
        cut to fit is reported here, before any group is planned."""
        planner = WorkPlanner(encodings, self.specials, self.capacity, self._metric, self.batching)
        if planner.truncated:
            self._warn_once(
                "truncation",
                "An input is longer than the model's maximum length (%d tokens): its context "
                "was cut from the left so that the whole continuation is scored. Further "
                "truncations are not reported.",
                self.max_length,
            )
        return planner

    @collector_paused()
    def assemble(
        self, jobs: Jobs, work: Work, results: TargetScores, first_job: int = 0
    ) -> list[SentenceScore]:
        """Per-job scores out of the flat results of ``work``.

        ``jobs`` are the texts ``first_job, first_job + 1, ...`` of the encodings ``work``
        was planned on (a data-parallel rank planned everyone's and assembles its own).
        """
        encodings = jobs.encodings
        slots = work.slot_offsets[first_job : first_job + len(jobs) + 1]
        source = torch.from_numpy(work.slot_source[slots[0] : slots[-1]])
        logprobs, greedy = results.logprobs[source], results.greedy[source]
        if bool(torch.isnan(logprobs).any()):
            raise RuntimeError(
                "Some target log-probabilities are NaN: either the model produced NaN (in "
                "float16, try dtype=float32 or bfloat16) or not every batch was run."
            )
        block = ScoredTokens(
            bounds=(slots - slots[0]).tolist(),
            token_ids=tuple(encodings.ids[encodings.scored].tolist()),
            logprobs=tuple(logprobs.tolist()),
            greedy=tuple(greedy.tolist()),
            vocabulary=self._token_strings(),
        )
        in_block = SentenceScore.in_block
        return [in_block(text, block, index) for index, text in enumerate(jobs.texts)]

    def _token_strings(self) -> list[str]:
        """Every token id's string, looked up once rather than per scored token."""
        if self._vocabulary is None:  # the ids scored are below it (see _refuse_ids_...)
            every_id = list(range(self._vocab_size))
            self._vocabulary = self.tokenizer.convert_ids_to_tokens(every_id)
        return self._vocabulary


class FinishedJobs:
    """How many jobs' worth of work (weighted) each batch finishes, the batches run in
    order, worked out group by group as a :class:`WorkPlanner` plans them.

    Each of a job's targets is its share of the job's weight, counted when the batch that
    scores it (or the target of an identical sequence that answers for it) has run, and
    the counts are whole numbers of the running total, so that a job scored in one batch
    counts once that batch has run, as a finished request, and a long document scored in
    many windows moves the count as its windows run instead of only at its end.  A text's
    windows all have the model's full width (:mod:`pll_harness.windows`), so a job's
    targets lie in one group, which its sequences' lengths name before any group is
    planned: each group's share is counted once that group is, never waiting for the whole
    plan."""

    def __init__(
        self,
        encodings: Encodings,
        planner: WorkPlanner,
        weights: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        n_jobs = len(encodings)
        self._planner = planner
        self._weights = np.ones(n_jobs, dtype=np.int64) if weights is None else np.asarray(weights)
        group_of = np.full(n_jobs, -1, dtype=np.int64)
        np.maximum.at(group_of, planner.sequences.text, planner.sequence_group)
        self._jobs_by_group = np.argsort(group_of, kind="stable")
        self._group_starts = np.searchsorted(
            group_of[self._jobs_by_group], np.arange(len(planner.lengths) + 1)
        )
        self.without_batches = int(self._weights[group_of < 0].sum())
        """The jobs with nothing to score, finished before any batch."""
        self._total = int(self._weights.sum())
        self._slot_batch = np.full(planner.n_slots, -1, dtype=np.int64)
        self._done: list[float] = []
        """The running total of finished work after each batch counted so far."""
        self._groups_counted = 0

    def at(self, position: int) -> int:
        """The whole jobs' worth of work that batch ``position`` adds to the count; its
        group must have been planned."""
        while len(self._done) <= position:
            self._count_group(self._groups_counted)
            self._groups_counted += 1
        before = self._done[position - 1] if position else self.without_batches
        return _whole(self._done[position]) - _whole(before)

    def _count_group(self, index: int) -> None:
        """Count the work of group ``index``'s batches: each target of the jobs scored
        there, at the batch that scores it."""
        planner, base = self._planner, len(self._done)
        group = planner.groups[index]
        batches = [batch for batch in planner.batches[base:] if batch.group == index]
        for offset, batch in enumerate(batches):
            start, stop = group.target_range(batch.first, batch.stop)
            self._slot_batch[group.target_slot[start:stop]] = offset
        jobs = self._jobs_by_group[self._group_starts[index] : self._group_starts[index + 1]]
        offsets = planner.slot_offsets
        sizes = offsets[jobs + 1] - offsets[jobs]
        starts = np.cumsum(sizes) - sizes
        slots = np.repeat(offsets[jobs] - starts, sizes) + np.arange(sizes.sum())
        share = np.repeat(self._weights[jobs] / sizes, sizes)
        work = np.bincount(
            self._slot_batch[planner.slot_source[slots]], weights=share, minlength=len(batches)
        )
        done = np.cumsum(work) + (self._done[-1] if self._done else self.without_batches)
        if index == len(planner.lengths) - 1:
            done[-1] = self._total  # whole at the end, whatever the rounding on the way
        self._done.extend(done.tolist())


def _whole(done: float) -> int:
    """Whole jobs in a running total of float shares: a sum of shares that make whole
    jobs may fall a rounding error short of the whole number."""
    return math.floor(done + 1e-6)


SIZE_ARGUMENTS = ("max_batch_tokens", "batch_size", "max_length")

ALIASES = {"max_batch_size": "batch_size", **TRANSFORMERS_ALIASES}
"""Other tools' names for arguments of :meth:`PLLScorer.from_pretrained`: lm-eval's model
argument and transformers' keywords."""


def _loading_arguments() -> list[str]:
    """Every keyword :meth:`PLLScorer.from_pretrained` takes, its own and the loader's."""
    own = inspect.signature(PLLScorer.from_pretrained).parameters
    loader = inspect.signature(load_masked_lm).parameters
    names = [*own, *(name for name in loader if name not in own)]
    return [name for name in names if name not in ("pretrained", "load_kwargs")]


def _has_no_tokens(score: SentenceScore) -> bool:
    """Whether ``score`` holds no token, read from its block's bounds without slicing."""
    bounds = score._block.bounds
    return bounds[score._index] == bounds[score._index + 1]


def _texts(texts: Iterable[Any]) -> Iterator[str]:
    """``texts``, refusing what is not a string (a missing value of a table column reads
    as the float nan; bytes would be taken for a sequence of numbers)."""
    if isinstance(texts, (bytes, bytearray)):
        raise TypeError("Texts are strings: decode the bytes first (e.g. .decode('utf-8')).")
    if not isinstance(texts, Iterable):
        raise TypeError(
            f"texts is {type(texts).__name__} {texts!r}: give one string, or a list (or any "
            "iterable) of strings."
        )
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"Text {index} is {type(text).__name__} {text!r}, not a string: PLL scores "
                "text. Convert it, or drop it (a missing value of a table column reads as nan)."
            )
        yield text


def _check_given_as(loaded: bool, **given: Any) -> None:
    """``PLLScorer(model, tokenizer)`` takes loaded objects and ``from_pretrained`` (so
    ``score(model=...)``) names or folders.  Either given the other's failed deep inside,
    with a message that misled: a tokenizer's name read as a slow tokenizer, a loaded
    model as a bad path."""
    for name, value in given.items():
        if value is None or isinstance(value, str | os.PathLike) != loaded:
            continue
        if loaded:
            raise TypeError(
                f"PLLScorer() takes a loaded model and tokenizer, but {name} is the name "
                f"{value!r}: load it (AutoModelForMaskedLM / AutoTokenizer.from_pretrained), "
                "or let PLLScorer.from_pretrained(checkpoint, tokenizer=...) load both."
            )
        raise TypeError(
            f"PLLScorer.from_pretrained and score(model=...) load from a hub name or a "
            f"folder, but {name} is a loaded {type(value).__name__}: build the scorer of a "
            "loaded model with PLLScorer(model, tokenizer), and pass that to score(model=...)."
        )


def _max_length(model: torch.nn.Module, tokenizer: Any, asked: int | None) -> int:
    """The longest input, special tokens included: by default what both the tokenizer's
    declared ``model_max_length`` and the model's position table allow.  The declared
    length is the tokenizer's word, not the model's: some checkpoints ship a tokenizer that
    declares less than the model takes, so a longer ``max_length`` is taken, with a
    warning, up to what the position table allows; past that it is an error."""
    default = model_max_length(model, tokenizer)
    if asked is None or asked <= default:
        return asked or default
    ceiling = max_positions(model) or default
    if asked > ceiling:
        raise ValueError(
            f"max_length={asked} exceeds what this model accepts ({ceiling} tokens, "
            f"special tokens included). Use max_length<={ceiling} (--max-length in "
            "pll-harness)."
        )
    logger.warning(
        "max_length=%d is longer than the %d tokens that the tokenizer declares "
        "(model_max_length); the model's position table allows %d, so inputs of up to %d "
        "tokens are scored whole.",
        asked,
        default,
        ceiling,
        asked,
    )
    return asked


def check_sizes(**sizes: Any) -> None:
    """Each size is None (the default) or a positive integer: 0 or -3 would otherwise pass
    unnoticed until it made empty batches or an empty window somewhere deeper."""
    for name, value in sizes.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1
        ):
            raise ValueError(f"{name}={value!r} is not valid; use a positive integer or None.")


CPU_ACTIVATION_BYTES = 15 << 20
"""Activation memory a CPU batch may take, by :func:`activation_bytes_per_token`.  On
bert-base that is 320 tokens: 150 BLiMP sentences ran as fast as at 384 and 512 tokens
(18.5-21.3 s against 18.6-21.1 and 19.3-22.8) with a peak 12 and 25 MB lower, while 256
tokens were about 10% slower (bench/README.md).  Narrower models get proportionally more
tokens, since their batches are bound by per-batch costs rather than by arithmetic: 20,000
BLiMP sentences on the nano model took 5.3-6.2 s at 512 tokens, 2.3-2.7 s at 2048 and
1.4-1.9 s at 65536, for 21 MB more memory."""

CPU_BATCH_TOKENS = (128, 1 << 16)
"""Fewest and most tokens of a CPU batch's budget."""


def activation_bytes_per_token(model: torch.nn.Module) -> int:
    """Rough bytes of one layer's activations per token, from the model's width: the
    hidden states, queries, keys, values and attention output, and the feed-forward block's
    intermediate states before and after the activation.  Attention scores are not counted:
    the default (SDPA) kernels do not hold them whole."""
    config = model.config
    hidden = getattr(config, "hidden_size", 768)
    intermediate = getattr(config, "intermediate_size", 4 * hidden)
    element = next(model.parameters()).element_size()
    return (8 * hidden + 2 * intermediate) * element


def default_batch_tokens(model: torch.nn.Module, device: torch.device) -> int:
    """A token budget per forward pass that keeps activations well inside memory.

    On CUDA the budget grows with free memory.  Elsewhere (CPU, and MPS, measured on the
    CPU only) CPU_ACTIVATION_BYTES of activations: the heap keeps a batch's activations for
    the next batch of the same length (:mod:`pll_harness.allocator`), so they add to the
    run's peak, and on bert-base larger budgets bought no speed.
    """
    per_token = activation_bytes_per_token(model)
    if device.type != "cuda":
        fewest, most = CPU_BATCH_TOKENS
        return int(max(fewest, min(CPU_ACTIVATION_BYTES // per_token, most)))
    free, _ = torch.cuda.mem_get_info(device)
    return int(max(2048, min(free * 0.4 / per_token, 1 << 20)))


@torch.no_grad()
def _attends_causally(
    model: torch.nn.Module, tokenizer: Any, specials: SpecialTokens, device: torch.device
) -> bool:
    """Whether the prediction at a masked position ignores the tokens to its right, asked of
    the model itself: two inputs that differ in their last token only (a model that cannot
    run so short an input, or that gives no masked-LM logits, is refused here, before any
    sentence).  No flag tells:
    BERT's layers read ``is_decoder`` when built, RoFormer, BigBird, RemBERT and
    MegatronBERT at run time, XLM reads ``causal``, and DeBERTa-v2, ALBERT and DistilBERT
    ignore ``is_decoder``.  ``device`` is where the scorer feeds its batches."""
    special_ids = set(tokenizer.all_special_ids)
    plain = (i for i in range(len(tokenizer)) if i not in special_ids)
    first, second = itertools.islice(plain, 2)
    rows = [
        [*specials.prefix, tokenizer.mask_token_id, last, *specials.suffix]
        for last in (first, second)
    ]
    try:
        output = model(input_ids=torch.tensor(rows, device=device))
    except RuntimeError as error:
        raise ValueError(
            f"This {type(model).__name__} fails on a {len(rows[0])}-token input ({error}). "
            "pll-mlm feeds each sentence at its own length, unpadded: a model that needs "
            "inputs of one fixed length (Nystromformer's are padded to "
            "config.segment_means_seq_len) cannot be scored by it."
        ) from error
    logits = _masked_lm_logits(model, output)
    masked = len(specials.prefix)
    return torch.equal(logits[0, masked], logits[1, masked])


def _masked_lm_logits(model: torch.nn.Module, output: Any) -> torch.Tensor:
    """``output``'s logits, which a masked LM gives over its whole vocabulary (or more:
    only a narrower output is refused, so that no head padded past it is).  A model
    loaded without that head (``AutoModel``, a classifier, ``BertForPreTraining``, whose
    output names them otherwise) failed with a bare AttributeError or IndexError;
    ``from_pretrained`` loads the right class itself."""
    logits = getattr(output, "logits", None)
    if logits is None or logits.shape[-1] < _vocab_size(model):
        raise ValueError(
            f"This {type(model).__name__} gives no masked-LM logits over its "
            f"{_vocab_size(model)}-token vocabulary: load the checkpoint with "
            "AutoModelForMaskedLM (AutoModel gives no head, ...ForSequenceClassification "
            "a classifier's), or let PLLScorer.from_pretrained load it."
        )
    return logits


def _vocab_size(model: torch.nn.Module) -> int:
    """The head's output width, which sizes its chunks.  ``config.vocab_size`` rather than
    the output embeddings, which for DeBERTa-v3's head are a hidden-by-hidden layer."""
    return int(model.config.vocab_size)


def _placed(model: torch.nn.Module, device: str | torch.device | None) -> torch.device:
    """Where inputs go, with ``model`` moved there: a loaded model's ``device`` is checked
    as loading checks it (a CUDA device on a machine without CUDA falls back to the CPU
    with a warning) and the model is moved, as loading moves it and as minicons does.
    Unmoved, a CPU model fed CUDA inputs failed with a misleading error.  A model
    dispatched by accelerate (``device_map``) stays where its hooks put it."""
    if device is None:
        return _model_device(model)
    target = resolve_device(device)
    if not hasattr(model, "hf_device_map") and _model_device(model) != target:
        model.to(target)
    return target


def _model_device(model: torch.nn.Module) -> torch.device:
    """Where inputs go: the first parameter that is materialised.  A model dispatched by
    accelerate (``device_map``) keeps offloaded weights on the meta device; its hooks move
    activations between devices themselves."""
    for parameter in model.parameters():
        if parameter.device.type != "meta":
            return parameter.device
    return torch.device("cpu")


def score(
    texts: str | Iterable[str],
    model: str | PLLScorer,
    pll_metric: str | None = None,
    **kwargs: Any,
) -> list[SentenceScore]:
    """PLL of each text with per-token log-probabilities.

    ``model`` is a checkpoint (hub name or local folder; ``pll_metric`` defaults to
    word_l2r and ``kwargs`` go to :meth:`PLLScorer.from_pretrained`) or an existing
    :class:`PLLScorer`, whose metric and settings are fixed: asking it for another metric or
    setting is an error rather than a silently different score.  One string is one text
    (as in minicons), never a sequence of one-character texts (:meth:`PLLScorer.score`).
    Given a checkpoint, each call loads it anew: for more than one call, pass a scorer.
    """
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
