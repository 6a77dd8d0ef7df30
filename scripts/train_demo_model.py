#!/usr/bin/env python3
"""Train the embedded demo model ``pll_harness/models/pll-demo`` from the demo corpus.

Stages (each skipped when its output already exists, so the script can be re-run to resume):

1. prepare: train a lowercasing WordPiece tokenizer on the corpus (``tokenizers``), hold out a
   slice of the documents (``--heldout``, chosen by a hash of each document's text), tokenize
   the corpus and pack consecutive sentences of a document into sequences of at most
   ``--seq-len`` tokens (``[CLS] s1 s2 ... [SEP]``). Everything training needs goes into one
   file (``--data``, default ``<work>/packed_<seq-len>.pt``; it may be xz-compressed,
   ``.pt.xz``): token ids, sequence boundaries, the held-out flags and the tokenizer, so that
   this one file is all a GPU machine needs;
2. train a small BERT (``BertForMaskedLM``) with masked-language modelling (15 %, 80/10/10,
   loss on the masked positions only) in a plain torch loop on ``--device`` (``cpu``,
   ``cuda``, ``cuda:N``), with bf16 autocast on CUDA (``--amp``); seeded, with a checkpoint
   every ``--ckpt-every`` steps in ``--work``. A run stops cleanly, at a checkpoint, after
   ``--max-minutes`` or ``--run-steps`` or on SIGINT/SIGTERM and exits with status 75; running
   the same command again continues from the last checkpoint with the same schedule, data
   order and random state, so N short runs train the same model as one long run (bitwise on
   CPU; on CUDA up to the non-determinism of its kernels). A checkpoint refuses to resume
   under another model size, schedule or data. For a machine that is bare at each call (the
   device tool's), ``--fit-minutes`` replaces ``--steps``/``--epochs`` with as many steps as
   fit the minutes at the speed a probe measures once it settles, and ``--export-on-stop``
   exports what an early stop has (the model card's "The GPU training, step by step");
3. evaluate: the MLM loss on held-out sequences (every ``--eval-every`` steps and at the end)
   and, with ``--blimp-dev N``, word_l2r accuracy on a development sample of BLiMP: N pairs per
   paradigm drawn with a fixed seed from pairs 100-999 of each paradigm, disjoint from the
   first 100 that the README's command (``--limit 50``) and ``scripts/evaluate_demo_model.sh``
   (default 100) report. Use these two to pick size and schedule, never the reported test;
4. export: ``config.json``, ``model.safetensors`` (float16 storage, config dtype float32 so
   that it loads as float32; refused above ``--max-weights-mb``, 30 MB, the limit of the
   shipped weights), the tokenizer files (``tokenizer_config.json`` names
   ``PreTrainedTokenizerFast`` so that transformers 4 and 5 both load it) into ``--out``.

The corpus comes from ``scripts/build_demo_corpus.py``. Not run by CI; tests run it on a tiny
corpus. The defaults are the size and schedule of the first, CPU-trained pll-demo (v1: 4
layers x 256, batch 64). The shipped 6 x 384 (6 heads, batch 256, lr 7e-4) came from one
device call, the model card's "The GPU training, step by step" with ``--steps 12000
--max-minutes 6.5``; on a machine that keeps its disk, a longer training is a series of
runs of one command::

    python scripts/train_demo_model.py --corpus .demo-train/corpus.txt --prepare-only
    python scripts/train_demo_model.py --device cuda --layers 6 --hidden 384 --heads 6 \\
        --batch-size 256 --lr 7e-4 --epochs 4 --max-minutes 8 --blimp-dev 20
    # exit status 75: stopped at a checkpoint, run the same command again; 0: done, exported

On CPU, bf16 autocast is off by default: on this project's 2-core x86 machine it made the
training step slower (see the model card).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import gzip
import hashlib
import json
import lzma
import math
import os
import random
import signal
import sys
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import BertForMaskedLM

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""A masked batch: inputs, attention mask, labels, flat indices of the masked positions."""

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "pll_harness" / "models" / "pll-demo"
BLIMP_DIR = REPO_ROOT / "pll_harness" / "tasks" / "data" / "blimp"
BLIMP_REPORTED = 100  # pairs per paradigm that reported numbers use; the dev sample skips them
EXIT_RESUMABLE = 75  # stopped early with a checkpoint saved: run the same command again
PROBE_STEPS = 40  # --fit-minutes: steps in each timed window of the speed probe
PROBE_MIN_S = 10.0  # --fit-minutes: seconds of timed windows before the probe may stop
PROBE_MAX_S = 30.0  # --fit-minutes: seconds of timed windows after which it stops regardless
PROBE_SETTLED = 0.1  # --fit-minutes: it stops once a window is within this share of the two last
PROBE_MARGIN = 0.1  # --fit-minutes: the share of the time left that is kept for slower steps

