"""Build ``tests/fixtures/models/tiny-xlmr-unigram/`` (offline, deterministic): a tiny
``XLMRobertaForMaskedLM`` with a sentencepiece-style tokenizer (Unigram pieces, Metaspace).

Why a third fixture: sentencepiece tokenizers (XLM-R, DeBERTa-v3, ALBERT, CamemBERT) form words
differently from WordPiece and byte-level BPE: ``▁`` marks a word's start and punctuation stays in
the word before it (``▁s o u v e n i r .`` is one word), so the word-level metrics need a test of
their own on such a tokenizer.

The tokenizer is the pipeline ``XLMRobertaTokenizer`` builds in transformers 5 (``WhitespaceSplit``
then ``Metaspace(prepend_scheme="always")``, no normalizer, ``<s> $A </s>``), which is also what a
real XLM-R checkpoint gets: its class rebuilds the pipeline and reads only the vocabulary from
``tokenizer.json``. ``<s> <pad> </s> <unk> <mask>`` are ids 0-4.

The vocabulary: every character of the training text and of ASCII, then pieces from the same
deterministic BPE loop as the other fixtures (``learn_merges`` in ``scripts/build_tiny_models.py``:
the ``tokenizers`` Unigram trainer gave a different vocabulary on each run). Each piece's Unigram
score is the log of its smoothed count in the BPE segmentation of the training text. 600 pieces
keep ``hooligan`` and ``souvenir`` in several pieces.

Training text: ``tests/fixtures/tiny_corpus.py`` plus the non-ASCII sentences below (written for
this project), so that accented letters and typographic quotes are pieces, not ``<unk>``.

Why the tokenizer_config.json is patched: transformers 5 writes ``"tokenizer_class":
"XLMRobertaTokenizer"``, which in transformers 4 (the minicons reference environment) is the slow
class that needs a ``sentencepiece.bpe.model`` file this folder does not have; 4 turns it into the
fast class only when asked for a fast tokenizer. We name ``XLMRobertaTokenizerFast`` instead, as
the other fixtures name their fast classes: 4 then always loads ``tokenizer.json`` as it is, and 5
aliases the name to its ``XLMRobertaTokenizer``, which rebuilds the same pipeline.

Model: hidden 64, 2 layers, 2 heads, intermediate 128, 66 positions (XLM-R counts from
``pad_token_id + 1``), ``model_max_length`` 64, trained like the other fixtures.

Run from the repository root, in the main venv (transformers 5), about 3 minutes:

    nice python scripts/build_tiny_sentencepiece.py
"""

from __future__ import annotations

import argparse
import json
import math
import string
from collections import Counter
from pathlib import Path

import torch
from build_tiny_models import (  # puts tests/fixtures on sys.path, for tiny_corpus
    FIXTURES,
    MODEL_MAX_LENGTH,
    MULTI_PIECE_WORDS,
    ROBERTA_LAYOUT,
    SIZES,
    Spec,
    fresh_folder,
    learn_merges,
    merge_pair,
    pre_tokenized_words,
    train_save_report,
)
from tiny_corpus import corpus_sentences
from tokenizers import Tokenizer
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
    XLMRobertaTokenizer,
)

NAME = "tiny-xlmr-unigram"
VOCAB_SIZE = 600
# Written over what transformers 5 saves in tokenizer_config.json (see the module docstring).
CONFIG_OVERRIDES = {
    "tokenizer_class": "XLMRobertaTokenizerFast",
    "clean_up_tokenization_spaces": False,
}
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
NON_ASCII = [
    "The naïve fiancé ordered crème brûlée at the café.",
    "Zoë and Chloé visited the Müller family in Zürich.",
    "The señor paid 5 € for the jalapeño piñata.",
    "Renée’s résumé mentioned the façade of the hôtel.",
    "Björn said “déjà vu” after the soirée.",
    "The café near the façade was naïve.",
]
NON_ASCII_REPEATS = 5
PROBES = [
    "The hooligan wrecked the souvenir.",
    "Who should Derek hug after shocking Richard?",
    "Renée’s naïve fiancé ate crème brûlée at the café.",
    "  Café  naïve, x-ray's 3.5% (ok)!",
]


def training_text() -> list[str]:
    """The template corpus and the non-ASCII sentences, in a fixed order."""
    return corpus_sentences() + NON_ASCII * NON_ASCII_REPEATS


