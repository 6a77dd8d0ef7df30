"""The masked LM the tools score with, loaded once with one scorer per metric, and how a
model's name is shown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pll_harness.provenance import loaded_commit, scoring_model
from pll_harness.tools.metrics import parse_metrics
from pll_harness.tools.words import word_ids


class MLMScorers:
    """One masked LM, loaded once, with one :class:`~pll_harness.scorer.PLLScorer` per
    metric (:meth:`~pll_harness.scorer.PLLScorer.with_metric`: they share the model, its
    preparation and the one-time warnings)."""

    def __init__(
        self,
        model: str,
        metrics: Sequence[str],
        device: str | None = None,
        dtype: str | None = "auto",
        max_batch_tokens: int | None = None,
        max_length: int | None = None,
        tokenizer: str | None = None,
        trust_remote_code: bool = False,
        add_prefix_space: bool | None = None,
    ) -> None:
        from pll_harness.loading import load_masked_lm
        from pll_harness.scorer import PLLScorer

        self.metrics = parse_metrics(metrics)
        self.name = model
        loaded = load_masked_lm(
            model,
            tokenizer=tokenizer,
            dtype=dtype,
            device=device,
            trust_remote_code=trust_remote_code,
            add_prefix_space=add_prefix_space,
        )
        self.label = scoring_model(model, dtype, max_length, add_prefix_space, loaded_commit(model))
        """What records of these scores say in their ``model`` field: taken once the model
        has loaded, which is when a hub model's commit is known."""
        self.tokenizer = loaded.tokenizer
        self.device = loaded.device
        first = PLLScorer(
            loaded.model,
            loaded.tokenizer,
            pll_metric=self.metrics[0],
            device=loaded.device,
            max_batch_tokens=max_batch_tokens,
            max_length=max_length,
        )
        self.scorers = {metric: first.with_metric(metric) for metric in self.metrics}

    def score(
        self,
        texts: Sequence[str],
        progress: Callable[[int], None] | None = None,
        warn_unscored: bool = True,
    ) -> dict[str, list[Any]]:
        """``{metric: [SentenceScore per text]}``.  ``warn_unscored=False`` leaves the texts
        with no token to score to a caller that names them itself (by their ids)."""
        return {m: s.score(texts, progress, warn_unscored) for m, s in self.scorers.items()}

    def score_requests(
        self, requests: Sequence[tuple[str, str]], progress: Callable[[int], None] | None = None
    ) -> dict[str, list[Any]]:
        return {m: s.score_requests(requests, progress) for m, s in self.scorers.items()}

    def word_ids(self, text: str) -> list[int]:
        """The word index of each scored token of ``text`` (as PLL sees the words); every
        metric scores the same tokens."""
        return word_ids(next(iter(self.scorers.values())), text)


def short_model_name(name: str) -> str:
    """A local folder shows as its last component; a hub name stays as it is."""
    if name.startswith(("/", ".", "~")) or Path(name).is_dir():
        return Path(name.rstrip("/")).name or name
    return name