# What a checkpoint must agree on to be resumed (the model, the schedule and the data).
SCHEDULE_KEYS = (
    "seed",
    "vocab_size",
    "seq_len",
    "max_position",
    "hidden",
    "layers",
    "heads",
    "dropout",
    "batch_size",
    "steps",
    "lr",
    "warmup",
    "weight_decay",
)


def read_docs(corpus: Path) -> list[list[str]]:
    docs = []
    for block in corpus.read_text(encoding="utf-8").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith("# ")]
        if lines:
            docs.append(lines)
    return docs


def is_heldout(doc: list[str], fraction: float) -> bool:
    """Whether a document is in the held-out slice: a hash of its text, so the choice does not
    depend on the document's position in the corpus."""
    digest = hashlib.blake2b("\n".join(doc).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < fraction * 2**64


# --------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(docs: list[list[str]], vocab_size: int) -> Tokenizer:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS, show_progress=False
    )
    tok.train_from_iterator((s for d in docs for s in d), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


def save_hf_tokenizer(tokenizer_json: str, out: Path, seq_len: int) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json by hand.

    transformers 5 would name its ``TokenizersBackend`` class in tokenizer_config.json, which
    transformers 4 cannot load; ``PreTrainedTokenizerFast`` loads in both.
    """
    from tokenizers import Tokenizer

    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    tok = Tokenizer.from_str(tokenizer_json)
    special = {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    }
    added = {
        str(tok.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in SPECIALS
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": seq_len,
        "do_lower_case": True,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
        "added_tokens_decoder": added,
        **special,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


# --------------------------------------------------------------------------------------------
# Data


def prepare(corpus: Path, args: argparse.Namespace) -> dict:
    """Tokenizer, held-out flags and packed sequences of a corpus, as one dict (see ``pack``)."""
    if not corpus.is_file():
        raise SystemExit(
            f"no corpus at {corpus}: build it with scripts/build_demo_corpus.py, or pass "
            "--data with a packed file made earlier (--prepare-only)."
        )
    t0 = time.time()
    docs = read_docs(corpus)
    held = [is_heldout(d, args.heldout) for d in docs]
    tok = train_tokenizer([d for d, h in zip(docs, held, strict=True) if not h], args.vocab_size)
    print(f"tokenizer trained in {time.time() - t0:.0f}s", flush=True)
    data = pack(docs, held, tok, args.seq_len)
    data["tokenizer"] = tok.to_str()
    data["corpus"] = {"name": corpus.name, "documents": len(docs), "heldout": args.heldout}
    return data


def pack(docs: list[list[str]], held: list[bool], tok: Tokenizer, seq_len: int) -> dict:
    """Greedy packing of consecutive sentences of a document into [CLS] ... [SEP] sequences.

    Returns ``tokens`` (int16, all sequences end to end), ``lengths`` (int16 per sequence) and
    ``heldout`` (bool per sequence): small, so that the file travels to a GPU machine.
    """
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if tok.get_vocab_size() > 2**15:
        raise SystemExit("vocabularies above 32,768 pieces do not fit the int16 token store")
    budget = seq_len - 2
    tokens, lengths, heldout = array("h"), array("h"), []

    def close(cur: list[int], h: bool) -> None:
        tokens.extend([cls_id, *cur, sep_id])
        lengths.append(len(cur) + 2)
        heldout.append(h)

    for doc, h in zip(docs, held, strict=True):
        cur: list[int] = []
        for e in tok.encode_batch(doc, add_special_tokens=False):
            ids = e.ids[:budget]
            if cur and len(cur) + len(ids) > budget:
                close(cur, h)
                cur = []
            cur.extend(ids)
        if cur:
            close(cur, h)
    data = {
        "tokens": torch.frombuffer(bytearray(tokens), dtype=torch.int16),
        "lengths": torch.frombuffer(bytearray(lengths), dtype=torch.int16),
        "heldout": torch.tensor(heldout, dtype=torch.bool),
        "seq_len": seq_len,
    }
    data["fingerprint"] = hashlib.blake2b(
        data["tokens"].numpy().tobytes() + data["lengths"].numpy().tobytes(), digest_size=16
    ).hexdigest()
    return data


def save_data(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".xz":
        with lzma.open(tmp, "wb", preset=6) as f:
            torch.save(data, f)
    else:
        torch.save(data, tmp)
    os.replace(tmp, path)


def load_data(path: Path) -> dict:
    """The packed data, with ``starts`` added: sequence i is ``tokens[starts[i]:starts[i+1]]``."""
    if path.suffix == ".xz":
        with lzma.open(path, "rb") as f:
            data = torch.load(f, weights_only=True)
    else:
        data = torch.load(path, weights_only=True)
    if not isinstance(data, dict) or "lengths" not in data:
        raise SystemExit(f"{path} is not packed data of this script's version: delete it")
    data["starts"] = torch.cat([torch.zeros(1, dtype=torch.long), data["lengths"].cumsum(0)])
    return data


def make_batch(
    tokens: torch.Tensor,
    starts: torch.Tensor,
    idx: Sequence[int],
    pad_id: int,
    mask_id: int,
    vocab_size: int,
    n_special: int,
    gen: torch.Generator,
    mlm_prob: float = 0.15,
) -> Batch:
    """Pad the sequences ``idx`` and mask them for MLM with the CPU generator ``gen``.

    Returns (inputs, attention mask, labels, flat indices of the masked positions).
    """
    idx = torch.as_tensor(idx)
    first = starts[idx]
    lengths = starts[idx + 1] - first
    pos = torch.arange(int(lengths.max()))
    valid = pos[None, :] < lengths[:, None]
    ids = tokens[(first[:, None] + pos[None, :]).clamp(max=len(tokens) - 1)].long()
    ids[~valid] = pad_id
    attn = valid.long()
    labels = ids.clone()
    maskable = ids >= n_special  # specials occupy ids 0..n_special-1
    prob = torch.rand(ids.shape, generator=gen)
    chosen = (prob < mlm_prob) & maskable
    labels[~chosen] = -100
    r = torch.rand(ids.shape, generator=gen)
    inputs = ids.clone()
    inputs[chosen & (r < 0.8)] = mask_id
    rand_tok = chosen & (r >= 0.8) & (r < 0.9)
    inputs[rand_tok] = torch.randint(
        n_special, vocab_size, (int(rand_tok.sum()),), generator=gen, dtype=torch.long
    )
    return inputs, attn, labels, chosen.view(-1).nonzero().squeeze(1)


def epoch_batches(
    lengths: torch.Tensor, train_ids: torch.Tensor, epoch: int, args: argparse.Namespace
) -> list[list[int]]:
    """The batches of one epoch: a seeded permutation of the training sequences, sorted by
    length inside windows of 50 batches (less padding), the batches then shuffled."""
    g = torch.Generator().manual_seed(args.seed + epoch)
    per_epoch = len(train_ids) // args.batch_size
    order = train_ids[torch.randperm(len(train_ids), generator=g)[: per_epoch * args.batch_size]]
    window = 50 * args.batch_size
    batches = []
    for w in range(0, len(order), window):
        chunk = order[w : w + window]
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches += [
            chunk[b : b + args.batch_size].tolist() for b in range(0, len(chunk), args.batch_size)
        ]
    perm = torch.randperm(len(batches), generator=g).tolist()
    return [batches[i] for i in perm]


# --------------------------------------------------------------------------------------------
# Model, schedule, evaluation, export


def build_model(vocab_size: int, args: argparse.Namespace) -> BertForMaskedLM:
    from transformers import BertConfig, BertForMaskedLM

    if args.hidden % args.heads:
        raise SystemExit(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.hidden * 4,
        max_position_embeddings=args.max_position,
        type_vocab_size=2,
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
        pad_token_id=0,
        tie_word_embeddings=True,
    )
    return BertForMaskedLM(config)


def make_optimizer(
    model: BertForMaskedLM, args: argparse.Namespace, device: torch.device
) -> torch.optim.Optimizer:
    """AdamW with the BERT recipe's betas; no weight decay on biases and LayerNorm weights."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
        fused=device.type == "cuda",
    )


