r"""Speed benchmark: our PLL engine against minicons, a baseline revision and the matmul peak.

    python bench/pll_bench.py                           # CPU (or CUDA when available)
    python bench/pll_bench.py --n 400 --metrics word_l2r --minicons-python /path/bin/python
    python bench/pll_bench.py --arch nano --all --max-batch-tokens 65536 --no-minicons \
        --metrics word_l2r --baseline 534431a            # host-side cost on all of BLiMP

One run scores the same BLiMP sentences (a seeded sample of ``--n``, or ``--all`` 134,000)
with our engine and with minicons' ``MaskedLMScorer`` (run by the python of its own venv,
made with ``scripts/make_minicons_venv.sh`` when missing), checks that both give the same
sentence scores, and reports sentences/s, scored tokens/s, peak memory, useful FLOP/s as a
fraction of a matmul peak measured in the same run, the speed-up ours/minicons, and where
our time goes: tokenizing, planning, running the model, assembling (and on CUDA the share
of the run the GPU is busy).  ``--baseline REV`` also times the engine of an earlier git
revision of this repository on the same sentences.  Each engine x metric x dtype runs in a
subprocess of its own, so that peak memory figures do not mix.  Results go to
``bench/results/<machine>-<date>[-tag].json`` and ``.md`` (with the command).

Model: ``--model DIR``, else ``<shared>/models/bert-base-cased`` when present (for
``--arch bert-base``), else a random-weight model of the ``--arch`` shapes (``bert-base``:
12 layers, 768 hidden, 12 heads, 3072 intermediate, vocab 28996; ``nano``: 1 layer, width
8, 2 heads, vocab about 4000, whose forward pass costs next to nothing, so that the host
side shows) with a cased WordPiece tokenizer trained on BLiMP + EventsAdapt, built once and
cached under ``$PLL_BENCH_CACHE`` (default ``bench/.cache``).  Speed does not depend on the
weights; the report says which model was used.

Useful FLOPs (a full forward pass per copy; padding, full-vocabulary logits at
non-target positions and other waste do not count), for a copy of L real tokens::

    encoder(L) = layers * (8*L*d^2 + 4*L*d*f + 4*L^2*d)
                 # Q, K, V, output projections 4 x (2*L*d*d); FFN 2 x (2*L*d*f);
                 # attention scores Q.K^T and weights.V 2 x (2*L*L*d)
    head       = 2*d^2 + 2*d*V   # MLM transform dense + vocabulary projection, per target

    useful = sum over copies of encoder(L) + n_targets * head

(``original`` and ``word_l2r`` need one copy per target; embeddings, layer norms, biases,
softmax and GELU are left out, as is usual.)  This is the full-forward formulation that
minicons and the paper's code compute; our engine runs the last layer of most
architectures at the targets only, so for them it computes less than it is credited with.
The matmul peak is the best of several torch ``mm`` calls on 4096 x 4096 matrices (2*n^3
FLOPs each) in the dtype of the row, with the same thread count, measured at the start
and the end of the run.

This file imports only the standard library at the top so that minicons' venv (which has
transformers<5 and no pll_harness) can run its worker part.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import random
import re
import resource
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGED_DATA = REPO_ROOT / "pll_harness" / "tasks" / "data"
ARCHITECTURES = {
    "bert-base": {
        "vocab_size": 28996,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
    "bert-base-250k-vocab": {
        "vocab_size": 250002,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
    "nano": {
        "vocab_size": 4000,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    },
}
WARMUP_SENTENCES = 8
TOP_KERNELS = 12
"""GPU kernels listed by their time in the profiled run, largest first."""


# --------------------------------------------------------------------------------------
# Data and model


def _rows(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _pair(row: dict[str, Any]) -> tuple[str, str]:
    return row["sentence_good"], row["sentence_bad"]


def blimp_sentences(blimp_dir: Path) -> list[str]:
    """Every good and bad BLiMP sentence, in file order."""
    files = sorted(blimp_dir.glob("*.jsonl*"))
    if not files:
        raise SystemExit(f"no BLiMP *.jsonl[.gz] files under {blimp_dir} (use --data)")
    return [s for path in files for row in _rows(path) for s in _pair(row)]


def sample_sentences(blimp_dir: Path, n: int, seed: int) -> list[str]:
    pool = blimp_sentences(blimp_dir)
    return random.Random(seed).sample(pool, min(n, len(pool)))


def benchmark_sentences(blimp_dir: Path, n: int | None, seed: int = 0) -> list[str]:
    """All BLiMP sentences when ``n`` is None, else a seeded sample of ``n``: what every
    bench script scores."""
    return blimp_sentences(blimp_dir) if n is None else sample_sentences(blimp_dir, n, seed)


def eventsadapt_sentences() -> list[str]:
    path = PACKAGED_DATA / "eventsadapt" / "eventsadapt_pairs.jsonl.gz"
    return [s for row in _rows(path) for s in _pair(row)]


def cache_dir() -> Path:
    root = os.environ.get("PLL_BENCH_CACHE")
    return Path(root) if root else REPO_ROOT / "bench" / ".cache"


def resolve_model(args: argparse.Namespace) -> tuple[Path, str]:
    """(model folder, description) for the run."""
    if args.model:
        return Path(args.model).resolve(), f"checkpoint {args.model}"
    real = args.shared / "models" / "bert-base-cased"
    if args.arch == "bert-base" and (real / "config.json").is_file():
        return real, f"bert-base-cased checkpoint from {real}"
    shape = ARCHITECTURES[args.arch]
    target = cache_dir() / f"random-{args.arch}-cased-arch"
    if not (target / "DONE").is_file():
        print(f"building random-weight {args.arch} + tokenizer in {target} ...", file=sys.stderr)
        build_random_bert(target, args.data, shape)
    return target, (
        f"random-weight {args.arch} architecture ({shape['num_hidden_layers']}x"
        f"{shape['hidden_size']}, {shape['num_attention_heads']} heads, "
        f"{shape['intermediate_size']} FFN, vocab {shape['vocab_size']}), cased WordPiece "
        "tokenizer trained on BLiMP + EventsAdapt"
    )


def build_random_bert(target: Path, blimp_dir: Path, shape: dict[str, int]) -> None:
    """Random-weight BERT of ``shape`` with a WordPiece tokenizer of ``vocab_size`` ids,
    saved so that transformers 4 (minicons) and 5 (us) both load it."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    target.mkdir(parents=True, exist_ok=True)
    texts = blimp_sentences(blimp_dir) + eventsadapt_sentences()
    trainer = BertWordPieceTokenizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer.train_from_iterator(
        texts, vocab_size=shape["vocab_size"], min_frequency=1, special_tokens=specials
    )
    vocab = sorted(trainer.get_vocab().items(), key=lambda item: item[1])
    tokens = [token for token, _ in vocab]
    tokens += [f"[unused{i}]" for i in range(shape["vocab_size"] - len(tokens))]
    tokenizer = BertTokenizerFast(
        vocab={token: i for i, token in enumerate(tokens)},
        do_lower_case=False,
        model_max_length=512,
    )
    tokenizer.save_pretrained(str(target))
    config_path = target / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.update(
        tokenizer_class="BertTokenizerFast",
        do_lower_case=False,
        model_max_length=512,
        tokenize_chinese_chars=True,
        strip_accents=None,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    torch.manual_seed(0)
    model_config = BertConfig(**{**shape, "vocab_size": len(tokens)}, max_position_embeddings=512)
    model = BertForMaskedLM(model_config)
    model.save_pretrained(str(target))
    (target / "DONE").write_text("ok\n")


# --------------------------------------------------------------------------------------
# FLOPs


def model_shape(model_dir: Path) -> dict[str, int]:
    config = json.loads((model_dir / "config.json").read_text())
    hidden = config["hidden_size"]
    return {
        "d": hidden,
        "f": config.get("intermediate_size", 4 * hidden),
        "layers": config["num_hidden_layers"],
        "vocab": config["vocab_size"],
    }


def encoder_flops(length: int, shape: dict[str, int]) -> float:
    """Encoder matmul FLOPs for one copy of ``length`` real tokens (see module docstring)."""
    d, f = shape["d"], shape["f"]
    per_layer = 8 * length * d * d + 4 * length * d * f + 4 * length * length * d
    return float(shape["layers"] * per_layer)


def head_flops(shape: dict[str, int]) -> float:
    """MLM head FLOPs for one target row: transform dense + vocabulary projection."""
    return float(2 * shape["d"] ** 2 + 2 * shape["d"] * shape["vocab"])


def useful_flops(
    lengths: list[int], copies: list[int], targets: list[int], shape: dict[str, int]
) -> float:
    return sum(
        c * encoder_flops(n, shape) + t * head_flops(shape)
        for n, c, t in zip(lengths, copies, targets, strict=True)
    )


# --------------------------------------------------------------------------------------
# Workers (each in its own process)


def seconds_per_call(run: Any, repeats: int) -> float:
    """Mean wall time of ``run()`` over ``repeats`` calls, after one untimed call."""
    run()
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - start) / repeats


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _cuda_stats(torch: Any, device: str) -> dict[str, float]:
    if not device.startswith("cuda"):
        return {}
    torch.cuda.synchronize()
    return {"cuda_max_allocated_mb": torch.cuda.max_memory_allocated() / 2**20}


