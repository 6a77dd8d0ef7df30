"""Build the two tiny masked-LM fixtures under ``tests/fixtures/models/`` (offline, deterministic).

What it makes (each well under 2 MB, committed to the repository):

* ``tiny-bert-wordpiece/``: ``BertForMaskedLM`` + cased WordPiece tokenizer (BERT normalizer and
  pre-tokenizer, ``[PAD] [UNK] [CLS] [SEP] [MASK]`` = ids 0-4, ``[CLS] $A [SEP]`` post-processor).
* ``tiny-roberta-bpe/``: ``RobertaForMaskedLM`` + byte-level BPE tokenizer (``<s> <pad> </s> <unk>
  <mask>`` = ids 0-4, ``add_prefix_space=False``, ``trim_offsets=True``, RoBERTa post-processor).

Both models: hidden 64, 2 layers, 2 heads, intermediate 128. BERT has 64 positions; RoBERTa has 66
because RoBERTa numbers positions from ``pad_token_id + 1``. Tokenizers have
``model_max_length=64``. The small position tables are on purpose: tests of over-long inputs use
them.

Why tiny and trained: tests need real checkpoints that load through ``AutoTokenizer`` (fast, with
``word_ids()``) and ``AutoModelForMaskedLM`` without the Hugging Face Hub, yet whose predictions are
not uniform (so scores discriminate and frequent tokens are often the argmax of their own masked
prediction). The tokenizer vocabularies are small (700 WordPiece, 800 BPE) so that words such as
``hooligan`` and ``souvenir`` split into several pieces, which within-word masking tests need.

The vocabularies are learned by a small BPE loop here (``learn_merges``) and assembled into
``tokenizers`` objects; the ``tokenizers`` trainers are not used because their tie-breaking
follows per-process hash-map order: two runs of its WordPiece trainer gave different vocabularies.
WordPiece also gets every ASCII letter, digit and punctuation mark, so BLiMP text never hits
``[UNK]`` (a word holding a non-ASCII letter does become a single ``[UNK]``).

Why the tokenizer_config.json is patched: transformers 5 writes ``"tokenizer_class":
"TokenizersBackend"``, which transformers 4 (the minicons reference environment) cannot load. We
name ``BertTokenizerFast`` / ``RobertaTokenizerFast`` instead (both versions know these names;
transformers 5 aliases them to its ``BertTokenizer`` / ``RobertaTokenizer``), and spell out the
special tokens and options so that both versions rebuild the very pipeline in ``tokenizer.json``.

Training text: ``tests/fixtures/tiny_corpus.py`` (template English, no BLiMP sentences).

Run from the repository root, in the main venv (transformers 5):

    nice python scripts/build_tiny_models.py

Everything is seeded and runs on one CPU thread: two rebuilds (torch 2.13.0 CPU, transformers
5.23, tokenizers 0.23) gave byte-identical files. Training takes 2-3 minutes per model on a small
shared CPU (~350 s of CPU in all).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertTokenizerFast,
    PreTrainedModel,
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaTokenizerFast,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES))

from tiny_corpus import corpus_sentences  # noqa: E402

SEED = 1234
MODEL_MAX_LENGTH = 64
HIDDEN = 64
LAYERS = 2
HEADS = 2
INTERMEDIATE = 128
SIZES = {
    "hidden_size": HIDDEN,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS,
    "intermediate_size": INTERMEDIATE,
}
"""The encoder sizes every tiny fixture shares (``build_tiny_sentencepiece.py`` too)."""
ROBERTA_LAYOUT = {
    "max_position_embeddings": MODEL_MAX_LENGTH + 2,
    "type_vocab_size": 1,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
}
"""What RoBERTa and XLM-R configs share: fairseq's special ids ``<s> <pad> </s>`` = 0-2,
and positions counted from ``pad_token_id + 1``, so two more rows than usable positions."""
BERT_VOCAB = 700  # the corpus has ~300 word types: 800 would hold nearly all of them whole
ROBERTA_VOCAB = 800  # 256 byte symbols + 5 specials + merges
TRAIN_STEPS = 2500
BATCH_SIZE = 32
LEARNING_RATE = 2e-3

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

# Words that must be split into 2+ pieces by both tokenizers (checked after training).
MULTI_PIECE_WORDS = ["hooligan", "souvenir"]


@dataclass(frozen=True)
class Spec:
    """One fixture: its folder name and the special tokens the MLM loop must know about."""

    name: str
    mask_token: str
    pad_token: str


def learn_merges(
    word_counts: Counter[tuple[str, ...]],
    vocab: list[str],
    size: int,
    join: Callable[[str, str], str],
) -> list[tuple[str, str]]:
    """Greedy BPE: merge the most frequent adjacent pair until ``vocab`` holds ``size`` entries.

    Why our own loop instead of the ``tokenizers`` trainers: their tie-breaking follows Rust
    hash-map order, which changes from process to process (two runs of the WordPiece trainer gave
    different vocabularies), so the fixtures would not rebuild identically. Here ties go to the
    lexicographically smallest pair. ``vocab`` is extended in place; the merges are returned in
    order (byte-level BPE needs them, WordPiece only needs the vocabulary).
    """
    known = set(vocab)
    words = Counter(word_counts)
    merges: list[tuple[str, str]] = []
    while len(vocab) < size:
        pairs: Counter[tuple[str, str]] = Counter()
        for symbols, count in words.items():
            for pair in itertools.pairwise(symbols):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merged = join(*best)
        merges.append(best)
        if merged not in known:
            vocab.append(merged)
            known.add(merged)
        rewritten: Counter[tuple[str, ...]] = Counter()
        for symbols, count in words.items():
            rewritten[tuple(merge_pair(symbols, best, merged))] += count
        words = rewritten
    return merges


def merge_pair(symbols: Sequence[str], pair: tuple[str, str], merged: str) -> list[str]:
    """``symbols`` with each occurrence of ``pair``, left to right, replaced by ``merged``."""
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(merged)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def pre_tokenized_words(tok: Tokenizer, texts: list[str]) -> Counter[str]:
    """Count the words the tokenizer's own normalizer and pre-tokenizer produce."""
    counts: Counter[str] = Counter()
    for text in texts:
        if tok.normalizer is not None:
            text = tok.normalizer.normalize_str(text)
        counts.update(word for word, _ in tok.pre_tokenizer.pre_tokenize_str(text))
    return counts


