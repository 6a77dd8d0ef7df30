#!/usr/bin/env python3
"""Train the embedded demo model ``pll_harness/models/pll-demo`` from the demo corpus.

Steps (each skipped when its output already exists, so the script can be re-run to resume):

1. train a lowercasing WordPiece tokenizer on the corpus (``tokenizers``);
2. tokenize the corpus and pack consecutive sentences of a document into sequences of at
   most ``--seq-len`` tokens (``[CLS] s1 s2 ... [SEP]``);
3. train a small BERT (``BertForMaskedLM``) with masked-language modelling (15 %, 80/10/10)
   in a plain torch loop, on CPU, seeded, with a checkpoint every ``--ckpt-every`` steps
   (model, optimiser, scheduler, RNG states, step) in ``--work``; a stopped run resumes from
   the last checkpoint;
4. export: ``config.json``, ``model.safetensors`` (float16 storage, config dtype float32 so
   that it loads as float32), the tokenizer files (``tokenizer_config.json`` names
   ``PreTrainedTokenizerFast`` so that transformers 4 and 5 both load it) into ``--out``.

The corpus comes from ``scripts/build_demo_corpus.py``. Not run by CI or tests.

Usage::

    nice -n 10 python scripts/train_demo_model.py --corpus /work/demo-train/corpus.txt \\
        --work /work/demo-train/run --steps 3000
    python scripts/train_demo_model.py --export-only ...   # write the shipped files
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "pll_harness" / "models" / "pll-demo"


def read_docs(corpus: Path) -> list[list[str]]:
    docs = []
    for block in corpus.read_text(encoding="utf-8").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith("# ")]
        if lines:
            docs.append(lines)
    return docs


# --------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(docs: list[list[str]], vocab_size: int, seq_len: int, path: Path):
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
    tok.save(str(path))
    return tok


def save_hf_tokenizer(tok_json: Path, out: Path, seq_len: int) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json by hand.

    transformers 5 would name its ``TokenizersBackend`` class in tokenizer_config.json, which
    transformers 4 cannot load; ``PreTrainedTokenizerFast`` loads in both.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(tok_json.read_text(encoding="utf-8"), encoding="utf-8")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_json))
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


def pack(docs: list[list[str]], tok, seq_len: int) -> list[list[int]]:
    """Greedy packing of consecutive sentences of a document into [CLS] ... [SEP] sequences."""
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    budget = seq_len - 2
    seqs = []
    for doc in docs:
        encs = tok.encode_batch(doc, add_special_tokens=False)
        cur: list[int] = []
        for e in encs:
            ids = e.ids[:budget]
            if cur and len(cur) + len(ids) > budget:
                seqs.append([cls_id, *cur, sep_id])
                cur = []
            cur.extend(ids)
        if cur:
            seqs.append([cls_id, *cur, sep_id])
    return seqs


def make_batch(seqs, pad_id, mask_id, vocab_size, n_special, gen, mlm_prob=0.15):
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    attn = (ids != pad_id).long()
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
    return inputs, attn, labels


# --------------------------------------------------------------------------------------------


def build_model(vocab_size: int, args):
    from transformers import BertConfig, BertForMaskedLM

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


def lr_at(step: int, args) -> float:
    warm = max(1, int(args.warmup * args.steps))
    if step < warm:
        return args.lr * (step + 1) / warm
    frac = (step - warm) / max(1, args.steps - warm)
    return args.lr * max(0.0, 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def export(model, work: Path, out: Path, seq_len: int, meta: dict) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    model.config.architectures = ["BertForMaskedLM"]
    model.config.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    # Stored as float16 (half the size); dtype float32 in the config so that loaders upcast.
    cfg["torch_dtype"] = "float32"
    cfg["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    state = {
        k: v.detach().to(torch.float16).contiguous()
        for k, v in model.state_dict().items()
        if k != "cls.predictions.decoder.weight"  # tied to the word embeddings
        and not k.endswith("position_ids")
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    save_hf_tokenizer(work / "tokenizer.json", out, seq_len)
    (work / "export_meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path("/work/demo-train/corpus.txt"))
    ap.add_argument("--work", type=Path, default=Path("/work/demo-train/run"))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--max-position", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--ckpt-every", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (and checkpoint) after")
    ap.add_argument("--export-only", action="store_true")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    args.work.mkdir(parents=True, exist_ok=True)

    from tokenizers import Tokenizer

    tok_path = args.work / "tokenizer.json"
    data_path = args.work / f"packed_{args.seq_len}.pt"
    if not tok_path.exists() or not data_path.exists():
        docs = read_docs(args.corpus)
        if not tok_path.exists():
            t0 = time.time()
            train_tokenizer(docs, args.vocab_size, args.seq_len, tok_path)
            print(f"tokenizer trained in {time.time() - t0:.0f}s", flush=True)
        tok = Tokenizer.from_file(str(tok_path))
        seqs = pack(docs, tok, args.seq_len)
        torch.save(seqs, data_path)
    tok = Tokenizer.from_file(str(tok_path))
    seqs = torch.load(data_path)
    vocab_size = tok.get_vocab_size()
    n_tokens = sum(len(s) for s in seqs)
    print(f"{len(seqs):,d} sequences, {n_tokens:,d} tokens, vocab {vocab_size}", flush=True)

    model = build_model(vocab_size, args)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    ckpt = args.work / "checkpoint.pt"
    step, elapsed, history = 0, 0.0, []
    gen = torch.Generator().manual_seed(args.seed)
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, elapsed, history = state["step"], state["elapsed"], state["history"]
        gen.set_state(state["gen"])
        torch.set_rng_state(state["torch_rng"])
        print(f"resumed from step {step} ({elapsed / 60:.1f} min trained)", flush=True)

    meta = {
        "steps": step,
        "train_seconds": round(elapsed),
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "lr": args.lr,
        "parameters": n_params,
        "sequences": len(seqs),
        "corpus_tokens": n_tokens,
        "final_loss": history[-1][1] if history else None,
        "history": history,
        "threads": args.threads,
    }
    if args.export_only:
        export(model, args.work, args.out, args.max_position, meta)
        print(f"exported to {args.out}")
        return 0

    def save_ckpt():
        tmp = ckpt.with_suffix(".tmp")
        torch.save(
            {
                "model": model.state_dict(),
                "opt": opt.state_dict(),
                "step": step,
                "elapsed": elapsed,
                "history": history,
                "gen": gen.get_state(),
                "torch_rng": torch.get_rng_state(),
                "args": {k: str(v) for k, v in vars(args).items()},
            },
            tmp,
        )
        os.replace(tmp, ckpt)

    # Epoch order: a seeded permutation per epoch, so the position follows from the step.
    # Sequences are sorted by length inside windows of 50 batches to cut padding.
    per_epoch = len(seqs) // args.batch_size
    lengths = torch.tensor([len(s) for s in seqs])

    def epoch_batches(epoch: int) -> list[list[int]]:
        g = torch.Generator().manual_seed(args.seed + epoch)
        order = torch.randperm(len(seqs), generator=g)[: per_epoch * args.batch_size]
        window = 50 * args.batch_size
        batches = []
        for w in range(0, len(order), window):
            chunk = order[w : w + window]
            chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
            batches += [
                chunk[b : b + args.batch_size].tolist()
                for b in range(0, len(chunk), args.batch_size)
            ]
        perm = torch.randperm(len(batches), generator=g).tolist()
        return [batches[i] for i in perm]

    cached_epoch, batches = -1, []
    pad_id, mask_id = tok.token_to_id("[PAD]"), tok.token_to_id("[MASK]")
    model.train()
    t_start, run_loss, run_n, run_tok = time.time(), 0.0, 0, 0
    t_last = time.time()
    while step < args.steps:
        epoch, pos = divmod(step, per_epoch)
        if epoch != cached_epoch:
            cached_epoch, batches = epoch, epoch_batches(epoch)
        idx = batches[pos]
        inputs, attn, labels = make_batch(
            [seqs[i] for i in idx], pad_id, mask_id, vocab_size, len(SPECIALS), gen
        )
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        # The MLM head only on the masked positions: the vocabulary projection of all
        # positions would cost about as much as the encoder itself.
        hidden = model.bert(input_ids=inputs, attention_mask=attn).last_hidden_state
        sel = labels != -100
        loss = torch.nn.functional.cross_entropy(model.cls(hidden[sel]), labels[sel])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        now = time.time()
        elapsed += now - t_last
        t_last = now
        run_loss += loss.item()
        run_n += 1
        run_tok += int(attn.sum())
        if step % args.log_every == 0 or step == args.steps:
            rate = run_tok / (now - t_start)
            eta = (args.steps - step) * (now - t_start) / run_n / 60
            history.append([step, round(run_loss / run_n, 4)])
            print(
                f"step {step}/{args.steps} ep {epoch} loss {run_loss / run_n:.3f} "
                f"lr {lr_at(step - 1, args):.2e} {rate:.0f} tok/s "
                f"trained {elapsed / 60:.1f} min eta {eta:.1f} min",
                flush=True,
            )
            t_start, run_loss, run_n, run_tok = time.time(), 0.0, 0, 0
        if step % args.ckpt_every == 0 or step == args.steps:
            save_ckpt()
        if args.max_minutes and elapsed > args.max_minutes * 60:
            save_ckpt()
            print(f"stopping at step {step} after {elapsed / 60:.1f} min", flush=True)
            break
    meta.update(steps=step, train_seconds=round(elapsed), history=history)
    meta["final_loss"] = history[-1][1] if history else None
    (args.work / "train_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if step >= args.steps:
        model.eval()
        export(model, args.work, args.out, args.max_position, meta)
        print(f"exported to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