def worker_matmul(spec: dict[str, Any]) -> dict[str, Any]:
    """Best fp32 (or ``spec['dtype']``) square-matmul rate with the given threads."""
    import torch

    torch.set_num_threads(spec["threads"])
    n = spec.get("size", 4096)
    device = spec["device"]
    dtype = getattr(torch, spec.get("dtype", "float32"))
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    rates = []
    for i in range(spec.get("reps", 10) + 2):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        torch.mm(a, b)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if i >= 2:
            rates.append(2 * n**3 / elapsed)
    return {"size": n, "dtype": spec.get("dtype", "float32"), "flops": max(rates), "all": rates}


def _load_ours(spec: dict[str, Any]) -> Any:
    from pll_harness.scorer import PLLScorer

    kwargs: dict[str, Any] = {"dtype": spec["dtype"]}
    if spec.get("attn_implementation"):
        kwargs["attn_implementation"] = spec["attn_implementation"]
    return PLLScorer.from_pretrained(
        spec["model"],
        pll_metric=spec["metric"],
        device=spec["device"],
        max_batch_tokens=spec.get("max_batch_tokens"),
        **kwargs,
    )


def _timed_score(scorer: Any, texts: list[str], device: str, torch: Any) -> tuple[float, Any]:
    """Wall time of ``scorer.score(texts)``, all device work included."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    results = scorer.score(texts)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, results


def _timeline_score(scorer: Any, texts: list[str], torch: Any) -> tuple[float, Any, dict]:
    """:func:`_timed_score` on CUDA, with when the host began and ended each batch's launch,
    and when the GPU reached and finished it (CUDA events recorded before and behind it),
    for :func:`gpu_idle`."""
    runner = scorer.runner
    score_batch = runner._score_batch
    begun: list[float] = []
    done: list[float] = []
    reached: list[Any] = []
    finished: list[Any] = []

    def timed_batch(*args: Any) -> None:
        begun.append(time.perf_counter())
        reached.append(torch.cuda.Event(enable_timing=True))
        reached[-1].record()
        score_batch(*args)
        finished.append(torch.cuda.Event(enable_timing=True))
        finished[-1].record()
        done.append(time.perf_counter())

    torch.cuda.synchronize()
    origin = torch.cuda.Event(enable_timing=True)
    origin.record()  # the GPU is idle: it passes this event at once
    start = time.perf_counter()
    runner._score_batch = timed_batch
    try:
        wall, results = _timed_score(scorer, texts, "cuda", torch)
    finally:
        del runner._score_batch
    on_gpu = [
        [origin.elapsed_time(event) / 1000 for event in events] for events in (reached, finished)
    ]
    on_host = [[t - start for t in times] for times in (begun, done)]
    return wall, results, gpu_idle(on_host[0], on_gpu[1], wall, on_gpu[0], on_host[1])


def gpu_idle(
    begun: list[float],
    finished: list[float],
    wall: float,
    reached: list[float] | None = None,
    launched: list[float] | None = None,
) -> dict[str, Any]:
    """Seconds the GPU waited for the host in a run whose batch k the host began at
    ``begun[k]`` and the GPU finished at ``finished[k]`` (seconds from the run's start, on
    one clock): before the first batch, between batches (the GPU done with batch k-1 before
    the host began batch k) and after the last (assembling).  A batch's kernels are
    launched a little after the host begins it, so these are lower bounds.  With when the
    GPU reached each batch (``reached``) and when the host had launched it (``launched``):
    the GPU's time inside batches, which holds whatever it waited for a batch's launches,
    and every batch's four times, to compare a run with another of the same batches."""
    gaps = [max(0.0, b - f) for b, f in zip(begun[1:], finished[:-1], strict=True)]
    largest = sorted(range(len(gaps)), key=gaps.__getitem__, reverse=True)[:5]
    idle = {
        "wall": wall,
        "batches": len(begun),
        "before_first": begun[0] if begun else wall,
        "between": sum(gaps),
        "after_last": wall - finished[-1] if finished else 0.0,
        "largest_gaps": [[k + 1, gaps[k], begun[k + 1]] for k in largest if gaps[k] > 0],
    }
    if reached is not None and launched is not None:
        idle["in_batches"] = sum(f - r for r, f in zip(reached, finished, strict=True))
        idle["per_batch"] = [
            [round(t, 6) for t in times]
            for times in zip(begun, launched, reached, finished, strict=True)
        ]
    return idle