def train_bert_tokenizer(corpus: list[str]) -> Tokenizer:
    """Train a cased WordPiece tokenizer with the pipeline ``BertTokenizerFast`` rebuilds."""
    tok = Tokenizer(models.WordPiece({"[UNK]": 0}, unk_token="[UNK]"))
    # Same settings BertTokenizer(Fast)(do_lower_case=False) applies in transformers 4 and 5.
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=False
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    # Every ASCII letter and digit, doubled, so that both "x" and "##x" are in the vocabulary:
    # otherwise a word holding a character unseen in the corpus (e.g. a capital "U") would become
    # a single [UNK], which the BLiMP evaluation sentences should never hit.
    # Punctuation is always split off by the pre-tokenizer, so its bare form suffices.
    alphabet_line = " ".join(c * 2 for c in string.ascii_letters + string.digits)
    punctuation_line = " ".join(string.punctuation)
    counts = pre_tokenized_words(tok, [*corpus, alphabet_line, punctuation_line])
    word_symbols: Counter[tuple[str, ...]] = Counter()
    for word, count in counts.items():
        word_symbols[(word[0], *(f"##{c}" for c in word[1:]))] += count
    alphabet = sorted({symbol for symbols in word_symbols for symbol in symbols})
    vocab = [*BERT_SPECIALS, *alphabet]
    learn_merges(word_symbols, vocab, BERT_VOCAB, lambda a, b: a + b.removeprefix("##"))
    tok.model = models.WordPiece(
        {token: i for i, token in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in BERT_SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab.index("[CLS]")), ("[SEP]", vocab.index("[SEP]"))],
    )
    return tok


