"""The lm-eval adapter: ``--model pll-mlm``.

Requests in, ``(logprob, is_greedy)`` out; everything else lives in :mod:`pll_harness.scorer`.
"""

from __future__ import annotations

import inspect
import logging
from functools import cached_property, partial
from pathlib import Path, PurePath
from typing import Any

import lm_eval.models  # noqa: F401  (registers lm-eval's own models before ours, see get_model)
import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from pll_harness.arguments import TRANSFORMERS_ALIASES, check_known
from pll_harness.distributed import (
    ProcessGroup,
    checked,
    common_batching,
    failing_together,
    launched_with_several_processes,
    score_shared,
)
from pll_harness.file_lock import alone_or_shared, share
from pll_harness.loading import load_masked_lm
from pll_harness.metrics import DEFAULT_METRIC, check_metric
from pll_harness.provenance import folder_fingerprint, loaded_commit, model_info, scoring_model
from pll_harness.scorer import PLLScorer, SentenceScore
from pll_harness.tasks.minimal_pairs import VerbatimRow
from pll_harness.token_log import TokenLog, check_mode

# A child of lm-eval's logger, so that our messages share its handler and --verbosity.
logger = logging.getLogger(f"lm_eval.{__name__}")

CACHE_USERS_SUFFIX = ".pll-users"
"""The file beside an lm-eval ``--use_cache`` database whose lock tells the runs that use
the database of each other (see ``PLLMaskedLM._claim_cache``)."""

CACHE_SETTINGS_KEY = "pll_harness:scoring_settings"
"""The entry of an lm-eval ``--use_cache`` database that records the settings its answers
were scored with.  lm-eval keys cached answers by request alone, so without it a run with
another metric, dtype or checkpoint would be answered with these numbers (and its results
file would name its own settings).  A request's key is a SHA-256 hex digest: no clash."""

NO_CHAT_TEMPLATE = (
    "pll-mlm scores text with a masked language model, which has no chat template; a chat "
    "template (--apply_chat_template, --fewshot_as_multiturn) would also put text around the "
    "sentences that PLL tasks score as written. Run without it."
)

PARALLELIZE_IN_SEVERAL_PROCESSES = (
    "parallelize=True spreads one model over all the GPUs of one process, but this run has "
    "several processes (accelerate launch, torchrun): each would spread its own copy over "
    "the same GPUs and score every request. Run one process with parallelize=True, or drop "
    "it to score in parallel, one model per process (README: 'Many processes, GPUs and nodes')."
)

CACHE_CHUNK_BATCHES = 64
"""Forward passes' worth of requests scored, and handed to lm-eval's cache, at a time under
``--use_cache`` (see ``PLLMaskedLM._cache_chunks``): about half a minute of bert-base on two
CPU cores; on a GPU, whose batches are large, all of BLiMP is one chunk."""

LM_EVAL_DEFAULT_DEVICE = "cuda:0"
"""What lm-eval's command line sends as ``--device`` when the flag is left out."""

_QUANTIZED = "quantized checkpoints are not supported: load the model in Python and pass it"
_CHAT = "a chat and generation option: a masked LM neither chats nor generates"
_SPREAD = "parallelize=True loads with device_map='auto' and transformers' default limits"
HF_MODEL_ARGUMENTS = {
    "device_map": "use parallelize=True, which loads with device_map='auto'",
    "token": "the Hub token comes from HF_TOKEN or `hf auth login`",
    "subfolder": "pass the subfolder's local path as pretrained (hf download a hub model)",
    "peft": "merge the adapter and save the model, or from Python pass the merged model",
    "delta": "add the delta and save the model, or from Python pass the model it makes",
    "backend": "pll-mlm always loads AutoModelForMaskedLM; causal models: --model hf",
    "truncation": "pll-mlm never truncates: a longer text is scored in windows of max_length",
    "logits_cache": "nothing to cache: every token is scored on a masked copy of its own",
    "use_fast_tokenizer": "pll-mlm loads the fast tokenizer, the slow one only where none exists",
    "add_bos_token": "pll-mlm adds the tokenizer's own special tokens and scores none of them",
    "prefix_token_id": "an empty context is empty here: no token is put before the text",
    "softmax_dtype": "log-softmax always runs in float32",
    "mixed_precision_dtype": "load the weights in bfloat16 or float16 with dtype=",
    "max_memory_per_gpu": _SPREAD,
    "max_cpu_memory": _SPREAD,
    "offload_folder": _SPREAD,
    "tp_plan": "tensor parallelism is not supported; parallelize=True spreads a large model",
    "autogptq": _QUANTIZED,
    "gptqmodel": _QUANTIZED,
    "gguf_file": _QUANTIZED,
    "think_end_token": _CHAT,
    "enable_thinking": _CHAT,
    "chat_template_args": _CHAT,
}
"""lm-eval's ``hf`` model arguments that pll-mlm does not take, with what to do instead:
a command line carried over from ``--model hf`` is refused with these rather than with the
closest spelling among pll-mlm's own, which would mislead (``device_map`` is not
``device``)."""

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise ValueError(f"{name}={value!r} is not a boolean; use True or False.")