def train_step(
    model: BertForMaskedLM,
    opt: torch.optim.Optimizer,
    batch: Batch,
    device: torch.device,
    amp: bool,
) -> torch.Tensor:
    """One optimiser step on ``batch`` (from ``make_batch``); returns the loss, on the device."""
    loss = mlm_loss(model, *batch, device, amp)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def fit_steps(
    model: BertForMaskedLM,
    data: dict,
    tok: Tokenizer,
    device: torch.device,
    amp: bool,
    args: argparse.Namespace,
    t_run: float,
) -> int:
    """The number of steps that end the training, its held-out evaluations included, by
    ``--fit-minutes`` after the run started, ``--fit-reserve`` seconds left for the final
    evaluation and export, at the speed ``probe_speed`` measures; ``PROBE_MARGIN`` of the time
    is kept for slower steps. Where a GPU's speed is only estimated, this spends one call's
    time on training, neither running past it nor leaving it idle."""
    windows, per_eval = probe_speed(model, data, tok, device, amp, args)
    per_step = windows[-1]
    left = args.fit_minutes * 60 - (time.time() - t_run) - args.fit_reserve
    steps = int((1 - PROBE_MARGIN) * left / (per_step + per_eval / args.eval_every))
    print(
        f"speed probe: {per_step * 1e3:.1f} ms a step (windows of {PROBE_STEPS} steps: "
        f"{', '.join(f'{w * 1e3:.1f}' for w in windows)} ms), {per_eval:.1f} s a held-out "
        f"evaluation; {left:.0f} s left for training: {steps:,d} steps",
        flush=True,
    )
    if steps < 1:
        raise SystemExit(
            f"--fit-minutes {args.fit_minutes:g} leaves no time to train after the probe and "
            f"--fit-reserve {args.fit_reserve:g} s"
        )
    return steps


