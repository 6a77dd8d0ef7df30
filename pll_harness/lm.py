"""The lm-eval adapter: ``--model pll-mlm``.

Requests in, ``(logprob, is_greedy)`` out; everything else lives in :mod:`pll_harness.scorer`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (registers lm-eval's own models before ours, see get_model)
import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from pll_harness.distributed import (
    ProcessGroup,
    common_batching,
    launched_with_several_processes,
    score_shared,
)
from pll_harness.loading import load_masked_lm
from pll_harness.metrics import DEFAULT_METRIC, check_metric
from pll_harness.provenance import model_info
from pll_harness.scorer import PLLScorer, SentenceScore

# A child of lm-eval's logger, so that our messages share its handler and --verbosity.
logger = logging.getLogger(f"lm_eval.{__name__}")

TOKEN_LOG_MODES = ("new", "overwrite", "append")
"""What ``token_log_mode`` does with an existing token log: refuse it, empty it, add to it."""

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise ValueError(f"{name}={value!r} is not a boolean; use True or False.")


def _as_optional_int(name: str, value: Any, allow_auto: bool = False) -> int | None:
    if value is None or (allow_auto and str(value).startswith("auto")):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        valid = "a positive integer" + (" or 'auto'" if allow_auto else "")
        raise ValueError(f"{name}={value!r} is not valid; use {valid}.") from None
    if number < 1:
        raise ValueError(f"{name} must be at least 1, got {number}.")
    return number


@register_model("pll-mlm")
class PLLMaskedLM(LM):
    """Pseudo-log-likelihood scoring of a masked LM (Salazar et al. 2020; Kauf & Ivanova 2023).

    Model args: ``pretrained`` (hub name, local folder or a loaded model), ``tokenizer``,
    ``revision``, ``trust_remote_code``, ``pll_metric`` (a name of
    :data:`pll_harness.metrics.PLL_METRICS`), ``device``, ``dtype`` (auto, float32,
    bfloat16, float16),
    ``max_batch_tokens`` (tokens per forward pass), ``max_batch_size`` (at most this
    many sentences per forward pass; default: as many as fit in ``max_batch_tokens``),
    ``batch_size`` (accepted because lm-eval always passes one; it does not limit anything:
    see ``create_from_arg_obj``), ``max_length``, ``attn_implementation``, ``parallelize``,
    ``token_log`` (a JSONL file that receives every request's per-token scores) and
    ``token_log_mode`` (``new``: refuse an existing file; ``overwrite``; ``append``).
    """

    def __init__(
        self,
        pretrained: Any = "bert-base-cased",
        tokenizer: Any = None,
        revision: str | None = None,
        trust_remote_code: bool | str = False,
        pll_metric: str = DEFAULT_METRIC,
        device: str | None = None,
        dtype: str | None = "auto",
        batch_size: int | str | None = None,
        max_batch_size: int | str | None = None,
        max_batch_tokens: int | str | None = None,
        max_length: int | str | None = None,
        attn_implementation: str | None = None,
        parallelize: bool | str = False,
        token_log: str | None = None,
        token_log_mode: str = "new",
    ) -> None:
        super().__init__()
        check_metric(pll_metric)
        requests_per_batch = _as_optional_int("batch_size", batch_size, allow_auto=True)
        cap = _as_optional_int("max_batch_size", max_batch_size)
        if requests_per_batch is not None and requests_per_batch > 1 and cap is None:
            logger.info(
                "batch_size=%d does not limit pll-mlm: it packs the masked copies of as many "
                "sentences as fit in max_batch_tokens. To cap sentences per forward pass, "
                "pass max_batch_size=%d.",
                requests_per_batch,
                requests_per_batch,
            )
        parallelize = _as_bool("parallelize", parallelize)
        self._group = None
        if launched_with_several_processes() and not parallelize:
            self._group = ProcessGroup()
            self._rank, self._world_size = self._group.rank, self._group.world_size
            if device is not None and str(device) != str(self._group.device):
                logger.info(
                    "Process %d uses %s (one device per process).", self.rank, self._group.device
                )
            device = str(self._group.device)
        self.token_log = self._prepare_token_log(token_log, token_log_mode)
        if isinstance(pretrained, str):
            loaded = load_masked_lm(
                pretrained,
                tokenizer=tokenizer,
                revision=revision,
                trust_remote_code=_as_bool("trust_remote_code", trust_remote_code),
                dtype=dtype,
                attn_implementation=attn_implementation,
                device=device,
                device_map="auto" if parallelize else None,
            )
            model, tok, device = loaded.model, loaded.tokenizer, loaded.device
        else:
            if tokenizer is None or isinstance(tokenizer, str):
                raise ValueError("Pass the tokenizer object along with a loaded model.")
            model, tok = pretrained, tokenizer
        self.scorer = PLLScorer(
            model,
            tok,
            pll_metric=pll_metric,
            device=device,
            max_batch_tokens=_as_optional_int("max_batch_tokens", max_batch_tokens),
            batch_size=cap,
            max_length=_as_optional_int("max_length", max_length),
        )
        if self._group is not None:
            self.scorer.batching = common_batching(self.scorer.batching, self._group)
        self._device = self.scorer.device
        self._checkpoint = pretrained if isinstance(pretrained, str) else None
        self._revision = revision

    @classmethod
    def create_from_arg_obj(
        cls, arg_dict: dict[str, Any], additional_config: dict[str, Any] | None = None
    ) -> PLLMaskedLM:
        """lm-eval's way in: ``arg_dict`` is ``--model_args``; ``additional_config`` holds
        lm-eval's own ``--batch_size``, ``--max_batch_size`` and ``--device``, which its CLI
        sends even when they are not given (``batch_size=1``, ``device=cuda:0``).

        lm-eval's default merge stops with "got multiple values for keyword argument" when
        a key is in both; here the value in ``--model_args`` wins.  A CUDA device from the
        flags on a machine without CUDA means the CPU, said at info level only: it is
        lm-eval's default, not the user's request, whenever ``--device`` was left out.
        """
        args = dict(arg_dict)
        for key, value in (additional_config or {}).items():
            if value is None:
                continue
            if key in args:
                if str(args[key]) != str(value):
                    logger.info(
                        "Using %s=%s from --model_args (lm-eval's --%s gives %s).",
                        key,
                        args[key],
                        key,
                        value,
                    )
                continue
            if key == "device" and str(value).startswith("cuda") and not torch.cuda.is_available():
                logger.info(
                    "device=%s (lm-eval's default): CUDA is not available, using the CPU.", value
                )
                continue
            args[key] = value
        return cls(**args)

    @classmethod
    def create_from_arg_string(
        cls, arg_string: str, additional_config: dict[str, Any] | None = None
    ) -> PLLMaskedLM:
        """``key=value,...`` model args, merged with lm-eval's flags as in
        :meth:`create_from_arg_obj`."""
        from lm_eval.utils import simple_parse_args_string

        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    def _prepare_token_log(self, token_log: str | None, mode: str) -> Path | None:
        """This process's token log (``name.rankN.jsonl`` when several processes run), after
        applying ``mode`` to an existing file: ``new`` refuses it, so that a second run
        never mixes its records into the first run's; ``overwrite`` empties it;
        ``append`` keeps it.  Within a run, every request type's records are appended."""
        if mode not in TOKEN_LOG_MODES:
            raise ValueError(
                f"token_log_mode={mode!r} is not valid; use one of {', '.join(TOKEN_LOG_MODES)}."
            )
        if not token_log:
            return None
        path = Path(token_log)
        if self.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{self.rank}{path.suffix}")
        if mode == "new" and path.exists() and path.stat().st_size > 0:
            raise ValueError(
                f"token_log={path} already holds records. Pass token_log_mode=overwrite to "
                "replace them or token_log_mode=append to add to them, or choose a new file."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode == "overwrite":
            path.write_text("", encoding="utf-8")
        return path

    def all_gather(self, tensor: Any) -> Any:
        return tensor if self._group is None else self._group.all_gather(tensor)

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        return [obj] if self._group is None else self._group.gather_object(obj, dst)

    def barrier(self) -> None:
        if self._group is not None:
            self._group.barrier()

    def get_model_info(self) -> dict[str, Any]:
        """lm-eval adds this to the results file's ``config``: how the numbers were scored
        (metric, checkpoint and its commit where known, dtype, package version; see
        :func:`pll_harness.provenance.model_info`)."""
        return model_info(
            self.scorer.model,
            self.scorer.metric,
            self.scorer.max_length,
            checkpoint=self._checkpoint,
            revision=self._revision,
        )

    @property
    def tokenizer_name(self) -> str:
        return self.scorer.tokenizer.name_or_path.replace("/", "__")

    def loglikelihood(
        self, requests: list[Any], disable_tqdm: bool = False
    ) -> list[tuple[float, bool]]:
        pairs = [tuple(request.args) for request in requests]
        scores = self._score(pairs, "Running loglikelihood requests", disable_tqdm)
        return [(score.logprob, score.is_greedy) for score in scores]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        pairs = [("", request.args[0]) for request in requests]
        scores = self._score(pairs, "Running loglikelihood_rolling requests", disable_tqdm)
        return [score.logprob for score in scores]

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        tasks = sorted({str(getattr(r, "task_name", None) or "?") for r in requests})
        raise NotImplementedError(
            f"pll-mlm scores text with a masked language model and cannot generate text, "
            f"but task(s) {', '.join(tasks)} ask for generate_until. Use loglikelihood or "
            "multiple-choice tasks (e.g. blimp_pll), or a generative model (`--model hf`)."
        )

    def _score(
        self, pairs: list[tuple[str, str]], description: str, disable_tqdm: bool
    ) -> list[SentenceScore]:
        if self._group is None:
            with tqdm(total=len(pairs), desc=description, disable=disable_tqdm) as bar:
                scores = self.scorer.score_requests(pairs, progress=bar.update)
        else:
            scores = score_shared(self.scorer, pairs, self._group, description, disable_tqdm)
        if self.token_log is not None:
            self._write_token_log(pairs, scores)
        return scores

    def _write_token_log(self, pairs: list[tuple[str, str]], scores: list[SentenceScore]) -> None:
        assert self.token_log is not None
        with self.token_log.open("a", encoding="utf-8") as out:
            for (context, continuation), score in zip(pairs, scores, strict=True):
                record = {"context": context, "continuation": continuation, **score.as_dict()}
                record["pll_metric"] = self.scorer.metric
                out.write(json.dumps(record) + "\n")