def _checked_pretrained(pretrained: Any) -> Any:
    """A hub name or folder as a string, or a loaded model.  lm-eval turns model_args values
    into numbers and None before they reach a model, so a folder named ``1000`` arrives as
    the number 1000, which would be taken for a loaded model."""
    if isinstance(pretrained, PurePath):
        return str(pretrained)
    if isinstance(pretrained, str | torch.nn.Module):
        return pretrained
    raise ValueError(
        f"pretrained={pretrained!r} names no model: give a hub name or a local folder (lm-eval "
        "reads pretrained=1000 as the number 1000 and pretrained=None as None: write a "
        "folder named so as ./1000), or, from Python, a loaded model and its tokenizer."
    )


def _as_optional_int(name: str, value: Any, allow_auto: bool = False) -> int | None:
    """A positive integer, None, or (with ``allow_auto``) None for lm-eval's ``auto`` and
    ``auto:N``; anything else, a fraction included, is an error rather than rounded."""
    if value is None or (allow_auto and _is_auto(str(value))):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        number = int(str(value))
    except ValueError:
        valid = "a positive integer" + (" or 'auto' / 'auto:N'" if allow_auto else "")
        raise ValueError(f"{name}={value!r} is not valid; use {valid}.") from None
    if number < 1:
        raise ValueError(f"{name} must be at least 1, got {number}.")
    return number


def _check_model_args(args: dict[str, Any]) -> None:
    """Unknown ``--model_args`` keys, a typo above all, stop with the known ones."""
    known = [name for name in inspect.signature(PLLMaskedLM.__init__).parameters if name != "self"]
    check_known(
        args,
        known,
        "pll-mlm (--model_args; README: 'Model arguments')",
        TRANSFORMERS_ALIASES,
        HF_MODEL_ARGUMENTS,
    )


def _refuse_loading_arguments(**given: Any) -> None:
    """With a loaded model and tokenizer, refuse the arguments that apply only as pll-mlm
    loads them (``given``: None or False when left out or at its default, ``main`` and
    ``auto`` included).  Ignored, ``dtype=bfloat16`` would leave a float32 model scoring in
    float32 while the user believes otherwise."""
    named = [f"{name}={value!r}" for name, value in given.items() if value not in (None, False)]
    if named:
        raise ValueError(
            f"pll-mlm applies {', '.join(named)} only as it loads the model and tokenizer "
            "from a name or folder; with loaded ones, pass such settings to their "
            "from_pretrained (dtype, revision, trust_remote_code, attn_implementation, "
            "device_map; the tokenizer's add_prefix_space) and leave them out here."
        )