def unigram_vocab(texts: list[str], pipeline: Tokenizer) -> list[tuple[str, float]]:
    """Specials, then single characters, then BPE pieces, each with a log-frequency score."""
    words = pre_tokenized_words(pipeline, texts)
    alphabet_text = "".join(words) + string.ascii_letters + string.digits + string.punctuation
    alphabet = sorted(set(alphabet_text))
    pieces = list(alphabet)
    merges = learn_merges(
        Counter({tuple(word): count for word, count in words.items()}),
        pieces,
        VOCAB_SIZE - len(SPECIALS),
        lambda a, b: a + b,
    )
    counts = Counter({piece: 1 for piece in pieces})  # add-one: every piece is possible
    for word, count in words.items():
        for piece in apply_merges(word, merges):
            counts[piece] += count
    total = sum(counts.values())
    scored = [(piece, math.log(counts[piece] / total)) for piece in pieces]
    return [(token, 0.0) for token in SPECIALS] + scored


def apply_merges(word: str, merges: list[tuple[str, str]]) -> list[str]:
    """The BPE segmentation of one pre-tokenized word (merges in the order learned)."""
    symbols = list(word)
    for left, right in merges:
        symbols = merge_pair(symbols, (left, right), left + right)
    return symbols


def save_tokenizer(tokenizer: XLMRobertaTokenizer, out: Path) -> None:
    """Save through transformers 5, then name the fast class so that transformers 4 loads it too."""
    tokenizer.save_pretrained(str(out))
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(CONFIG_OVERRIDES)
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def make_model(vocab_size: int) -> XLMRobertaForMaskedLM:
    """An untrained tiny XLM-R of the sizes in the module docstring."""
    return XLMRobertaForMaskedLM(XLMRobertaConfig(vocab_size=vocab_size, **SIZES, **ROBERTA_LAYOUT))


def verify(out: Path, built: XLMRobertaTokenizer) -> None:
    """Reload through the Auto classes: the config names the fast class, transformers 5 maps it
    to the same class, the same tokens, offsets and words, words that break at spaces,
    multi-piece words and no ``<unk>`` in the non-ASCII probe."""
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    assert all(cfg[key] == value for key, value in CONFIG_OVERRIDES.items()), cfg
    loaded = AutoTokenizer.from_pretrained(str(out))
    assert type(loaded) is XLMRobertaTokenizer, type(loaded)
    assert loaded.model_max_length == MODEL_MAX_LENGTH
    for text in PROBES:
        a, b = built(text), loaded(text)
        assert a["input_ids"] == b["input_ids"], text
        assert a.encodings[0].offsets == b.encodings[0].offsets, text
        assert a.word_ids() == b.word_ids(), text
    for word in MULTI_PIECE_WORDS:
        pieces = loaded.tokenize(f"The {word}")[1:]
        assert len(pieces) >= 2, f"{word!r} is a single piece {pieces}"
    encoding = loaded(PROBES[2], add_special_tokens=False)
    assert loaded.unk_token_id not in encoding["input_ids"], loaded.tokenize(PROBES[2])
    assert len(set(encoding.word_ids())) == len(PROBES[2].split())
    model = AutoModelForMaskedLM.from_pretrained(str(out))
    assert model.config.max_position_embeddings == MODEL_MAX_LENGTH + 2
    print(f"  {out.name}: {loaded.tokenize(PROBES[0])}")


def build(out_root: Path) -> None:
    """Make the tokenizer and model, train, save to ``out_root/NAME`` and verify."""
    out = fresh_folder(out_root / NAME)
    texts = training_text()
    pipeline = XLMRobertaTokenizer(model_max_length=MODEL_MAX_LENGTH).backend_tokenizer
    tokenizer = XLMRobertaTokenizer(
        vocab=unigram_vocab(texts, pipeline), model_max_length=MODEL_MAX_LENGTH
    )
    assert tokenizer.convert_tokens_to_ids(SPECIALS) == list(range(len(SPECIALS)))
    save_tokenizer(tokenizer, out)
    model = make_model(len(tokenizer))
    spec = Spec(NAME, "<mask>", "<pad>")
    backend = tokenizer.backend_tokenizer
    train_save_report(model, backend, texts, spec, out, lambda: verify(out, tokenizer))


def main() -> None:
    """Build the fixture on one CPU thread, deterministically."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURES / "models")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    build(args.out)


if __name__ == "__main__":
    main()
