#!/usr/bin/env python3
"""Build the training corpus of the embedded demo model (``pll_harness/models/pll-demo``).

The corpus is made only of openly licensed English text from two kinds of source, each
pinned so that a rebuild gives the same file:

* Debian packages, downloaded with ``apt-get download`` (no installation, no root needed
  beyond a current ``apt-get update``) and unpacked with ``dpkg-deb -x`` into ``--work``;
  versions are printed and written to ``<out>.sources.json``:

  - ``wordnet-base``: WordNet 3.0 glosses, usage examples and verb example sentences
    (WordNet 3.0 licence, permissive, redistribution allowed with the notice);
  - ``python3.11-doc``: prose paragraphs of the Python documentation (PSF licence 2);
  - ``dict-jargon``: The Jargon File 4.4.7 (public domain);
  - ``bible-kjv-text`` + ``bible-kjv``: the King James Version, 1611 (public domain; the
    ``bible`` program of ``bible-kjv`` decodes the data file and is only run, not used as text);
  - ``fortunes-min``: the small BSD fortune files (BSD licence).

* ``gutenberg``: Project Gutenberg eBooks (public domain in the United States) as collected in
  the GitHub repository rcdm-uga/Gutenberg_Text at a pinned commit, read with ``git`` from a
  clone given by ``--gutenberg`` (``git clone https://github.com/rcdm-uga/Gutenberg_Text``,
  about 1.2 GB). Only English-language books of the authors in ``GUTENBERG_AUTHORS`` (writers
  in English who died before 1955, so that their works are in the public domain in life+70
  countries too, and no translations) are used, taken round-robin across authors until
  ``--gutenberg-words`` words are kept. The Project Gutenberg header, footer and licence are
  removed, as Project Gutenberg's licence asks of texts used without its trademark.

``--sources`` picks the sources: ``v1`` is the corpus of the first weights (the Debian
packages, 2.6 M words); ``v2`` (the default) is the corpus of the shipped weights:
everyday English (19th- and early 20th-century fiction, WordNet's usage examples, fortunes),
without the technical (Python documentation, Jargon File) and archaic (King James Version)
text of ``v1``, which BLiMP's everyday sentences do not resemble.

Every sentence is checked against the evaluation sets (BLiMP and EventsAdapt as packaged in
``pll_harness/tasks/data``; CrowS-Pairs, CLAMS and Zorro from clones of their repositories at
pinned commits, ``--crows-pairs``, ``--clams``, ``--zorro``): a corpus sentence whose
normalised text (lowercased, punctuation dropped) equals an evaluation sentence is dropped,
and the counts are printed and written to ``<out>.sources.json``.

Output: one sentence per line, grouped into documents separated by blank lines (a ``# source``
line opens each), documents shuffled with ``--seed``.

Usage::

    python scripts/build_demo_corpus.py --work .demo-train/corpus-src \\
        --out .demo-train/corpus.txt --gutenberg PATH/Gutenberg_Text \\
        --crows-pairs PATH/crows-pairs --clams PATH/clams --zorro PATH/Zorro
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import html
import io
import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGED_DATA = REPO_ROOT / "pll_harness" / "tasks" / "data"

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
    "gutenberg": "public domain in the United States (Project Gutenberg eBooks; authors died "
    "before 1955); Project Gutenberg header, footer and licence removed",
}

SOURCE_SETS = {
    "v1": ["wordnet-base", "python3.11-doc", "dict-jargon", "bible-kjv-text", "fortunes-min"],
    "v2": ["wordnet-base", "fortunes-min", "gutenberg"],
}

# A public GitHub repository read at a pinned commit: where to clone it and what it is.
GUTENBERG_REPO = ("rcdm-uga/Gutenberg_Text", "a0b16d35a9851168ce9ac649851c17b7ab08d48e")

# Folder of the Gutenberg_Text repository -> the author's year of death. English-language
# writers of fiction, children's books and essays only; translations, illustrators' folders
# and authors who died in 1955 or later are left out.
GUTENBERG_AUTHORS = {
    "Alcott, Louisa May": 1888,
    "Alger, Horatio, Jr.": 1899,
    "Austen, Jane": 1817,
    "Barrie, J. M. (James Matthew)": 1937,
    "Baum, L. Frank (Lyman Frank)": 1919,
    "Blackwood, Algernon": 1951,
    "Brontë, Charlotte": 1855,
    "Burnett, Frances Hodgson": 1924,
    "Burroughs, Edgar Rice": 1950,
    "Carroll, Lewis": 1898,
    "Chesterton, G. K. (Gilbert Keith)": 1936,
    "Collins, Wilkie": 1889,
    "Conrad, Joseph": 1924,
    "Dickens, Charles": 1870,
    "Doyle, Arthur Conan": 1930,
    "Goldfrap, John Henry": 1917,
    "Hardy, Thomas": 1928,
    "Hawthorne, Nathaniel": 1864,
    "Henty, G. A. (George Alfred)": 1902,
    "Irving, Washington": 1859,
    "James, Henry": 1916,
    "Joyce, James": 1941,
    "Kipling, Rudyard": 1936,
    "Lang, Andrew": 1912,
    "London, Jack": 1916,
    "Melville, Herman": 1891,
    "Montgomery, L. M. (Lucy Maud)": 1942,
    "Nesbit, E. (Edith)": 1924,
    "Poe, Edgar Allan": 1849,
    "Potter, Beatrix": 1943,
    "Shelley, Mary Wollstonecraft": 1851,
    "Stevenson, Robert Louis": 1894,
    "Stoker, Bram": 1912,
    "Thoreau, Henry David": 1862,
    "Trollope, Anthony": 1882,
    "Twain, Mark": 1910,
    "Wells, H. G. (Herbert George)": 1946,
    "Wharton, Edith": 1937,
    "Wilde, Oscar": 1900,
}

# Evaluation sets kept out of the corpus: (repository, pinned commit) for those read from a
# clone; BLiMP and EventsAdapt are read from the package.
EVAL_REPOS = {
    "crows_pairs": ("nyu-mll/crows-pairs", "8aaac11c485473159ec9328a65253a5be9a479dc"),
    "clams": ("aaronmueller/clams", "36b5c9a56ecc51d3eedb6c1a85b805085d631c71"),
    "zorro": ("phueb/Zorro", "687ba433e91a3815e8204a8fc0cf0577303b1660"),
}

# --------------------------------------------------------------------------------------------
# Fetching


def fetch_packages(work: Path, packages: Iterable[str]) -> dict[str, str]:
    """Download and unpack the Debian packages; return ``{package: version}``."""
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    versions = {}
    for pkg in packages:
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


class PinnedRepo:
    """Files of a git repository (a clone or a bare copy) at one pinned commit."""

    def __init__(self, path: Path | None, repo: str, commit: str, option: str) -> None:
        if path is None:
            raise SystemExit(
                f"{option} is needed: the path of a clone of https://github.com/{repo} "
                f"(commit {commit})."
            )
        self.path, self.repo, self.commit = path, repo, commit
        probe = subprocess.run(
            ["git", "-C", str(path), "cat-file", "-e", f"{commit}^{{commit}}"],
            capture_output=True,
        )
        if probe.returncode != 0:
            raise SystemExit(
                f"{path} has no commit {commit} of {repo}: clone "
                f"https://github.com/{repo} (or fetch that commit) and pass the clone's path."
            )

    def files(self, folder: str) -> list[tuple[str, str]]:
        """``(path, blob id)`` of the files under ``folder``, sorted by path."""
        out = subprocess.run(
            ["git", "-C", str(self.path), "ls-tree", "-r", "-z", self.commit, "--", folder],
            capture_output=True,
            check=True,
        ).stdout.decode("utf-8")
        rows = []
        for entry in out.split("\0"):
            if entry:
                meta, name = entry.split("\t", 1)
                rows.append((name, meta.split()[2]))
        return sorted(rows)

    def read(self, blob: str, name: str) -> str:
        got = subprocess.run(
            ["git", "-C", str(self.path), "cat-file", "blob", blob], capture_output=True
        )
        if got.returncode != 0:
            raise SystemExit(
                f"{self.path} lacks the content of {name!r} ({self.repo} at {self.commit}): "
                "the copy is incomplete (large files left out?); use a full clone."
            )
        return got.stdout.decode("utf-8", errors="replace")


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


def wordnet_docs(root: Path) -> Iterator[list[str]]:
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

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paras: list[str] = []
        self._buf: list[str] | None = None
        self._skip = 0
        self._in_body = False
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        if tag == "div" and "body" in cls.split():
            self._in_body = True
        if tag in ("pre", "script", "style") or (tag == "span" and "pre" in cls.split()):
            self._skip += 1
        if tag == "p" and self._in_body:
            self._buf = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("pre", "script", "style") and self._skip:
            self._skip -= 1
        if tag == "p" and self._buf is not None:
            self.paras.append("".join(self._buf))
            self._buf = None

    def handle_data(self, data: str) -> None:
        if self._buf is not None:
            self._buf.append(data)


def python_doc_docs(root: Path) -> Iterator[list[str]]:
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


def jargon_docs(root: Path) -> Iterator[list[str]]:
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


def kjv_docs(root_text: Path, root_prog: Path) -> Iterator[list[str]]:
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


def fortune_docs(root: Path) -> Iterator[list[str]]:
    for name in ("fortunes", "literature", "riddles"):
        text = (root / "usr/share/games/fortunes" / name).read_text(errors="replace")
        for item in text.split("\n%\n"):
            lines = [ln for ln in item.split("\n") if not ln.strip().startswith("--")]
            yield split_sentences(" ".join(lines))


# --------------------------------------------------------------------------------------------
# Project Gutenberg


_PG_START = re.compile(r"^\*\*\* ?START OF (?:THIS|THE) PROJECT GUTENBERG[^\n]*$", re.M | re.I)
_PG_END = re.compile(
    r"^(?:\*\*\* ?END OF (?:THIS|THE) PROJECT GUTENBERG|End of (?:the |this )?Project Gutenberg)",
    re.M | re.I,
)
_PG_NUMBER = re.compile(r"\[E(?:Book|text) #(\d+)\]", re.I)
_PG_LANGUAGE = re.compile(r"^Language: *(\S[^\n]*?) *$", re.M)
_PG_CREDITS = re.compile(
    r"^(?:Produced by|E-text prepared by|Transcriber'?s? note|This eBook was produced"
    r"|\[Illustration)",
    re.I,
)
_PG_INSERTS = re.compile(r"\[(?:Illustration|Footnote|Sidenote|Transcriber)[^\]]*\]", re.I)


def gutenberg_book(text: str) -> tuple[str | None, str | None, list[str]]:
    """Split an eBook file into (eBook number, language, paragraphs of its body).

    The body lies between the ``*** START OF ... PROJECT GUTENBERG ...`` and ``*** END OF ...``
    (or ``End of the Project Gutenberg ...``) lines; a file without a start line gives no
    paragraphs, since its licence text could not be told from the book.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = _PG_START.search(text)
    if start is None:
        return None, None, []
    head, body = text[: start.start()], text[start.end() :]
    end = _PG_END.search(body)
    if end is not None:
        body = body[: end.start()]
    number = _PG_NUMBER.search(head)
    language = _PG_LANGUAGE.search(head)
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", body):
        block = _PG_INSERTS.sub("", block).replace("_", "").strip()
        if block and not _PG_CREDITS.match(block):
            paragraphs.append(" ".join(block.split()))
    return (
        number.group(1) if number else None,
        language.group(1) if language else None,
        paragraphs,
    )