def _refuse_context_on_verbatim_tasks(requests: list[Any], group: ProcessGroup | None) -> None:
    """The packaged tasks (and any made from their templates) score sentences as written;
    a context in front of them comes from lm-eval's ``--system_instruction`` or from the
    task's own YAML (a ``description``, a ``doc_to_text``) and would change what is
    measured.  With several processes all of them decide together, so that none waits for
    the others in scoring while they stop."""
    prompted = {
        request.task_name: request.args[0]
        for request in requests
        if isinstance(request.doc, VerbatimRow) and request.args[0]
    }
    if group is not None:
        prompted = {k: v for part in group.all_gather_object(prompted) for k, v in part.items()}
    if prompted:
        context = next(iter(prompted.values()))
        raise ValueError(
            f"Task(s) {', '.join(sorted(prompted))} score each sentence as written, but their "
            f"requests put {context!r} in front of it, which changes what is measured. It "
            "comes from --system_instruction, or from the task's YAML (description, "
            "doc_to_text): drop it. A task that scores a sentence after a prompt cannot "
            "include the pair templates (minimal_pair.yaml, pair_preference.yaml); write it "
            "as an ordinary lm-eval task."
        )


def _answer(kind: str, score: SentenceScore) -> tuple[float, bool] | float:
    """What lm-eval receives for one request of ``kind``."""
    return (score.logprob, score.is_greedy) if kind == "loglikelihood" else score.logprob


def _is_auto(text: str) -> bool:
    """lm-eval's ``auto`` or ``auto:N`` (N: how often its HF model re-measures)."""
    if text == "auto":
        return True
    head, _, tail = text.partition(":")
    try:
        return head == "auto" and float(tail) > 0
    except ValueError:
        return False