def probe_batches(batches: list[list[int]], lengths: torch.Tensor) -> list[list[int]]:
    """The speed probe's untimed batches: one batch of each padded length the epoch has.

    On an H100 the first steps of each new input shape are slow (probably SDPA's cuDNN
    kernel in bf16, which builds a graph per shape; not measured in training): after 5
    untimed steps the probe measured 236 ms a step,
    the training then ran at about 34, and ``--fit-minutes 6`` trained for 33 s."""
    untimed = {}
    for batch in batches:
        untimed.setdefault(int(lengths[batch].max()), batch)
    return list(untimed.values())


def probe_windows(time_window: Callable[[int], float]) -> list[float]:
    """Seconds a step of successive windows of ``PROBE_STEPS`` steps (``time_window(k)``
    runs and times the k-th), until ``PROBE_MIN_S`` seconds have been timed and a window is
    within ``PROBE_SETTLED`` of each of the two before (of one alone, a steady speed-up of
    a few per cent a window would pass), or until the window that passes ``PROBE_MAX_S``
    seconds of timing; the last window is the training's speed.

    After the untimed steps a GPU still speeds up over a few hundred steps: on an H200 one
    window measured 37.4 ms a step, the training ran at 19 (466 k tokens/s over its first
    250 steps, 600-800 k after) and ``--fit-minutes 6`` trained for 2 of its minutes."""
    windows: list[float] = []
    while True:
        windows.append(time_window(len(windows)))
        timed = sum(windows) * PROBE_STEPS
        settled = len(windows) > 2 and all(
            abs(windows[-1] - before) <= PROBE_SETTLED * before for before in windows[-3:-1]
        )
        if timed >= PROBE_MAX_S or (timed >= PROBE_MIN_S and settled):
            return windows


