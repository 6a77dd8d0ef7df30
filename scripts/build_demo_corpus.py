#!/usr/bin/env python3
"""Build the training corpus of the embedded demo model (``pll_harness/models/pll-demo``).

The corpus is made only of openly licensed English text that installs from Debian's package
archive. The script downloads the packages with ``apt-get download`` (no installation, no root
needed beyond a current ``apt-get update``), unpacks them with ``dpkg-deb -x`` into a work
folder, extracts prose, cleans it, splits it into sentences, deduplicates and writes one
sentence per line, grouped into documents separated by blank lines.

Sources (Debian bookworm; versions are printed and written to ``sources.json``):

* ``wordnet-base`` - WordNet 3.0 glosses, usage examples and verb example sentences
  (WordNet 3.0 licence, permissive, redistribution allowed with the notice).
* ``python3.11-doc`` - prose paragraphs of the Python documentation (PSF licence 2).
* ``dict-jargon`` - The Jargon File 4.4.7 (public domain).
* ``bible-kjv-text`` + ``bible-kjv`` - the King James Version, 1611 (public domain; the
  ``bible`` program of ``bible-kjv`` decodes the data file and is only run, not used as text).
* ``fortunes-min`` - the small BSD fortune files (BSD licence).

Nothing from BLiMP, EventsAdapt or any other evaluation set is used.

Usage::

    python scripts/build_demo_corpus.py --work /work/demo-train/corpus-src \\
        --out /work/demo-train/corpus.txt
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

PACKAGES = [
    "wordnet-base",
    "python3.11-doc",
    "dict-jargon",
    "bible-kjv-text",
    "bible-kjv",
    "fortunes-min",
]

LICENCES = {
    "wordnet-base": "WordNet 3.0 licence (Princeton; permissive, keep the notice)",
    "python3.11-doc": "PSF License Version 2 (Python documentation)",
    "dict-jargon": "public domain (The Jargon File)",
    "bible-kjv-text": "public domain (King James Version text, 1611)",
    "fortunes-min": "BSD licence (fortune-mod data files)",
}

# --------------------------------------------------------------------------------------------
# Fetching


def fetch_packages(work: Path) -> dict[str, str]:
    """Download and unpack the Debian packages; return ``{package: version}``."""
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    versions = {}
    for pkg in PACKAGES:
        have = sorted(debs.glob(f"{pkg}_*.deb"))
        if not have:
            subprocess.run(["apt-get", "download", pkg], cwd=debs, check=True)
            have = sorted(debs.glob(f"{pkg}_*.deb"))
        deb = have[-1]
        version = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        versions[pkg] = version
        dest = work / "x" / pkg
        if not dest.exists():
            dest.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    return versions


# --------------------------------------------------------------------------------------------
# Cleaning and sentence splitting

_ABBREV = {
    "e.g",
    "i.e",
    "etc",
    "vs",
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "cf",
    "no",
    "fig",
    "approx",
    "jr",
    "sr",
    "prof",
    "inc",
    "ltd",
    "co",
    "u.s",
    "a.m",
    "p.m",
}
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_TRANSLATE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": " - ",
        "\u2026": "...",
        "\u00a0": " ",
        "\u00b6": "",
    }
)


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text.translate(_TRANSLATE))
    return re.sub(r"\s+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with a regex and a small abbreviation list."""
    text = normalise(text)
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _SPLIT.finditer(text):
        head = text[start : m.start()].rstrip()
        last = head.split(" ")[-1].rstrip(".!?\"')]").lower() if head else ""
        if last in _ABBREV or (len(last) == 1 and last.isalpha()):
            continue
        out.append(text[start : m.end()].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def good_sentence(s: str, min_words: int = 3, max_words: int = 60) -> bool:
    words = s.split()
    if not (min_words <= len(words) <= max_words):
        return False
    letters = sum(c.isalpha() for c in s)
    if letters < 0.7 * sum(not c.isspace() for c in s):
        return False
    if not any(c.islower() for c in s):
        return False
    # Drop code-like lines, URLs and leftovers of markup.
    return not re.search(r"https?://|www\.|[{}<>|\\]|==|::|\(\)|\w_\w|>>>", s)


def to_sentence(s: str) -> str:
    """Capitalise a fragment and give it final punctuation (WordNet examples are bare)."""
    s = s.strip().strip(";").strip()
    if not s:
        return s
    s = s[0].upper() + s[1:]
    if s[-1] not in ".!?\"'":
        s += "."
    return s


# --------------------------------------------------------------------------------------------
# Extractors: each yields documents (lists of sentences)


_DETERMINERS = {"a", "an", "the", "any", "one", "someone", "something", "somebody"}


def wordnet_docs(root: Path):
    wn = root / "usr/share/wordnet"
    examples, glosses = [], []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (wn / f"data.{pos}").read_text(encoding="latin-1").split("\n"):
            if line.startswith("  ") or "|" not in line:
                continue  # licence header
            fields = line.split("|", 1)[0].split()
            lemma = fields[4].replace("_", " ")
            gloss = line.split("|", 1)[1].strip()
            quoted = re.findall(r'"([^"]+)"', gloss)
            definition = re.sub(r'"[^"]*"', "", gloss).strip(" ;")
            for q in quoted:
                examples.append(to_sentence(q))
            definition = definition.split(";")[0].strip()
            first = definition.split(" ", 1)[0]
            if pos == "noun" and lemma.islower() and first in _DETERMINERS:
                # "A gelding is a castrated male horse." Only glosses that start with a
                # determiner make a grammatical copular sentence; others are dropped.
                article = "An" if lemma[0] in "aeiou" else "A"
                glosses.append(f"{article} {lemma} is {definition}.")
            elif pos == "verb" and definition:
                glosses.append(to_sentence(definition))  # imperatives: "Coat with paint."
    # Verb frames: "The children %s to the playground" filled with lemmas of the senses that
    # WordNet lists for that frame (plural subjects, base forms: grammatical as written).
    frames = {}
    for line in (wn / "sents.vrb").read_text(encoding="latin-1").split("\n"):
        if not line:
            continue
        num, sent = line.rstrip("\n").split(" ", 1)
        frames[num] = sent
    framed = []
    for line in (wn / "sentidx.vrb").read_text(encoding="latin-1").split("\n"):
        parts = line.split()
        if len(parts) != 2:
            continue
        key, nums = parts
        lemma = key.split("%")[0].replace("_", " ")
        for num in nums.split(","):
            if num in frames:
                framed.append(to_sentence(frames[num].replace("%s", lemma)))
    # Group into pseudo-documents of 8 sentences each.
    for group in (examples, glosses, framed):
        for i in range(0, len(group), 8):
            yield group[i : i + 8]


class _Paragraphs(HTMLParser):
    """Collect the text of <p>, <li> and <dd> blocks of a Sphinx page's body, skipping code."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paras: list[str] = []
        self._buf: list[str] | None = None
        self._skip = 0
        self._in_body = False
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "div" and "body" in cls.split():
            self._in_body = True
        if tag in ("pre", "script", "style") or (tag == "span" and "pre" in cls.split()):
            self._skip += 1
        if tag == "p" and self._in_body:
            self._buf = []

    def handle_endtag(self, tag):
        if tag in ("pre", "script", "style") and self._skip:
            self._skip -= 1
        if tag == "p" and self._buf is not None:
            self.paras.append("".join(self._buf))
            self._buf = None

    def handle_data(self, data):
        if self._buf is not None:
            self._buf.append(data)


def python_doc_docs(root: Path):
    base = root / "usr/share/doc/python3.11/html"
    for path in sorted(base.rglob("*.html")):
        rel = path.relative_to(base).as_posix()
        if rel.startswith(("genindex", "_", "c-api/", "whatsnew/changelog")):
            continue
        parser = _Paragraphs()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        doc = []
        for para in parser.paras:
            doc.extend(split_sentences(para))
        if doc:
            yield doc


def jargon_docs(root: Path):
    with gzip.open(root / "usr/share/dictd/jargon.dict.dz", "rt", encoding="utf-8") as f:
        raw = f.read()
    for block in re.split(r"\n\s*\n", raw):
        lines = [ln for ln in block.split("\n") if ln.startswith("    ")]
        if len(lines) < 2:
            continue
        text = " ".join(ln.strip() for ln in lines)
        text = re.sub(r"[{}]", "", text)
        text = re.sub(r"\[[^\]]*\]", "", text)  # [techspeak], [from ...] etymology notes
        yield split_sentences(text)


def kjv_docs(root_text: Path, root_prog: Path):
    prog = root_prog / "usr/bin/bible"
    out = subprocess.run(
        [str(prog), "-p", str(root_text / "usr/lib"), "-f", "Gen1:1-Rev22:21"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc, chapter = [], None
    for line in out.splitlines():
        m = re.match(r"^(\w+?\d*?)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        if chapter is not None and m.group(2) != chapter and doc:
            yield doc
            doc = []
        chapter = m.group(2)
        doc.extend(split_sentences(m.group(4)))
    if doc:
        yield doc


def fortune_docs(root: Path):
    for name in ("fortunes", "literature", "riddles"):
        text = (root / "usr/share/games/fortunes" / name).read_text(errors="replace")
        for item in text.split("\n%\n"):
            lines = [ln for ln in item.split("\n") if not ln.strip().startswith("--")]
            yield split_sentences(" ".join(lines))


# --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/work/demo-train/corpus-src"))
    ap.add_argument("--out", type=Path, default=Path("/work/demo-train/corpus.txt"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    versions = fetch_packages(args.work)
    x = args.work / "x"
    sources = {
        "wordnet-base": wordnet_docs(x / "wordnet-base"),
        "python3.11-doc": python_doc_docs(x / "python3.11-doc"),
        "dict-jargon": jargon_docs(x / "dict-jargon"),
        "bible-kjv-text": kjv_docs(x / "bible-kjv-text", x / "bible-kjv"),
        "fortunes-min": fortune_docs(x / "fortunes-min"),
    }
    seen: set[bytes] = set()
    stats = {}
    docs: list[tuple[str, list[str]]] = []
    for name, gen in sources.items():
        n_sent = n_words = n_dup = 0
        for doc in gen:
            kept = []
            for s in doc:
                s = normalise(html.unescape(s))
                if not good_sentence(s):
                    continue
                key = hashlib.blake2b(
                    re.sub(r"\W+", " ", s.lower()).strip().encode(), digest_size=12
                ).digest()
                if key in seen:
                    n_dup += 1
                    continue
                seen.add(key)
                kept.append(s)
                n_words += len(s.split())
            if kept:
                n_sent += len(kept)
                docs.append((name, kept))
        stats[name] = {
            "version": versions[name],
            "licence": LICENCES[name],
            "sentences": n_sent,
            "words": n_words,
            "duplicates_dropped": n_dup,
        }
        print(f"{name:16s} {versions[name]:22s} {n_sent:9,d} sentences {n_words:11,d} words")
    stats["bible-kjv"] = {"version": versions["bible-kjv"], "role": "decoder program only"}

    # Shuffle documents (not sentences inside them) reproducibly.
    random.Random(args.seed).shuffle(docs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for name, doc in docs:
            f.write(f"# {name}\n")
            f.write("\n".join(doc))
            f.write("\n\n")
    total_s = sum(v.get("sentences", 0) for v in stats.values())
    total_w = sum(v.get("words", 0) for v in stats.values())
    stats["total"] = {"sentences": total_s, "words": total_w, "documents": len(docs)}
    with open(args.out.with_suffix(".sources.json"), "w") as f:
        json.dump(stats, f, indent=2)
    size = os.path.getsize(args.out)
    print(f"{'total':16s} {'':22s} {total_s:9,d} sentences {total_w:11,d} words")
    print(f"wrote {args.out} ({size / 1e6:.1f} MB, {len(docs):,d} documents)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