@register_model("pll-mlm")
class PLLMaskedLM(LM):
    """Pseudo-log-likelihood scoring of a masked LM (Salazar et al. 2020; Kauf & Ivanova 2023).

    Its model arguments are this ``__init__``'s parameters; README.md's table "Model
    arguments" says what each does, and tests/test_lm.py checks that table against them.
    """

    def __init__(
        self,
        pretrained: Any = "bert-base-cased",
        tokenizer: Any = None,
        revision: str | None = None,
        trust_remote_code: bool | str = False,
        add_prefix_space: bool | str | None = None,
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
        pretrained = _checked_pretrained(pretrained)
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
        if add_prefix_space is not None:
            add_prefix_space = _as_bool("add_prefix_space", add_prefix_space)
        self._group = None
        if launched_with_several_processes() and parallelize:
            raise ValueError(PARALLELIZE_IN_SEVERAL_PROCESSES)
        if launched_with_several_processes():
            self._group = ProcessGroup()
            self._rank, self._world_size = self._group.rank, self._group.world_size
            if device is not None and str(device) != str(self._group.device):
                logger.info(
                    "Process %d uses %s (one device per process).", self.rank, self._group.device
                )
            device = str(self._group.device)
        # A process that fails here (its own token log, its device) tells the others,
        # which would otherwise wait for it in common_batching.
        with failing_together(self._group):
            self.token_log = self._open_token_log(token_log, token_log_mode)
            try:
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
                        add_prefix_space=add_prefix_space,
                    )
                    model, tok, device = loaded.model, loaded.tokenizer, loaded.device
                else:
                    if tokenizer is None or isinstance(tokenizer, str):
                        raise ValueError("Pass the tokenizer object along with a loaded model.")
                    _refuse_loading_arguments(
                        revision=None if revision in ("", "main") else revision,
                        trust_remote_code=_as_bool("trust_remote_code", trust_remote_code),
                        dtype=None if dtype == "auto" else dtype,
                        attn_implementation=attn_implementation,
                        parallelize=parallelize,
                        add_prefix_space=add_prefix_space,
                    )
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
                if self._group is not None:  # where another process's failure arrives
                    self.scorer.batching = common_batching(self.scorer.batching, self._group)
            except BaseException:
                if self.token_log is not None:  # a run that fails as it starts leaves no log
                    self.token_log.discard()
                raise
        self._device = self.scorer.device
        self._checkpoint = pretrained if isinstance(pretrained, str) else None
        self._revision = revision
        self._model_info = model_info(
            self.scorer.model,
            self.scorer.metric,
            self.scorer.max_length,
            checkpoint=self._checkpoint,
            revision=self._revision,
            device=self.device,
            add_prefix_space=add_prefix_space,
            tokenizer=self.scorer.tokenizer.name_or_path,
        )
        self._model_label = (
            None
            if self.token_log is None
            else scoring_model(
                self._checkpoint
                or self._model_info["model_checkpoint"]
                or self._model_info["model_architecture"],
                dtype if self._checkpoint else None,
                self.scorer.max_length if max_length is not None else None,
                add_prefix_space,
                loaded_commit(self._checkpoint, self._revision) if self._checkpoint else None,
            )
        )
        """The token log's ``model`` field: the label the tools' records carry, a hub
        model's commit (at ``revision``) included (a model built in memory, which has no
        name, by its class).  Taken as the model loads, and
        only for a run with a token log: it reads the model folder's files again."""

    @classmethod
    def create_from_arg_obj(
        cls, arg_dict: dict[str, Any], additional_config: dict[str, Any] | None = None
    ) -> PLLMaskedLM:
        """lm-eval's way in: ``arg_dict`` is ``--model_args``; ``additional_config`` holds
        lm-eval's own ``--batch_size``, ``--max_batch_size`` and ``--device``, which its CLI
        sends even when they are not given (``batch_size=1``, ``device=cuda:0``).

        lm-eval's default merge stops with "got multiple values for keyword argument" when
        a key is in both; here the value in ``--model_args`` wins.  A CUDA device from the
        flags on a machine without CUDA means the CPU: said at info level for ``cuda:0``,
        which is what lm-eval sends whenever ``--device`` was left out, with a warning for
        any other.  An unknown key stops with the known ones rather than a bare TypeError.
        """
        _check_model_args(arg_dict)
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
                log = logger.info if str(value) == LM_EVAL_DEFAULT_DEVICE else logger.warning
                log(
                    "--device %s: CUDA is not available, using the CPU (lm-eval sends --device "
                    "%s when the flag is left out).",
                    value,
                    LM_EVAL_DEFAULT_DEVICE,
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

    def set_cache_hook(self, cache_hook: Any) -> None:
        """lm-eval's ``--use_cache`` hands its database over here, before any request.

        Its answers are keyed by request alone, so the database records the settings that
        scored them (:data:`CACHE_SETTINGS_KEY`) and a run with other settings, or a
        database that another model filled, is refused rather than answered with foreign
        numbers.  The record is written now, before lm-eval looks any request up.  A
        database without answers (new, or left by a run that stopped before it answered
        anything) takes this run's settings, unless a run that is still going uses it
        (:meth:`_claim_cache`).  A token log cannot be complete when cached requests skip
        the model, so the two are refused together too."""
        super().set_cache_hook(cache_hook)
        database = getattr(cache_hook, "dbdict", None)
        if database is None:
            return
        # Each process has a database of its own: one refused must not leave the others to
        # find it gone in lm-eval's next collective, as the backend's error.
        with failing_together(self._group):
            if self.token_log is not None:
                self.token_log.discard()
                raise ValueError(
                    f"token_log={self.token_log.path} records every request's tokens, but "
                    "with --use_cache the requests answered from the cache never reach the "
                    "model, so the log would miss them. Drop --use_cache or token_log."
                )
            self._claim_cache(database)
        if self._group is not None:  # where another process's refusal arrives
            checked(self._group.all_gather_object(None))

    def _claim_cache(self, database: Any) -> None:
        """Record this run's settings in ``database`` or refuse it.  Every run holds a lock
        on a file beside it (:data:`CACHE_USERS_SUFFIX`) for as long as it lives, shared
        with the runs of the same settings: a run that finds the lock free is the only
        user, and may give a database without answers its own settings; one that finds it
        held must match the record of the runs that hold it, which they wrote while they
        held it alone.  So two runs with other settings never use one database at once,
        whichever order they start, look requests up and answer in."""
        where = getattr(database, "filename", None)
        users = open(f"{where}{CACHE_USERS_SUFFIX}", "ab") if where else None  # noqa: SIM115
        alone = users is None or alone_or_shared(users)
        theirs = database.get(CACHE_SETTINGS_KEY)
        answered = len(database) > (theirs is not None)
        try:
            if alone and not answered:
                database[CACHE_SETTINGS_KEY] = self._scoring_settings
            elif answered:
                self._refuse_other_settings(database, theirs, "holds answers scored with")
            else:
                self._refuse_other_settings(database, theirs, "is in use by a run with")
        except BaseException:
            if users is not None:
                users.close()
            raise
        if users is not None:
            share(users)
        self._cache_users = users  # held open, and locked, to the end of the run

    def _refuse_other_settings(self, database: Any, theirs: Any, found: str) -> None:
        """Refuse a database whose record (``theirs``; None: answers without one) names
        settings other than this run's."""
        ours = self._scoring_settings
        if theirs == ours:
            return
        if theirs is None:
            found = "holds answers without a record of their settings (another model's?)"
        else:
            changed = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
            found += " " + ", ".join(
                f"{key}={theirs.get(key)} (this run: {ours.get(key)})" for key in changed
            )
        where = getattr(database, "filename", "the --use_cache database")
        raise ValueError(
            f"{where} {found}; lm-eval would answer this run's requests with its answers. "
            "Give each model and pll_metric/dtype its own --use_cache path."
        )

    @cached_property
    def _scoring_settings(self) -> dict[str, Any]:
        """What a cached answer depends on beyond its request (batch sizes change float
        rounding only).  A local folder's files count by content (:func:`folder_fingerprint`),
        its path alone being the same for a model saved again into it; no revision means
        ``main``, the only one a folder takes and a hub model's default.  Taken once, for the
        model as loaded, so that the files are read once."""
        info = self.get_model_info()
        folder = getattr(self.scorer.model, "name_or_path", None)
        tokenizer = self.scorer.tokenizer.name_or_path
        model_files = info["model_files"]
        return {
            "model_checkpoint": info["model_checkpoint"],
            "model_revision": info["model_revision"] or "main",
            "model_sha": info["model_sha"],
            "model_files": model_files,
            "tokenizer": info["model_tokenizer"],
            "tokenizer_files": model_files
            if tokenizer == folder
            else folder_fingerprint(tokenizer),
            "model_dtype": info["model_dtype"],
            "pll_add_prefix_space": info["pll_add_prefix_space"],
            "pll_metric": info["pll_metric"],
            "pll_max_length": info["pll_max_length"],
        }

    def chat_template(self, chat_template: bool | str = False) -> str:
        """lm-eval asks for the template when ``--apply_chat_template`` is given: refused
        there, before any request is built."""
        if chat_template:
            raise ValueError(NO_CHAT_TEMPLATE)
        return ""

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        raise ValueError(NO_CHAT_TEMPLATE)

    def _open_token_log(self, token_log: str | None, mode: str) -> TokenLog | None:
        """This process's token log (``name.rankN.jsonl`` when several processes run)."""
        check_mode(mode)
        if not token_log:
            return None
        path = Path(token_log)
        if self.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{self.rank}{path.suffix}")
        return TokenLog(path, mode)

    def all_gather(self, tensor: Any) -> Any:
        return tensor if self._group is None else self._group.all_gather(tensor)

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        return [obj] if self._group is None else self._group.gather_object(obj, dst)

    def barrier(self) -> None:
        if self._group is not None:
            self._group.barrier()

    def get_model_info(self) -> dict[str, Any]:
        """lm-eval adds this to the results file's ``config``: how the numbers were scored
        (metric, device, checkpoint and its commit where known, dtype, package version; see
        :func:`pll_harness.provenance.model_info`).  Taken as the model loads: the files
        hashed into ``model_files`` are those it loaded, even if the folder is saved again
        while the run scores, and they are read once a run."""
        return dict(self._model_info)

    @property
    def tokenizer_name(self) -> str:
        return self.scorer.tokenizer.name_or_path.replace("/", "__")

    def loglikelihood(
        self, requests: list[Any], disable_tqdm: bool = False
    ) -> list[tuple[float, bool]]:
        _refuse_context_on_verbatim_tasks(requests, self._scoring_group())
        pairs = [tuple(request.args) for request in requests]
        scores = self._score(requests, pairs, "loglikelihood", disable_tqdm)
        return [_answer("loglikelihood", score) for score in scores]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        pairs = [("", request.args[0]) for request in requests]
        scores = self._score(requests, pairs, "loglikelihood_rolling", disable_tqdm)
        return [_answer("loglikelihood_rolling", score) for score in scores]

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        tasks = sorted({str(getattr(r, "task_name", None) or "?") for r in requests})
        raise NotImplementedError(
            f"pll-mlm scores text with a masked language model and cannot generate text, "
            f"but task(s) {', '.join(tasks)} ask for generate_until. Use loglikelihood or "
            "multiple-choice tasks (e.g. blimp_pll), or a generative model (`--model hf`)."
        )

    def _score(
        self, requests: list[Any], pairs: list[tuple[str, str]], kind: str, disable_tqdm: bool
    ) -> list[SentenceScore]:
        description = f"Running {kind} requests"
        log = None if self.token_log is None else partial(self._write_token_log, requests, pairs)
        group = self._scoring_group()
        if group is not None:
            return score_shared(self.scorer, pairs, group, description, disable_tqdm, then=log)
        scores = []
        # Under --use_cache every process scores its share here: rank 0's bar only.
        bar_off = disable_tqdm or self.rank != 0
        with tqdm(total=len(pairs), desc=description, disable=bar_off) as bar:
            for start, stop in self._cache_chunks(pairs):
                chunk = self.scorer.score_requests(pairs[start:stop], progress=bar.update)
                if self._uses_cache():  # else add_partial keeps nothing: no answers for it
                    for request, score in zip(requests[start:stop], chunk, strict=True):
                        self.cache_hook.add_partial(kind, request.args, _answer(kind, score))
                scores += chunk
        if log is not None:
            log(scores)
        return scores

    def _scoring_group(self) -> ProcessGroup | None:
        """The processes that score each call together, or None: this process scores its
        requests alone.  Under ``--use_cache`` lm-eval calls the model only on the processes
        whose share holds uncached requests (another ``--limit``, another task, a cache
        filled by fewer processes), so a process that waited there for the others would wait
        forever; each process then scores its own share, in batches of its own."""
        return None if self._uses_cache() else self._group

    def _uses_cache(self) -> bool:
        return getattr(self.cache_hook, "dbdict", None) is not None

    def _cache_chunks(self, pairs: list[tuple[str, str]]) -> list[tuple[int, int]]:
        """Ranges of ``pairs`` to score one after the other.  Under ``--use_cache`` lm-eval
        stores a call's answers only when the whole call returns, so an interrupted run
        would lose every finished request of, say, all of BLiMP; scored in chunks of about
        CACHE_CHUNK_BATCHES forward passes, each chunk's answers go to the cache as it
        ends (as lm-eval's own models add theirs), and a re-run scores only the rest.
        Without a cache, one chunk: the fewest partly filled batches."""
        if not self._uses_cache():
            return [(0, len(pairs))]
        budget = CACHE_CHUNK_BATCHES * self.scorer.batching.max_batch_tokens
        ranges, start, cost = [], 0, 0
        for index, (context, continuation) in enumerate(pairs):
            # copies x tokens, with about four characters a token
            cost += (len(continuation) // 4 + 1) * ((len(context) + len(continuation)) // 4 + 1)
            if cost >= budget:
                ranges.append((start, index + 1))
                start, cost = index + 1, 0
        if start < len(pairs):
            ranges.append((start, len(pairs)))
        return ranges

    def _write_token_log(
        self, requests: list[Any], pairs: list[tuple[str, str]], scores: list[SentenceScore]
    ) -> None:
        """One record per request.  With several processes lm-eval pads the shorter shares
        with copies of their last request (the same object, its answers dropped), which
        would otherwise show up as extra records of that sentence."""
        assert self.token_log is not None
        written: set[int] = set()
        records = []
        for request, (context, continuation), score in zip(requests, pairs, scores, strict=True):
            if id(request) in written:
                continue
            written.add(id(request))
            records.append(
                {
                    "context": context,
                    "continuation": continuation,
                    **score.as_dict(),
                    "model": self._model_label,
                    "pll_metric": self.scorer.metric,
                }
            )
        self.token_log.write(records)