def gutenberg_order(repo: PinnedRepo) -> list[tuple[str, str]]:
    """The books of ``GUTENBERG_AUTHORS``, round-robin across authors (sorted by name)."""
    per_author = []
    for author in sorted(GUTENBERG_AUTHORS):
        books = [(p, b) for p, b in repo.files(author + "/") if p.endswith(".txt")]
        if not books:
            raise SystemExit(f"no books of {author!r} in {repo.path} at {repo.commit}")
        per_author.append(books)
    order = []
    for r in range(max(len(books) for books in per_author)):
        order += [books[r] for books in per_author if r < len(books)]
    return order


def gutenberg_docs(
    repo: PinnedRepo, books: list[dict], doc_sentences: int = 100
) -> Iterator[list[str]]:
    """Documents of at most ``doc_sentences`` consecutive sentences of each English book;
    every book read is appended to ``books`` (its path, eBook number and what was done)."""
    for path, blob in gutenberg_order(repo):
        number, language, paragraphs = gutenberg_book(repo.read(blob, path))
        record = {"path": path, "ebook": number, "language": language}
        books.append(record)
        if not paragraphs or (language or "").lower() != "english":
            record["skipped"] = "no Project Gutenberg start line" if not paragraphs else "language"
            continue
        doc: list[str] = []
        for para in paragraphs:
            doc.extend(split_sentences(para))
            if len(doc) >= doc_sentences:
                yield doc
                doc = []
        if doc:
            yield doc