def _score_once(
    scorer: Any, texts: list[str], spec: dict[str, Any], torch: Any
) -> tuple[float, Any, dict | None]:
    """One timed ``score(texts)``, with the GPU's timeline on CUDA under ``profile_gpu``."""
    if spec["device"].startswith("cuda") and spec.get("profile_gpu"):
        return _timeline_score(scorer, texts, torch)
    return (*_timed_score(scorer, texts, spec["device"], torch), None)


def _kernel_variants() -> int | None:
    """How many variants of the short-sequence attention kernel triton has compiled in this
    process (two padded lengths: two; more means a run compiled some on the way), or None
    where the kernel or this triton's cache layout is not there."""
    from pll_harness import short_attention

    kernel = short_attention._kernel()
    caches = getattr(kernel, "device_caches", None)
    if caches is None:
        return None
    return sum(len(cache[0]) for cache in caches.values())


def worker_ours(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(spec["threads"])
    texts = spec["texts"]
    start = time.perf_counter()
    scorer = _load_ours(spec)
    load_seconds = time.perf_counter() - start
    rss_loaded = _current_rss_mb()
    scorer.score(texts[:WARMUP_SENTENCES])
    rss_warm = _current_rss_mb()
    seconds, results, timeline = _score_once(scorer, texts, spec, torch)
    peak = {"peak_rss_mb": _peak_rss_mb(), **_cuda_stats(torch, spec["device"])}
    again = [_score_once(scorer, texts, spec, torch) for _ in range(spec.get("again", 0))]
    phases, copies = _phases(scorer, texts, spec["device"], torch, spec.get("profile_gpu"))
    if timeline is not None:
        phases["gpu_idle"] = timeline
    specials = scorer.specials.count
    out = {
        "engine": "ours",
        "seconds": seconds,
        "phases": phases,
        "load_seconds": load_seconds,
        "scores": [r.logprob for r in results],
        "targets": [len(r.tokens) for r in results],
        "lengths": [len(r.tokens) + specials for r in results],
        "copies": copies,
        **peak,
        "rss_after_load_mb": rss_loaded,
        "rss_after_warmup_mb": rss_warm,
        "again": [{"seconds": wall, "gpu_idle": idle} for wall, _, idle in again],
        "kernel_variants": _kernel_variants(),
        "max_batch_tokens": scorer.batching.max_batch_tokens,
        "attn_implementation": getattr(scorer.model.config, "_attn_implementation", None),
        "torch": torch.__version__,
    }
    if spec.get("long_tokens"):
        out["long"] = _long_check(scorer, spec)
    return out


def _phases(
    scorer: Any, texts: list[str], device: str, torch: Any, profile_gpu: bool
) -> tuple[dict[str, float], list[int]]:
    """Seconds in each step of one more ``score(texts)``: tokenize (distinct requests, one
    tokenizer call), plan (copies and batches of each part), run (the model; on CUDA until the last
    kernel ends) and assemble, then reading every score's ``(logprob, is_greedy)`` as
    lm-eval's adapter does (*answers*: scores are views that slice their tokens when read,
    so part of the cost moved there); with ``profile_gpu`` on CUDA, a third run under
    torch.profiler gives the share of the run's wall time the GPU is busy.  Also the
    masked copies of each text, for the FLOP count."""

    cuda = device.startswith("cuda")
    clock = [time.perf_counter()]

    def lap() -> float:
        if cuda:
            torch.cuda.synchronize()
        clock.append(time.perf_counter())
        return clock[-1] - clock[-2]

    keys, jobs = scorer.distinct_jobs([("", t) for t in texts])
    phases = {"tokenize": lap()}
    # scored in parts (pll_harness.parts) since 2026-11-26; a baseline may predate them
    bounds = getattr(jobs, "bounds", (0, len(jobs)))
    parts = [jobs.part(k) for k in range(len(bounds) - 1)] if len(bounds) > 2 else [jobs]
    parts = [part for part in parts if len(part)]
    works = [scorer.plan_work(part.encodings) for part in parts]
    phases["plan"] = lap()
    results = [scorer.runner.run(work) for work in works]
    phases["run"] = lap()
    scores = [
        score
        for part, work, result in zip(parts, works, results, strict=True)
        for score in scorer.assemble(part, work, result)
    ]
    phases["assemble"] = lap()
    _answers(scores)
    phases["answers"] = lap()
    phases["batches"] = sum(len(work.batches) for work in works)
    phases["copies"] = sum(group.n_copies for work in works for group in work.groups)
    phases["tokens"] = sum(work.cost(batch) for work in works for batch in work.batches)
    if cuda and profile_gpu:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            for work in works:
                scorer.runner.run(work)
            torch.cuda.synchronize()
            wall = time.perf_counter() - start
        events = prof.key_averages()
        busy = sum(event.self_device_time_total for event in events) / 1e6
        phases["gpu_busy_share_of_run"] = busy / wall
        top = sorted(events, key=lambda event: event.self_device_time_total, reverse=True)
        phases["gpu_top_kernels"] = [
            [event.key[:90], event.self_device_time_total / 1e6] for event in top[:TOP_KERNELS]
        ]
    per_job = [copies for work in works for copies in _copies_per_job(work)]
    return phases, [per_job[key] for key in keys]


def _copies_per_job(work: Any) -> list[int]:
    """The masked copies each job of ``work`` costs (a twin's are its source's)."""
    import numpy as np

    per_slot = np.zeros(work.n_slots)
    for group in work.groups:
        first = np.ones(group.target_copy.shape[0], dtype=bool)
        first[1:] = group.target_copy[1:] != group.target_copy[:-1]
        per_slot[group.target_slot[first]] = 1
    per_slot = per_slot[work.slot_source]
    return [int(part.sum()) for part in np.split(per_slot, work.slot_offsets[1:-1])]


def _answers(scores: list[Any]) -> list[tuple[float, bool]]:
    """What lm-eval's adapter reads of each score."""
    return [(score.logprob, score.is_greedy) for score in scores]


def worker_baseline(spec: dict[str, Any]) -> dict[str, Any]:
    """``score(texts)`` with the engine of another revision (its code on sys.path)."""
    import torch

    torch.set_num_threads(spec["threads"])
    scorer = _load_ours(spec)
    scorer.score(spec["texts"][:WARMUP_SENTENCES])
    seconds, results = _timed_score(scorer, spec["texts"], spec["device"], torch)
    out = {
        "engine": f"baseline {spec['revision']}",
        "seconds": seconds,
        "scores": [r.logprob for r in results],
        "peak_rss_mb": _peak_rss_mb(),
        **_cuda_stats(torch, spec["device"]),
    }
    try:
        out["phases"], _ = _phases(scorer, spec["texts"], spec["device"], torch, False)
    except (AttributeError, TypeError) as error:
        # Revisions before the bulk engine's present internals: timed as a whole only.
        print(f"baseline {spec['revision']}: no step breakdown ({error})", flush=True)
    return out


def _long_check(scorer: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Score the first three batches of one ``long_tokens``-token input: what bounds memory
    whatever the input's length."""
    words = " ".join(spec["texts"][:200] * 20).split()  # plenty: BLiMP has ~9 tokens a text
    body = scorer.tokenizer(" ".join(words), add_special_tokens=False, verbose=False)["input_ids"]
    text = scorer.tokenizer.decode(body[: spec["long_tokens"] - scorer.specials.count])
    _, jobs = scorer.distinct_jobs([("", text)])
    work = scorer.plan_work(jobs.encodings)
    before = _peak_rss_mb()
    start = time.perf_counter()
    scorer.runner.run(work, work.batches[:3])
    seconds = time.perf_counter() - start
    group = work.groups[0]
    scored = sum(batch.stop - batch.first for batch in work.batches[:3])
    return {
        "length": group.length,
        "targets_scored": scored,
        "targets_total": work.n_slots,
        "rows_per_batch": work.batches[0].stop - work.batches[0].first,
        "seconds": seconds,
        "extrapolated_full_seconds": seconds * len(work.batches) / 3,
        "minicons_logits_gb": work.n_slots * group.length * scorer.runner.vocab_size * 4 / 1e9,
        "peak_rss_mb_before": before,
        "peak_rss_mb_after": _peak_rss_mb(),
    }


def worker_minicons(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    import transformers
    from minicons import scorer as mscorer

    torch.set_num_threads(spec["threads"])
    texts = spec["texts"]
    batch = spec["minicons_batch"]
    metric = spec["minicons_metric"]
    start = time.perf_counter()
    dtype = getattr(torch, spec.get("dtype", "float32"))
    mlm = mscorer.MaskedLMScorer(spec["model"], device=spec["device"], torch_dtype=dtype)
    load_seconds = time.perf_counter() - start
    rss_loaded = _current_rss_mb()

    def run(chunk: list[str]) -> list[tuple[float, int]]:
        return mlm.sequence_score(
            chunk, reduction=lambda x: (x.sum(0).item(), int(x.shape[0])), PLL_metric=metric
        )

    run(texts[:WARMUP_SENTENCES])
    rss_warm = _current_rss_mb()
    if spec["device"].startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    results = []
    for first in range(0, len(texts), batch):
        results += run(texts[first : first + batch])
    if spec["device"].startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    out = {
        "engine": "minicons",
        "seconds": seconds,
        "load_seconds": load_seconds,
        "scores": [s for s, _ in results],
        "targets": [n for _, n in results],
        "peak_rss_mb": _peak_rss_mb(),
        "rss_after_load_mb": rss_loaded,
        "rss_after_warmup_mb": rss_warm,
        "minicons_batch": batch,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    out.update(_cuda_stats(torch, spec["device"]))
    return out


WORKERS = {
    "matmul": worker_matmul,
    "ours": worker_ours,
    "baseline": worker_baseline,
    "minicons": worker_minicons,
}


def worker_main(kind: str, spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    result = WORKERS[kind](spec)
    Path(out_path).write_text(json.dumps(result))


# --------------------------------------------------------------------------------------
# Driver


def run_worker(
    python: str, kind: str, spec: dict[str, Any], tmp: Path, code_dir: Path | None = None
) -> dict[str, Any]:
    """Run one worker in a fresh process of ``python`` and return its JSON result.

    The process runs this file by path from a neutral directory, so that minicons' venv
    (which has no pll_harness) can run it and nothing in the repository shadows installed
    packages; ``code_dir`` (a baseline revision's tree) goes first on PYTHONPATH."""
    spec_path, out_path = tmp / f"{kind}-spec.json", tmp / f"{kind}-out.json"
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    code = (
        "import runpy, sys; sys.argv = ['bench'] + sys.argv[1:]; "
        f"runpy.run_path({str(Path(__file__))!r}, run_name='__main__')"
    )
    command = [python, "-c", code, "--worker", kind, str(spec_path), str(out_path)]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if code_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code_dir), env.get("PYTHONPATH")]))
    subprocess.run(command, check=True, cwd=str(tmp), env=env)
    return json.loads(out_path.read_text())


def export_revision(revision: str, tmp: Path) -> Path:
    """The package as it was at ``revision`` of this repository, in a folder of its own."""
    target = tmp / f"rev-{revision}"
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", revision, "pll_harness"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def ensure_minicons(args: argparse.Namespace) -> str | None:
    """minicons' interpreter as an absolute path, since the workers run in a temporary
    folder; not resolved, which would follow a venv's python to its base interpreter."""
    if args.no_minicons:
        return None
    if args.minicons_python:
        return os.path.abspath(args.minicons_python)
    venv = Path(args.minicons_venv).absolute()
    python = venv / "bin" / "python"
    if not python.is_file():
        print(f"creating minicons venv at {venv} (scripts/make_minicons_venv.sh) ...")
        subprocess.run(["bash", str(REPO_ROOT / "scripts" / "make_minicons_venv.sh"), str(venv)])
    return str(python) if python.is_file() else None


def machine_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return file_name_part(torch.cuda.get_device_name(0))
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{file_name_part(cpu)}-{os.cpu_count()}cpu"


def file_name_part(name: str) -> str:
    """A processor's name as results files are named: lower case, words joined by hyphens,
    the trade marks and other punctuation left out ("Intel(R) Xeon(R) Processor" gives
    ``intel-xeon-processor``), so that the files need no quoting in a shell."""
    name = re.sub(r"\((r|tm|c)\)", " ", name.lower())
    return "-".join(re.findall(r"[a-z0-9.]+", name))


def other_load() -> list[str]:
    """Other busy processes (CPU% > 10 since start), so the report says what ran beside."""
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid,pcpu,etime,args", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()[1:]
    except (OSError, subprocess.CalledProcessError):
        return []
    mine = {os.getpid(), os.getppid()}
    busy = []
    for line in out:
        parts = line.split(None, 3)
        if len(parts) == 4 and float(parts[1]) > 10 and int(parts[0]) not in mine:
            busy.append(f"pid {parts[0]} {parts[1]}% cpu, up {parts[2]}: {parts[3][:100]}")
    return busy[:8]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker_main(*argv[1:4])
        return
    args = parse_args(argv)
    command = "python bench/pll_bench.py " + " ".join(shlex.quote(a) for a in argv)

    import torch

    from pll_harness.metrics import METRICS

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    threads = args.threads or torch.get_num_threads()
    dtypes = args.dtypes or (["float32", "bfloat16"] if device.startswith("cuda") else ["float32"])
    blimp_dir = args.data
    texts = benchmark_sentences(blimp_dir, None if args.all else args.n, args.seed)
    model_dir, model_note = resolve_model(args)
    shape = model_shape(model_dir)
    minicons_python = ensure_minicons(args)
    started = dt.datetime.now(dt.timezone.utc)
    load_before = other_load()
    base = {"model": str(model_dir), "texts": texts, "threads": threads, "device": device}

    with tempfile.TemporaryDirectory(prefix="pll-bench-") as tmp_name:
        tmp = Path(tmp_name)
        baseline_code = export_revision(args.baseline, tmp) if args.baseline else None
        print(f"matmul peak ({threads} threads) ...", flush=True)
        peak = {
            dt_: run_worker(sys.executable, "matmul", {**base, "dtype": dt_}, tmp) for dt_ in dtypes
        }
        rows = []
        for metric, dtype in ((m, d) for m in args.metrics for d in dtypes):
            print(f"ours {metric} {dtype} ...", flush=True)
            spec = {
                **base,
                "metric": metric,
                "dtype": dtype,
                "max_batch_tokens": args.max_batch_tokens,
                "attn_implementation": args.attn_implementation,
                "long_tokens": args.long_tokens if dtype == dtypes[0] else 0,
                "profile_gpu": args.profile_gpu,
                "again": args.again,
            }
            ours = run_worker(sys.executable, "ours", spec, tmp, REPO_ROOT)
            rows.append(_row(ours, metric, dtype, shape))
            others = []
            if baseline_code is not None:
                print(f"baseline {args.baseline} {metric} {dtype} ...", flush=True)
                spec_baseline = {**spec, "revision": args.baseline}
                others.append(
                    run_worker(sys.executable, "baseline", spec_baseline, tmp, baseline_code)
                )
            minicons_metric = METRICS[metric].minicons
            if minicons_python and minicons_metric:
                print(f"minicons {metric} {dtype} ...", flush=True)
                spec_minicons = {**spec, "minicons_batch": args.minicons_batch}
                spec_minicons["minicons_metric"] = minicons_metric
                others.append(run_worker(minicons_python, "minicons", spec_minicons, tmp))
            for other in others:
                other.setdefault("targets", ours["targets"])
                other["copies"], other["lengths"] = ours["copies"], ours["lengths"]
                rows.append(_row(other, metric, dtype, shape))
                _compare(rows[-1], ours, other)
        # The peak again at the end: other load on the machine can depress one measurement;
        # the better of the two is the machine's rate.
        print(f"matmul peak again ({threads} threads) ...", flush=True)
        for dt_ in dtypes:
            again = run_worker(sys.executable, "matmul", {**base, "dtype": dt_}, tmp)
            peak[dt_]["flops_start"], peak[dt_]["flops_end"] = peak[dt_]["flops"], again["flops"]
            peak[dt_]["flops"] = max(peak[dt_]["flops"], again["flops"])
    for row in rows:
        row["fraction_of_matmul_peak"] = (
            row["useful_gflop_per_s"] * 1e9 / peak[row["dtype"]]["flops"]
        )
    finished = dt.datetime.now(dt.timezone.utc)
    report = {
        "command": command,
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "machine": machine_name(device),
        "host": socket.gethostname(),
        "device": device,
        "threads": threads,
        "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM", "(unset)"),
        "model": model_note,
        "model_shape": shape,
        "sample": {
            "n": len(texts),
            "seed": None if args.all else args.seed,
            "source": "all of BLiMP" if args.all else "BLiMP sample",
        },
        "matmul_peak": {
            k: {kk: vv for kk, vv in v.items() if kk != "all"} for k, v in peak.items()
        },
        "other_busy_processes_at_start": load_before,
        "other_busy_processes_at_end": other_load(),
        "flops_formula": (
            "useful = sum_copies layers*(8*L*d^2 + 4*L*d*f + 4*L^2*d) + n_targets*(2*d^2 + "
            "2*d*V), L = real (unpadded) tokens of the copy incl. [CLS]/[SEP]"
        ),
        "rows": rows,
    }
    write_report(report, args.out_dir, args.tag)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shared",
        type=Path,
        default=REPO_ROOT.parent / "shared",
        help="shared folder, for models/bert-base-cased (default: ../shared beside the repo)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=PACKAGED_DATA / "blimp",
        help="BLiMP folder of *.jsonl[.gz] (default: the copy inside the package)",
    )
    parser.add_argument("--model", help="model folder (default: see module docstring)")
    parser.add_argument("--arch", choices=sorted(ARCHITECTURES), default="bert-base")
    parser.add_argument("--n", type=int, default=300, help="sentences in the sample")
    parser.add_argument("--all", action="store_true", help="all 134,000 BLiMP sentences")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", nargs="+", default=["original", "word_l2r"])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any)")
    parser.add_argument("--dtypes", nargs="+", help="default float32 (+ bfloat16 on GPU)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's default)")
    parser.add_argument("--max-batch-tokens", type=int, help="ours (default: the engine's)")
    parser.add_argument("--attn-implementation", help="ours (default: the engine's)")
    parser.add_argument("--baseline", help="also time the engine of this git revision")
    parser.add_argument("--profile-gpu", action="store_true", help="GPU busy share (CUDA)")
    parser.add_argument(
        "--again",
        type=int,
        default=0,
        help="ours: time score() this many more times in the same process (first-run costs)",
    )
    parser.add_argument("--minicons-python", help="python of a venv with minicons")
    parser.add_argument(
        "--minicons-venv",
        default=str(REPO_ROOT / "bench" / ".minicons-venv"),
        help="made with scripts/make_minicons_venv.sh when missing",
    )
    parser.add_argument("--minicons-batch", type=int, default=50, help="sentences per call")
    parser.add_argument("--no-minicons", action="store_true")
    parser.add_argument("--long-tokens", type=int, default=500, help="0 skips the long check")
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "bench" / "results")
    parser.add_argument("--tag", default="", help="suffix of the result file names")
    return parser.parse_args(argv)