def train_roberta_tokenizer(corpus: list[str]) -> Tokenizer:
    """Train a byte-level BPE tokenizer with the pipeline ``RobertaTokenizerFast`` rebuilds."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    counts = pre_tokenized_words(tok, corpus)
    word_symbols = Counter({tuple(word): count for word, count in counts.items()})
    # All 256 byte symbols, so that no input is ever unknown.
    vocab = [*ROBERTA_SPECIALS, *sorted(pre_tokenizers.ByteLevel.alphabet())]
    merges = learn_merges(word_symbols, vocab, ROBERTA_VOCAB, lambda a, b: a + b)
    tok.model = models.BPE(
        {token: i for i, token in enumerate(vocab)},
        merges,
        continuing_subword_prefix="",
        end_of_word_suffix="",
        fuse_unk=False,
    )
    tok.decoder = decoders.ByteLevel()
    # As in real RoBERTa, "<mask>" swallows the space before it ("A <mask>" -> "A", "<mask>").
    # Both transformers 4 and 5 honour this flag from tokenizer.json.
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False, lstrip=t == "<mask>")
            for t in ROBERTA_SPECIALS
        ]
    )
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", vocab.index("</s>")),
        ("<s>", vocab.index("<s>")),
        trim_offsets=True,
        add_prefix_space=False,
    )
    return tok


def save_tokenizer(tok: Tokenizer, kind: str, out: Path) -> None:
    """Save through transformers 5, then make ``tokenizer_config.json`` loadable by 4 and 5.

    Wrapping in the model-specific class (rather than saving ``tokenizer.json`` alone) gives the
    ``added_tokens_decoder`` entries with the right flags (e.g. RoBERTa's ``<mask>`` strips the
    space on its left), which both transformers versions read.
    """
    vocab = tok.get_vocab()
    if kind == "bert":
        hf_tok = BertTokenizerFast(
            vocab=vocab, do_lower_case=False, model_max_length=MODEL_MAX_LENGTH
        )
        extra = {
            "tokenizer_class": "BertTokenizerFast",
            "do_lower_case": False,
            "tokenize_chinese_chars": True,
            "strip_accents": None,
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        }
    else:
        raw_merges = json.loads(tok.to_str())["model"]["merges"]
        merges_list = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in raw_merges]
        hf_tok = RobertaTokenizerFast(
            vocab=vocab,
            merges=merges_list,
            add_prefix_space=False,
            trim_offsets=True,
            model_max_length=MODEL_MAX_LENGTH,
        )
        extra = {
            "tokenizer_class": "RobertaTokenizerFast",
            "add_prefix_space": False,
            "trim_offsets": True,
            "errors": "replace",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "sep_token": "</s>",
            "cls_token": "<s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
        }
    _check_same_pipeline(tok, hf_tok.backend_tokenizer, kind)
    hf_tok.save_pretrained(str(out))
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(extra)
    cfg["model_max_length"] = MODEL_MAX_LENGTH
    cfg["clean_up_tokenization_spaces"] = False
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    # The trained tokenizer.json is the reference; keep it rather than the re-serialised one.
    tok.save(str(out / "tokenizer.json"))


def _check_same_pipeline(tok: Tokenizer, rebuilt: Tokenizer, kind: str) -> None:
    """Fail if the transformers class would tokenize differently from our trained tokenizer."""
    probes = [
        "The hooligan wrecked the souvenir.",
        "Who should Derek hug after shocking Richard?",
        "  Café  naïve, x-ray's 3.5% (ok)!",
    ]
    for text in probes:
        a, b = tok.encode(text), rebuilt.encode(text)
        if a.ids != b.ids or a.offsets != b.offsets:
            raise RuntimeError(f"{kind}: class rebuild differs on {text!r}: {a.tokens}, {b.tokens}")


def make_model(kind: str, vocab_size: int) -> PreTrainedModel:
    """Create an untrained tiny MLM with the sizes described in the module docstring."""
    if kind == "bert":
        return BertForMaskedLM(
            BertConfig(
                vocab_size=vocab_size,
                **SIZES,
                max_position_embeddings=MODEL_MAX_LENGTH,
                pad_token_id=0,
            )
        )
    return RobertaForMaskedLM(RobertaConfig(vocab_size=vocab_size, **SIZES, **ROBERTA_LAYOUT))


def train_mlm(model: PreTrainedModel, tok: Tokenizer, corpus: list[str], spec: Spec) -> float:
    """Short, seeded MLM training (BERT recipe: 15% targets, 80/10/10); returns the last loss."""
    gen = torch.Generator().manual_seed(SEED)
    encoded = [tok.encode(s) for s in corpus]
    pad_id, mask_id = tok.token_to_id(spec.pad_token), tok.token_to_id(spec.mask_token)
    n_special = 5
    vocab_size = tok.get_vocab_size()
    optim = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda step: min(1.0, (step + 1) / 100) * max(0.05, 1 - step / TRAIN_STEPS)
    )
    model.train()
    loss_val = float("nan")
    for _step in range(TRAIN_STEPS):
        idx = torch.randint(len(encoded), (BATCH_SIZE,), generator=gen).tolist()
        batch = [encoded[i] for i in idx]
        width = max(len(e.ids) for e in batch)
        ids = torch.full((BATCH_SIZE, width), pad_id)
        special = torch.ones((BATCH_SIZE, width), dtype=torch.bool)
        for row, enc in enumerate(batch):
            ids[row, : len(enc.ids)] = torch.tensor(enc.ids)
            special[row, : len(enc.ids)] = torch.tensor(enc.special_tokens_mask, dtype=torch.bool)
        attention = (ids != pad_id).long()
        chosen = (torch.rand(ids.shape, generator=gen) < 0.15) & ~special
        labels = torch.where(chosen, ids, torch.tensor(-100))
        roll = torch.rand(ids.shape, generator=gen)
        inputs = ids.clone()
        inputs[chosen & (roll < 0.8)] = mask_id
        random_tokens = torch.randint(n_special, vocab_size, ids.shape, generator=gen)
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        inputs[swap] = random_tokens[swap]
        out = model(input_ids=inputs, attention_mask=attention, labels=labels)
        optim.zero_grad()
        out.loss.backward()
        optim.step()
        sched.step()
        loss_val = float(out.loss.detach())
    model.eval()
    return loss_val


def self_argmax_rate(
    model: PreTrainedModel, tok: Tokenizer, corpus: list[str], spec: Spec
) -> float:
    """Fraction of masked positions (first 100 sentences) whose argmax is the true token."""
    mask_id = tok.token_to_id(spec.mask_token)
    hits = total = 0
    with torch.no_grad():
        for text in corpus[:100]:
            enc = tok.encode(text)
            for pos, is_special in enumerate(enc.special_tokens_mask):
                if is_special:
                    continue
                ids = torch.tensor([enc.ids])
                ids[0, pos] = mask_id
                pred = int(model(input_ids=ids).logits[0, pos].argmax())
                hits += pred == enc.ids[pos]
                total += 1
    return hits / total


def verify_saved(out: Path, tok: Tokenizer, kind: str) -> None:
    """Reload through the Auto classes and check fastness, specials, splits and word_ids()."""
    hf_tok = AutoTokenizer.from_pretrained(str(out))
    assert hf_tok.is_fast, f"{out}: not a fast tokenizer"
    assert hf_tok.model_max_length == MODEL_MAX_LENGTH
    text = "The hooligan wrecked the souvenir."
    enc = hf_tok(text)
    ref = tok.encode(text)
    assert enc["input_ids"] == ref.ids, (enc["input_ids"], ref.ids)
    first, last = ("[CLS]", "[SEP]") if kind == "bert" else ("<s>", "</s>")
    tokens = hf_tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == first and tokens[-1] == last, tokens
    assert hf_tok.mask_token == ("[MASK]" if kind == "bert" else "<mask>")
    words = enc.word_ids()
    assert words[0] is None and words[-1] is None, words
    for word in MULTI_PIECE_WORDS:
        # Inside a sentence (after a space for byte-level BPE), as scoring will see it.
        pieces = hf_tok.tokenize(f"The {word}")[1:]
        assert len(pieces) >= 2, f"{out.name}: {word!r} is a single piece {pieces}"
    model = AutoModelForMaskedLM.from_pretrained(str(out))
    assert model.config.max_position_embeddings == MODEL_MAX_LENGTH + (0 if kind == "bert" else 2)
    print(f"  {out.name}: {tokens}")


def build(kind: str, corpus: list[str], out_root: Path) -> None:
    """Train tokenizer and model for one fixture, save to ``out_root/<name>`` and verify."""
    spec = (
        Spec("tiny-bert-wordpiece", "[MASK]", "[PAD]")
        if kind == "bert"
        else Spec("tiny-roberta-bpe", "<mask>", "<pad>")
    )
    out = fresh_folder(out_root / spec.name)
    tok = train_bert_tokenizer(corpus) if kind == "bert" else train_roberta_tokenizer(corpus)
    save_tokenizer(tok, kind, out)
    model = make_model(kind, tok.get_vocab_size())
    train_save_report(model, tok, corpus, spec, out, lambda: verify_saved(out, tok, kind))


def fresh_folder(out: Path) -> Path:
    """``out``, empty, with the seeds reset: a fixture builds the same whatever ran before."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    random.seed(SEED)
    torch.manual_seed(SEED)
    return out


def train_save_report(
    model: PreTrainedModel,
    tok: Tokenizer,
    corpus: list[str],
    spec: Spec,
    out: Path,
    verify: Callable[[], None],
) -> None:
    """Train the model, save it beside its tokenizer, ``verify`` the folder, report."""
    start = time.time()
    loss = train_mlm(model, tok, corpus, spec)
    rate = self_argmax_rate(model, tok, corpus, spec)
    model.save_pretrained(str(out))
    verify()
    size = sum(p.stat().st_size for p in out.iterdir())
    print(
        f"  {spec.name}: vocab {tok.get_vocab_size()}, final loss {loss:.3f}, "
        f"self-argmax {rate:.1%}, {time.time() - start:.0f}s, {size / 1e6:.2f} MB"
    )


def main() -> None:
    """Parse arguments and build the requested fixtures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURES / "models")
    parser.add_argument("--only", choices=["bert", "roberta"], default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # determinism and politeness on shared CPUs
    torch.use_deterministic_algorithms(True)
    corpus = corpus_sentences()
    for kind in ["bert", "roberta"]:
        if args.only in (None, kind):
            print(f"building {kind}")
            build(kind, corpus, args.out)


if __name__ == "__main__":
    main()