def probe_speed(
    model: BertForMaskedLM,
    data: dict,
    tok: Tokenizer,
    device: torch.device,
    amp: bool,
    args: argparse.Namespace,
) -> tuple[list[float], float]:
    """Seconds a training step in each timed window (after one untimed step per batch
    length, see ``probe_batches`` and ``probe_windows``) and per held-out evaluation,
    measured on a copy of the model with its own optimiser and random generator, thrown
    away after: the training then starts from the untouched model and random state, so a
    run given the resulting ``--steps`` trains bitwise the same model.  Dropout draws from
    the global generators, which are therefore restored after the probe."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        speed = _probe_speed(model, data, tok, device, amp, args)
    if device.type == "cuda":  # the probe's copy and optimiser are gone with its frame
        torch.cuda.empty_cache()
    return speed


def _probe_speed(
    model: BertForMaskedLM,
    data: dict,
    tok: Tokenizer,
    device: torch.device,
    amp: bool,
    args: argparse.Namespace,
) -> tuple[list[float], float]:
    probe = copy.deepcopy(model)
    opt = make_optimizer(probe, args, device)
    gen = torch.Generator().manual_seed(args.seed + 2)
    train_ids = (~data["heldout"]).nonzero().squeeze(1)
    batches = epoch_batches(data["lengths"].long(), train_ids, 0, args)
    pad_id, mask_id = tok.token_to_id("[PAD]"), tok.token_to_id("[MASK]")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def step(idx: list[int]) -> None:
        batch = make_batch(
            data["tokens"], data["starts"], idx, pad_id, mask_id, tok.get_vocab_size(),
            len(SPECIALS), gen,
        )  # fmt: skip
        train_step(probe, opt, batch, device, amp)

    def time_window(k: int) -> float:
        sync()
        t0 = time.time()
        for i in range(k * PROBE_STEPS, (k + 1) * PROBE_STEPS):
            step(batches[i % len(batches)])
        sync()
        return (time.time() - t0) / PROBE_STEPS

    for idx in probe_batches(batches, data["lengths"].long()):
        step(idx)
    windows = probe_windows(time_window)
    t0 = time.time()
    eval_ids = data["heldout"].nonzero().squeeze(1)[: args.eval_seqs].tolist()
    heldout_loss(probe, data, eval_ids, tok, device, amp, args)
    return windows, time.time() - t0


def lr_at(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up over ``--warmup`` of the steps, then cosine decay to 0."""
    warm = max(1, int(args.warmup * args.steps))
    if step < warm:
        return args.lr * (step + 1) / warm
    frac = (step - warm) / max(1, args.steps - warm)
    return args.lr * max(0.0, 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def mlm_loss(
    model: BertForMaskedLM,
    inputs: torch.Tensor,
    attn: torch.Tensor,
    labels: torch.Tensor,
    sel: torch.Tensor,
    device: torch.device,
    amp: bool,
) -> torch.Tensor:
    """Mean cross-entropy over the masked positions; the MLM head runs on those positions only
    (the vocabulary projection of every position would cost about as much as the encoder)."""
    inputs, attn = inputs.to(device, non_blocking=True), attn.to(device, non_blocking=True)
    sel = sel.to(device, non_blocking=True)
    targets = labels.view(-1).to(device, non_blocking=True).index_select(0, sel)
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
        hidden = model.bert(input_ids=inputs, attention_mask=attn).last_hidden_state
        logits = model.cls(hidden.reshape(-1, hidden.shape[-1]).index_select(0, sel))
    return torch.nn.functional.cross_entropy(logits.float(), targets)


def heldout_loss(
    model: BertForMaskedLM,
    data: dict,
    ids: Sequence[int],
    tok: Tokenizer,
    device: torch.device,
    amp: bool,
    args: argparse.Namespace,
) -> float | None:
    """MLM loss on the held-out sequences ``ids`` with fixed masks (same at every call)."""
    if len(ids) == 0:
        return None
    gen = torch.Generator().manual_seed(args.seed + 1)
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for b in range(0, len(ids), args.batch_size):
            inputs, attn, labels, sel = make_batch(
                data["tokens"], data["starts"], ids[b : b + args.batch_size],
                tok.token_to_id("[PAD]"), tok.token_to_id("[MASK]"), tok.get_vocab_size(),
                len(SPECIALS), gen,
            )  # fmt: skip
            if len(sel):
                loss = mlm_loss(model, inputs, attn, labels, sel, device, amp)
                total += float(loss) * len(sel)
                count += len(sel)
    model.train(was_training)
    return total / max(1, count)


def blimp_dev_pairs(per_paradigm: int, seed: int) -> list[tuple[str, str, str]]:
    """``per_paradigm`` (good, bad, phenomenon) pairs of each BLiMP paradigm, drawn with a fixed
    seed from the pairs after the first ``BLIMP_REPORTED`` (those reported numbers use)."""
    pairs = []
    for path in sorted(BLIMP_DIR.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as rows:
            pool = [json.loads(r) for r in rows][BLIMP_REPORTED:]
        rng = random.Random(f"{seed}:{path.name}")
        for rec in rng.sample(pool, min(per_paradigm, len(pool))):
            pairs.append((rec["sentence_good"], rec["sentence_bad"], rec["linguistics_term"]))
    if not pairs:
        raise SystemExit(f"no BLiMP data under {BLIMP_DIR}")
    return pairs


def blimp_dev(
    model: BertForMaskedLM,
    tokenizer_dir: Path,
    pairs: Sequence[tuple[str, str, str]],
    device: torch.device,
) -> dict:
    """word_l2r accuracy on the development pairs, overall and by phenomenon."""
    try:
        from pll_harness.scorer import PLLScorer
    except ImportError as e:
        raise SystemExit(
            f"--blimp-dev needs pll_harness ({e}): pip install the repository, or run with "
            "PYTHONPATH set to the repository root."
        ) from None
    from transformers import AutoTokenizer

    was_training = model.training
    scorer = PLLScorer(
        model, AutoTokenizer.from_pretrained(tokenizer_dir), pll_metric="word_l2r", device=device
    )
    scores = scorer.score([s for good, bad, _ in pairs for s in (good, bad)])
    model.train(was_training)
    right: dict[str, list[bool]] = {}
    for (_, _, term), g, b in zip(pairs, scores[0::2], scores[1::2], strict=True):
        right.setdefault(term, []).append(g.logprob > b.logprob)
    flat = [r for rs in right.values() for r in rs]
    return {
        "pairs": len(flat),
        "accuracy": round(sum(flat) / len(flat), 4),
        "by_phenomenon": {t: round(sum(rs) / len(rs), 4) for t, rs in sorted(right.items())},
    }


def export(
    model: BertForMaskedLM, tokenizer_json: str, out: Path, seq_len: int, max_mb: float
) -> int:
    """Write the shipped files into ``out``; refuse weights above ``max_mb`` (10^6 bytes)."""
    from safetensors.torch import save_file

    state = {
        k: v.detach().to("cpu", torch.float16).contiguous()
        for k, v in model.state_dict().items()
        if k != "cls.predictions.decoder.weight"  # tied to the word embeddings
        and not k.endswith("position_ids")
    }
    size = sum(v.numel() * v.element_size() for v in state.values())
    if size > max_mb * 1e6:
        raise SystemExit(
            f"the weights take {size / 1e6:.1f} MB in float16, over the {max_mb:g} MB limit of "
            "the shipped model: choose a smaller --hidden/--layers/--vocab-size."
        )
    stage = out.with_name(out.name + ".export-tmp")
    stage.mkdir(parents=True, exist_ok=True)
    model.config.architectures = ["BertForMaskedLM"]
    model.config.save_pretrained(stage)
    cfg = json.loads((stage / "config.json").read_text())
    # Stored as float16 (half the size); dtype float32 in the config so that loaders upcast.
    cfg["torch_dtype"] = "float32"
    cfg["dtype"] = "float32"
    (stage / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_file(state, str(stage / "model.safetensors"), metadata={"format": "pt"})
    save_hf_tokenizer(tokenizer_json, stage, seq_len)
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(stage.iterdir()):
        os.replace(f, out / f.name)
    stage.rmdir()
    return size


# --------------------------------------------------------------------------------------------


def positive_minutes(text: str) -> float:
    """A --fit-minutes value: 0 would fit no training at all, and a falsy value was once
    taken as "not given", silently training the default steps instead; infinity fits no
    number of steps."""
    value = float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of minutes, not {text}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=REPO_ROOT / ".demo-train" / "corpus.txt")
    ap.add_argument("--work", type=Path, default=REPO_ROOT / ".demo-train" / "run")
    ap.add_argument("--data", type=Path, help="packed data file (default <work>/packed_N.pt)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument(
        "--amp",
        choices=["auto", "bf16", "off"],
        default="auto",
        help="bf16 autocast; auto = on for CUDA, off for CPU (measured slower there)",
    )
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--max-position", type=int, default=128)
    ap.add_argument("--heldout", type=float, default=0.01, help="fraction of documents")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--batch-size", type=int, default=64)
    length = ap.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="optimizer steps (default 3000)")
    length.add_argument("--epochs", type=float, help="passes over the training sequences")
    length.add_argument(
        "--fit-minutes",
        type=positive_minutes,
        help="as many steps as end the training and its evaluations this many minutes after "
        "the run starts (measured by a short speed probe; a resumed run keeps the first run's)",
    )
    ap.add_argument(
        "--fit-reserve",
        type=float,
        default=60.0,
        help="seconds of --fit-minutes kept for the final evaluation and export",
    )
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=float, default=0.05, help="fraction of the steps")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--ckpt-every", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=500, help="held-out loss every N steps")
    ap.add_argument("--eval-seqs", type=int, default=2048, help="held-out sequences scored")
    ap.add_argument("--blimp-dev", type=int, default=0, help="BLiMP dev pairs per paradigm")
    ap.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    ap.add_argument("--max-minutes", type=float, default=0, help="this run's time budget")
    ap.add_argument("--run-steps", type=int, default=0, help="stop this run after N steps")
    ap.add_argument("--max-weights-mb", type=float, default=30.0)
    ap.add_argument("--prepare-only", action="store_true", help="write --data and stop")
    ap.add_argument("--eval-only", action="store_true", help="evaluate the last checkpoint")
    ap.add_argument("--export-only", action="store_true", help="export the last checkpoint")
    ap.add_argument(
        "--export-on-stop",
        action="store_true",
        help="a run that stops early (exit 75) also evaluates and exports the weights it has: "
        "for a machine whose disk, and so the checkpoint, is gone after the run",
    )
    return ap.parse_args(argv)


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type not in ("cpu", "cuda"):
        raise SystemExit(f"--device {name}: use cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {name}: this torch sees no CUDA device; use --device cpu")
    return device