def _compare(row: dict[str, Any], ours: dict[str, Any], other: dict[str, Any]) -> None:
    """What the ``ours`` row gains over another engine's, recorded on that engine's row."""
    row["max_abs_diff_vs_ours"] = max(
        abs(a - b) for a, b in zip(ours["scores"], other["scores"], strict=True)
    )
    row["ours_speedup"] = other["seconds"] / ours["seconds"]
    row["ours_memory_ratio"] = ours["peak_rss_mb"] / other["peak_rss_mb"]
    if other.get("targets") != ours["targets"]:
        row["warning"] = "scored token counts differ from ours"


def _row(result: dict[str, Any], metric: str, dtype: str, shape: dict[str, int]) -> dict[str, Any]:
    flops = useful_flops(result["lengths"], result["copies"], result["targets"], shape)
    seconds = result["seconds"]
    row = {
        "engine": result["engine"],
        "metric": metric,
        "dtype": dtype,
        "sentences": len(result["scores"]),
        "scored_tokens": sum(result["targets"]),
        "seconds": seconds,
        "sentences_per_s": len(result["scores"]) / seconds,
        "tokens_per_s": sum(result["targets"]) / seconds,
        "useful_gflop": flops / 1e9,
        "useful_gflop_per_s": flops / seconds / 1e9,
        "peak_rss_mb": result["peak_rss_mb"],
    }
    for key in (
        "phases",
        "rss_after_load_mb",
        "rss_after_warmup_mb",
        "cuda_max_allocated_mb",
        "max_batch_tokens",
        "attn_implementation",
        "minicons_batch",
        "long",
        "load_seconds",
        "torch",
        "transformers",
        "again",
        "kernel_variants",
    ):
        if key in result:
            row[key] = result[key]
    return row