# --------------------------------------------------------------------------------------------
# Evaluation sets


def sentence_key(s: str) -> str:
    """Lowercased words of a sentence without punctuation: equal keys = the same sentence."""
    return re.sub(r"\W+", " ", normalise(s).lower()).strip()


def eval_sentences(args: argparse.Namespace) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Normalised keys of every sentence of each evaluation set, and where each set came from."""
    sets: dict[str, set[str]] = {}
    origin: dict[str, str] = {}
    for name in ("blimp", "eventsadapt"):
        keys = set()
        for path in sorted((PACKAGED_DATA / name).glob("*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as rows:
                for row in rows:
                    record = json.loads(row)
                    keys.update(sentence_key(record[k]) for k in ("sentence_good", "sentence_bad"))
        if not keys:
            raise SystemExit(f"no {name} data in {PACKAGED_DATA / name}")
        sets[name] = keys
        origin[name] = f"pll_harness/tasks/data/{name} (packaged)"

    crows = PinnedRepo(args.crows_pairs, *EVAL_REPOS["crows_pairs"], "--crows-pairs")
    [(path, blob)] = crows.files("data/crows_pairs_anonymized.csv")
    rows = csv.DictReader(io.StringIO(crows.read(blob, path)))
    sets["crows_pairs"] = {sentence_key(r[k]) for r in rows for k in ("sent_more", "sent_less")}

    clams = PinnedRepo(args.clams, *EVAL_REPOS["clams"], "--clams")
    sets["clams"] = {
        sentence_key(line.split("\t", 1)[1])
        for path, blob in clams.files("en_evalset/")
        for line in clams.read(blob, path).splitlines()
        if "\t" in line
    }

    zorro = PinnedRepo(args.zorro, *EVAL_REPOS["zorro"], "--zorro")
    sets["zorro"] = {
        sentence_key(line)
        for path, blob in zorro.files("sentences/babyberta/")
        for line in zorro.read(blob, path).splitlines()
    }
    for name, (repo, commit) in EVAL_REPOS.items():
        origin[name] = f"github.com/{repo} at {commit}"
    for keys in sets.values():
        keys.discard("")
    return sets, origin


# --------------------------------------------------------------------------------------------


def resolve_sources(spec: str) -> list[str]:
    names = SOURCE_SETS.get(spec, spec.split(","))
    unknown = [n for n in names if n not in LICENCES]
    if unknown:
        raise SystemExit(
            f"unknown source(s) {unknown}: use v1, v2 or a comma list of {sorted(LICENCES)}"
        )
    return names


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=REPO_ROOT / ".demo-train" / "corpus-src")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / ".demo-train" / "corpus.txt")
    ap.add_argument("--sources", default="v2", help="v1, v2 or a comma list of sources")
    ap.add_argument("--gutenberg", type=Path, help="clone of github.com/" + GUTENBERG_REPO[0])
    ap.add_argument("--gutenberg-words", type=int, default=24_000_000)
    ap.add_argument("--crows-pairs", type=Path, help="clone of github.com/nyu-mll/crows-pairs")
    ap.add_argument("--clams", type=Path, help="clone of github.com/aaronmueller/clams")
    ap.add_argument("--zorro", type=Path, help="clone of github.com/phueb/Zorro")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    names = resolve_sources(args.sources)
    evals, eval_origin = eval_sentences(args)
    packages = [
        n for n in PACKAGES if n in names or (n == "bible-kjv" and "bible-kjv-text" in names)
    ]
    versions = fetch_packages(args.work, packages)
    x = args.work / "x"
    books: list[dict] = []
    extractors = {
        "wordnet-base": lambda: wordnet_docs(x / "wordnet-base"),
        "python3.11-doc": lambda: python_doc_docs(x / "python3.11-doc"),
        "dict-jargon": lambda: jargon_docs(x / "dict-jargon"),
        "bible-kjv-text": lambda: kjv_docs(x / "bible-kjv-text", x / "bible-kjv"),
        "fortunes-min": lambda: fortune_docs(x / "fortunes-min"),
        "gutenberg": lambda: gutenberg_docs(
            PinnedRepo(args.gutenberg, *GUTENBERG_REPO, "--gutenberg"), books
        ),
    }
    if "gutenberg" in names:
        versions["gutenberg"] = f"github.com/{GUTENBERG_REPO[0]} at {GUTENBERG_REPO[1]}"

    seen: set[bytes] = set()
    stats: dict = {}
    overlap = {e: {"sentences": len(k), "dropped": {}, "examples": []} for e, k in evals.items()}
    docs: list[tuple[str, list[str]]] = []
    for name in names:
        n_sent = n_words = n_dup = 0
        for doc in extractors[name]():
            kept = []
            for s in doc:
                s = normalise(html.unescape(s))
                if not good_sentence(s):
                    continue
                key = sentence_key(s)
                hits = [e for e, keys in evals.items() if key in keys]
                for e in hits:
                    overlap[e]["dropped"][name] = overlap[e]["dropped"].get(name, 0) + 1
                    if len(overlap[e]["examples"]) < 20:
                        overlap[e]["examples"].append(s)
                if hits:
                    continue
                digest = hashlib.blake2b(key.encode(), digest_size=12).digest()
                if digest in seen:
                    n_dup += 1
                    continue
                seen.add(digest)
                kept.append(s)
                n_words += len(s.split())
            if kept:
                n_sent += len(kept)
                docs.append((name, kept))
            if name == "gutenberg" and n_words >= args.gutenberg_words:
                break
        stats[name] = {
            "version": versions[name],
            "licence": LICENCES[name],
            "sentences": n_sent,
            "words": n_words,
            "duplicates_dropped": n_dup,
        }
        print(f"{name:16s} {n_sent:9,d} sentences {n_words:11,d} words  {versions[name]}")
    if "bible-kjv-text" in names:
        stats["bible-kjv"] = {"version": versions["bible-kjv"], "role": "decoder program only"}
    if books:
        stats["gutenberg"]["books"] = books
        used = [b for b in books if "skipped" not in b]
        print(f"gutenberg: {len(used)} books used ({len(books) - len(used)} skipped)")
    for e, o in overlap.items():
        print(f"overlap with {e:12s} ({o['sentences']:7,d} sentences): {o['dropped'] or 'none'}")

    # Shuffle documents (not sentences inside them) reproducibly.
    random.Random(args.seed).shuffle(docs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for name, doc in docs:
            f.write(f"# {name}\n")
            f.write("\n".join(doc))
            f.write("\n\n")
    os.replace(tmp, args.out)
    total_s = sum(v.get("sentences", 0) for v in stats.values())
    total_w = sum(v.get("words", 0) for v in stats.values())
    stats["total"] = {"sentences": total_s, "words": total_w, "documents": len(docs)}
    for e in overlap:
        overlap[e]["source"] = eval_origin[e]
    stats["eval_overlap"] = overlap
    with open(args.out.with_suffix(".sources.json"), "w") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False)
    size = os.path.getsize(args.out)
    print(f"{'total':16s} {total_s:9,d} sentences {total_w:11,d} words")
    print(f"wrote {args.out} ({size / 1e6:.1f} MB, {len(docs):,d} documents)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