@contextlib.contextmanager
def work_lock(work: Path) -> Iterator[None]:
    """Hold ``<work>/.lock`` for the run: a second run on the same folder is refused."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another training run is using {work}; wait for it") from None
        yield


class StopSignal:
    """SIGINT/SIGTERM ask the loop to stop after the current step (with a checkpoint)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with work_lock(args.work):
        return run(args)


def run(args: argparse.Namespace) -> int:
    t_run = time.time()
    device = resolve_device(args.device)
    amp = args.amp == "bf16" or (args.amp == "auto" and device.type == "cuda")
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(args.seed)
    random.seed(args.seed)

    data_path = args.data or args.work / f"packed_{args.seq_len}.pt"
    if not data_path.exists():
        save_data(prepare(args.corpus, args), data_path)
    data = load_data(data_path)
    if data["seq_len"] != args.seq_len:
        raise SystemExit(f"{data_path} was packed for --seq-len {data['seq_len']}")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(data["tokenizer"])
    vocab_size = tok.get_vocab_size()
    starts, heldout, lengths = data["starts"], data["heldout"], data["lengths"].long()
    train_ids = (~heldout).nonzero().squeeze(1)
    eval_ids = heldout.nonzero().squeeze(1)[: args.eval_seqs].tolist()
    per_epoch = len(train_ids) // args.batch_size
    if per_epoch == 0:
        raise SystemExit(f"{len(train_ids)} training sequences make no batch of {args.batch_size}")
    if args.epochs is not None:
        args.steps = math.ceil(args.epochs * per_epoch)
    elif args.steps is None and args.fit_minutes is None:
        args.steps = 3000
    n_tokens = int(lengths[train_ids].sum())
    length = (
        f"{args.steps:,d} steps = {args.steps / per_epoch:.2f} epochs"
        if args.steps
        else f"steps to fit {args.fit_minutes:g} minutes, from a speed probe"
    )
    print(
        f"{len(train_ids):,d} training sequences ({n_tokens:,d} tokens, {per_epoch:,d} batches "
        f"an epoch), {len(eval_ids):,d} held-out sequences scored, vocab {vocab_size}; {length}",
        flush=True,
    )
    if args.prepare_only:
        return 0
    tokenizer_dir = args.work / "tokenizer-hf"
    save_hf_tokenizer(data["tokenizer"], tokenizer_dir, args.max_position)

    args.vocab_size = vocab_size
    schedule = {k: getattr(args, k) for k in SCHEDULE_KEYS}
    schedule["data"] = data["fingerprint"]
    model = build_model(vocab_size, args).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters on {device}, bf16 autocast {amp}", flush=True)
    opt = make_optimizer(model, args, device)
    ckpt = args.work / "checkpoint.pt"
    step, elapsed, history, evals = 0, 0.0, [], []
    gen = torch.Generator().manual_seed(args.seed)
    state = torch.load(ckpt, map_location="cpu", weights_only=False) if ckpt.exists() else None
    if args.fit_minutes is not None:
        if state is not None:  # the steps the first run of this training chose
            args.steps = state["schedule"]["steps"]
        else:
            args.steps = fit_steps(model, data, tok, device, amp, args, t_run)
        schedule["steps"] = args.steps
        print(f"{args.steps:,d} steps = {args.steps / per_epoch:.2f} epochs", flush=True)
    if state is not None:
        if state["schedule"] != schedule:
            diff = {
                k: (state["schedule"].get(k), v)
                for k, v in schedule.items()
                if state["schedule"].get(k) != v
            }
            raise SystemExit(
                f"{ckpt} was trained with other settings {{name: (checkpoint, now)}}: {diff}. "
                "Resume with the same arguments, or start afresh in another --work."
            )
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, elapsed = state["step"], state["elapsed"]
        history, evals = state["history"], state["evals"]
        gen.set_state(state["gen"])
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        print(f"resumed from step {step} ({elapsed / 60:.1f} min trained)", flush=True)

    meta = {
        "schedule": schedule,
        "device": str(device),
        "amp": amp,
        "parameters": n_params,
        "train_sequences": len(train_ids),
        "train_tokens": n_tokens,
        "corpus": data.get("corpus"),
    }

    def evaluate(final: bool) -> dict:
        record = {"step": step, "heldout_loss": None}
        loss = heldout_loss(model, data, eval_ids, tok, device, amp, args)
        if loss is not None:
            record["heldout_loss"] = round(loss, 4)
        if final and args.blimp_dev:
            record["blimp_dev"] = blimp_dev(
                model, tokenizer_dir, blimp_dev_pairs(args.blimp_dev, args.seed), device
            )
        print(f"eval at step {step}: {json.dumps(record)}", flush=True)
        return record

    def write_meta(extra: dict) -> None:
        meta.update(steps=step, train_seconds=round(elapsed), history=history, evals=evals)
        meta.update(extra)
        (args.work / "train_meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    if args.eval_only or args.export_only:
        if not ckpt.exists():
            raise SystemExit(f"no checkpoint in {args.work} to evaluate or export")
        if args.eval_only:
            evaluate(final=True)
        if args.export_only:
            size = export(
                model, data["tokenizer"], args.out, args.max_position, args.max_weights_mb
            )
            print(f"exported step {step} to {args.out} ({size / 1e6:.1f} MB of weights)")
        return 0

    def save_ckpt() -> float:
        t0 = time.time()
        tmp = ckpt.with_suffix(".tmp")
        torch.save(
            {
                "model": model.state_dict(),
                "opt": opt.state_dict(),
                "step": step,
                "elapsed": elapsed,
                "history": history,
                "evals": evals,
                "gen": gen.get_state(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                "schedule": schedule,
            },
            tmp,
        )
        os.replace(tmp, ckpt)
        return time.time() - t0

    cached_epoch, batches = -1, []
    pad_id, mask_id = tok.token_to_id("[PAD]"), tok.token_to_id("[MASK]")
    stop = StopSignal()
    model.train()
    run_loss = torch.zeros((), device=device)
    run_n = run_tok = 0
    start_step, reserve = step, 15.0
    t_log = t_last = time.time()
    why = None
    try:
        while step < args.steps:
            epoch, pos = divmod(step, per_epoch)
            if epoch != cached_epoch:
                cached_epoch, batches = epoch, epoch_batches(lengths, train_ids, epoch, args)
            inputs, attn, labels, sel = make_batch(
                data["tokens"], starts, batches[pos], pad_id, mask_id, vocab_size,
                len(SPECIALS), gen,
            )  # fmt: skip
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args)
            loss = train_step(model, opt, (inputs, attn, labels, sel), device, amp)
            step += 1
            run_loss += loss.detach()
            run_n += 1
            run_tok += int(attn.sum())
            if step % args.log_every == 0 or step == args.steps:
                mean = float(run_loss) / run_n  # synchronises with the device
                now = time.time()
                history.append([step, round(mean, 4)])
                eta = (args.steps - step) * (now - t_log) / run_n / 60
                print(
                    f"step {step}/{args.steps} ep {epoch} loss {mean:.3f} "
                    f"lr {lr_at(step - 1, args):.2e} {run_tok / (now - t_log):.0f} tok/s "
                    f"trained {(elapsed + now - t_last) / 60:.1f} min eta {eta:.1f} min",
                    flush=True,
                )
                run_loss.zero_()
                run_n = run_tok = 0
                t_log = time.time()
            now = time.time()
            elapsed += now - t_last
            t_last = now
            if step % args.eval_every == 0 and step < args.steps:
                evals.append(evaluate(final=False))
                t_last = time.time()
            if stop.received is not None:
                why = f"signal {stop.received}"
            elif args.run_steps and step - start_step >= args.run_steps:
                why = f"--run-steps {args.run_steps}"
            elif args.max_minutes and time.time() - t_run > args.max_minutes * 60 - reserve:
                why = f"--max-minutes {args.max_minutes:g}"
            if step % args.ckpt_every == 0 or step == args.steps or why:
                reserve = max(reserve, 3 * save_ckpt() + 10)
                t_last = time.time()
            if why:
                break
    finally:
        stop.restore()
    complete = step >= args.steps
    if not complete:
        write_meta({"complete": False})
        print(
            f"stopped at step {step}/{args.steps} ({why}) after {elapsed / 60:.1f} min of "
            f"training; checkpoint saved: run the same command again to continue",
            flush=True,
        )
        if not args.export_on_stop:
            return EXIT_RESUMABLE
    model.eval()
    evals.append(evaluate(final=True))
    size = export(model, data["tokenizer"], args.out, args.max_position, args.max_weights_mb)
    final_loss = history[-1][1] if history else None
    write_meta({"complete": complete, "weights_bytes": size, "final_loss": final_loss})
    print(f"exported step {step} to {args.out} ({size / 1e6:.1f} MB of weights)", flush=True)
    return 0 if complete else EXIT_RESUMABLE


if __name__ == "__main__":
    sys.exit(main())