def _cell(value: float | None, form: str) -> str:
    return "" if value is None else format(value, form)


def _idle_line(idle: dict[str, Any], run: str, row: dict[str, Any]) -> str:
    """One run's GPU timeline (:func:`gpu_idle`) as a sentence."""
    largest = ", ".join(
        f"{gap:.3f} s before batch {k} (at {at:.2f} s)" for k, gap, at in idle["largest_gaps"]
    )
    inside = ""
    if "in_batches" in idle:
        inside = (
            f" The GPU spent {idle['in_batches']:.2f} s inside batches (from reaching each"
            " to finishing it)."
        )
    return (
        f"GPU waiting for the host in the {run} ({row['metric']}, {row['dtype']}; "
        f"host start of each of its {idle['batches']} batches against a CUDA event behind "
        f"it, lower bounds): {idle['before_first']:.2f} s before the first batch, "
        f"{idle['between']:.2f} s between batches, {idle['after_last']:.2f} s after the "
        f"last, of {idle['wall']:.2f} s. Largest gaps: {largest or 'none'}.{inside}"
    )


def markdown(report: dict[str, Any]) -> str:
    peak = report["matmul_peak"]
    sample = report["sample"]
    lines = [
        f"# PLL benchmark: {report['machine']} ({report['device']}, {report['threads']} threads)",
        "",
        f"- command: `{report['command']}`",
        f"- run: {report['started_utc']} to {report['finished_utc']}",
        f"- model: {report['model']}",
        f"- sentences: {sample['n']} ({sample['source']}"
        + (f", seed {sample['seed']})" if sample["seed"] is not None else ")"),
        "- matmul peak (best of start and end of the run): "
        + ", ".join(
            f"{k} {v['flops'] / 1e9:.0f} GFLOP/s (start {v['flops_start'] / 1e9:.0f}, "
            f"end {v['flops_end'] / 1e9:.0f})"
            for k, v in peak.items()
        ),
        f"- useful FLOPs: `{report['flops_formula']}`",
        f"- TOKENIZERS_PARALLELISM: {report['tokenizers_parallelism']}",
        "- other busy processes at start: "
        + ("; ".join(report["other_busy_processes_at_start"]) or "none"),
        "",
        "| engine | metric | dtype | seconds | sent/s | tok/s | peak mem MB | "
        "useful GFLOP/s | % of peak | ours' speed-up | ours' memory ratio | max abs diff |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["rows"]:
        mem = row.get("cuda_max_allocated_mb", row["peak_rss_mb"])
        speedup = row.get("ours_speedup")
        lines.append(
            f"| {row['engine']} | {row['metric']} | {row['dtype']} | {row['seconds']:.2f} | "
            f"{row['sentences_per_s']:.1f} | {row['tokens_per_s']:.1f} | {mem:.0f} | "
            f"{row['useful_gflop_per_s']:.1f} | {100 * row['fraction_of_matmul_peak']:.0f}% | "
            f"{_cell(speedup, '.2f')}{'x' if speedup else ''} | "
            f"{_cell(row.get('ours_memory_ratio'), '.3f')} | "
            f"{_cell(row.get('max_abs_diff_vs_ours'), '.1e')} |"
        )
    phased = [row for row in report["rows"] if "phases" in row]
    if phased:
        lines += [
            "",
            "Where the time goes (one more `score()` of the same sentences, in steps; "
            "answers: reading every score's logprob and is_greedy, as lm-eval does):",
            "",
            "| engine | metric | dtype | tokenize s | plan s | run s | assemble s | answers s | "
            "batches | copies | tokens | GPU busy in run |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in phased:
            p = row["phases"]
            busy = p.get("gpu_busy_share_of_run")
            lines.append(
                f"| {row['engine']} | {row['metric']} | {row['dtype']} | {p['tokenize']:.2f} | "
                f"{p['plan']:.2f} | {p['run']:.2f} | {p['assemble']:.2f} | "
                f"{_cell(p.get('answers'), '.2f')} | {p['batches']} | {p['copies']} | "
                f"{p['tokens']} | {_cell(busy and 100 * busy, '.0f')}{'%' if busy else ''} |"
            )
    for row in phased:
        if row["phases"].get("gpu_idle"):
            lines += ["", _idle_line(row["phases"]["gpu_idle"], "timed `score()`", row)]
            if row.get("kernel_variants") is not None:
                lines.append(f"Short-sequence kernel variants compiled: {row['kernel_variants']}.")
        for k, run in enumerate(row.get("again", []), 2):
            name = f"`score()` call {k} in the same process"
            if run["gpu_idle"]:
                lines += ["", _idle_line(run["gpu_idle"], name, row)]
            else:
                lines += ["", f"{name} ({row['metric']}, {row['dtype']}): {run['seconds']:.2f} s."]
    for row in (row for row in phased if row["phases"].get("gpu_top_kernels")):
        lines += [
            "",
            f"GPU time by kernel ({row['metric']}, {row['dtype']}, the profiled run; "
            f"the {TOP_KERNELS} largest):",
            "",
            "| kernel | s |",
            "| --- | ---: |",
        ]
        kernels = row["phases"]["gpu_top_kernels"]
        lines += [f"| `{name}` | {seconds:.3f} |" for name, seconds in kernels]
    for row in (row for row in report["rows"] if "long" in row):
        long = row["long"]
        lines.append("")
        lines.append(
            f"Long input ({row['metric']}): {long['length']} tokens, {long['targets_scored']} of "
            f"{long['targets_total']} targets in batches of {long['rows_per_batch']} copies; "
            f"peak RSS {long['peak_rss_mb_after']:.0f} MB (before {long['peak_rss_mb_before']:.0f}"
            f" MB); full input would take about {long['extrapolated_full_seconds']:.0f} s. "
            f"minicons would hold [{long['targets_total']} x {long['length']} x vocab] float32 "
            f"logits for it: {long['minicons_logits_gb']:.1f} GB."
        )
    lines.append("")
    lines.append(
        "Seconds: `score()` of all sentences after a warm-up of 8, model loading not included. "
        "Memory: peak RSS of the engine's own process up to the end of that `score()` (model "
        "load included) on CPU, max allocated on CUDA. Speed-up, memory ratio and max abs diff "
        "(nats per sentence) compare our row with the row they stand on."
    )
    lines.append(
        "Other busy processes at end: "
        + ("; ".join(report["other_busy_processes_at_end"]) or "none")
    )
    return "\n".join(lines) + "\n"


def shape_table(
    first: str, shapes: list[tuple[int, int]], cells: Callable[[int, int], dict[str, str]]
) -> list[str]:
    """A markdown table for a micro-benchmark at BLiMP's batch shapes: a column per ``(copies,
    length)``, a row per way measured, the cells ``cells(copies, length)`` gives by way."""
    rows: dict[str, list[str]] = {}
    for copies, length in shapes:
        for way, cell in cells(copies, length).items():
            rows.setdefault(way, []).append(cell)
    return [
        f"| {first} | " + " | ".join(f"{copies} x {length}" for copies, length in shapes) + " |",
        "| --- |" + " ---: |" * len(shapes),
        *(f"| {way} | " + " | ".join(row) + " |" for way, row in rows.items()),
    ]


def write_lines(
    out_dir: Path, name: str, lines: list[str], suffix: str = "", device: str = "cpu"
) -> Path:
    """Write a micro-benchmark's markdown to ``<out_dir>/<name>-<machine>-<date><suffix>.md``
    (the machine: the CPU's, or the GPU's for a CUDA ``device``) and say where."""
    out_dir.mkdir(parents=True, exist_ok=True)
    day = dt.date.today().isoformat()
    out = out_dir / f"{name}-{machine_name(device)}-{day}{suffix}.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return out


def write_report(report: dict[str, Any], out_dir: Path, tag: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    day = report["started_utc"][:10]
    stem = f"{report['machine']}-{day}{'-' + tag if tag else ''}"
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    (out_dir / f"{stem}.md").write_text(table)
    print(table)
    print(f"wrote {out_dir / stem}.json and .md")


if __name__ == "__main__":
    main()
