"""Score sentences with minicons, an independent PLL implementation, for reference fixtures.

Why: our scores must agree with an implementation we did not write. minicons'
``MaskedLMScorer`` (Misra's library, used by Kauf & Ivanova 2023 for ``within_word_l2r``) needs
transformers<5, so this script runs with the python of the venv made by
``scripts/make_minicons_venv.sh``, never in the main venv, and pll_harness is not imported.

Usage (from the repository root):

    bench/.minicons-venv/bin/python scripts/minicons_reference.py \\
        --models tests/fixtures/models/tiny-bert-wordpiece tests/fixtures/models/tiny-roberta-bpe \\
                 tests/fixtures/models/tiny-xlmr-unigram \\
        --sentences tests/fixtures/minicons_sentences.txt \\
        --metrics original word_l2r \\
        --out tests/fixtures/minicons_scores.json

Output JSON::

    {"generator": {versions, note},
     "runs": [{"model": <model folder name>, "metric": "original" | "word_l2r",
               "minicons_metric": "original" | "within_word_l2r",
               "sentences": [{"text", "score", "tokens": [[token, logprob], ...]}, ...]}, ...]}

``score`` is the natural-log PLL: the SUM of the per-token log-probabilities (minicons'
``sequence_score`` averages by default, so we pass a sum reduction). ``tokens`` lists the scored
tokens in order as raw vocabulary strings (``convert_ids_to_tokens``: ``##ou``, ``Ġthe``); the
special tokens minicons skips ([CLS]/[SEP], <s>/</s>, padding) are absent.

Each sentence is scored alone (a batch of one), so no padding enters the computation.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import minicons
import torch
import transformers
from minicons import scorer

# Our metric names -> minicons' PLL_metric values.
METRICS = {"original": "original", "word_l2r": "within_word_l2r"}


def score_model(model_dir: Path, sentences: list[str], metric: str) -> dict[str, Any]:
    """Score every sentence with one model and one metric; returns one ``runs`` entry."""
    mlm = scorer.MaskedLMScorer(str(model_dir), device="cpu")
    tokenizer = mlm.tokenizer
    if not tokenizer.is_fast:
        raise SystemExit(f"{model_dir}: minicons' within_word_l2r needs a fast tokenizer")
    minicons_metric = METRICS[metric]
    results = []
    for text in sentences:
        # token_score gives the per-token log-probs; prepare_text gives the scored token ids.
        (token_scores,) = mlm.token_score([text], PLL_metric=minicons_metric)
        (prepared,) = list(mlm.prepare_text([text], PLL_metric=minicons_metric))
        target_ids = prepared[2].tolist()
        (seq_sum,) = mlm.sequence_score(
            [text], reduction=lambda x: x.sum(0).item(), PLL_metric=minicons_metric
        )
        logprobs = [float(lp) for _, lp in token_scores]
        if len(logprobs) != len(target_ids):
            raise RuntimeError(f"token count mismatch for {text!r}")
        # sequence_score and token_score must describe the same computation.
        if not math.isclose(seq_sum, math.fsum(logprobs), abs_tol=1e-4):
            raise RuntimeError(f"sum mismatch for {text!r}: {seq_sum} vs {math.fsum(logprobs)}")
        tokens = tokenizer.convert_ids_to_tokens(target_ids)
        results.append(
            {
                "text": text,
                "score": math.fsum(logprobs),
                "tokens": [[tok, lp] for tok, lp in zip(tokens, logprobs, strict=True)],
            }
        )
    return {
        "model": model_dir.name,
        "metric": metric,
        "minicons_metric": minicons_metric,
        "sentences": results,
    }


def main() -> None:
    """Parse arguments, score all model x metric combinations and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, nargs="+", required=True)
    parser.add_argument("--sentences", type=Path, required=True, help="one sentence per line")
    parser.add_argument("--metrics", nargs="+", choices=sorted(METRICS), default=sorted(METRICS))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sentences = [line for line in args.sentences.read_text().splitlines() if line.strip()]
    runs = [
        score_model(model_dir, sentences, metric)
        for model_dir in args.models
        for metric in args.metrics
    ]
    payload = {
        "generator": {
            "tool": "scripts/minicons_reference.py",
            "minicons": getattr(minicons, "__version__", None) or _dist_version("minicons"),
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "note": "score = sum of natural-log token log-probs; one sentence per batch",
        },
        "runs": runs,
    }
    args.out.write_text(_compact_json(payload))
    print(f"wrote {args.out}: {len(runs)} runs x {len(sentences)} sentences")


def _compact_json(payload: dict[str, Any]) -> str:
    """JSON with one sentence per line: small diffs when the fixture is regenerated."""
    runs = []
    for run in payload["runs"]:
        head = {k: v for k, v in run.items() if k != "sentences"}
        body = ",\n".join("   " + json.dumps(s, ensure_ascii=False) for s in run["sentences"])
        runs.append(f'  {json.dumps(head, ensure_ascii=False)[:-1]}, "sentences": [\n{body}\n  ]}}')
    generator = json.dumps(payload["generator"], ensure_ascii=False)
    return f'{{"generator": {generator},\n "runs": [\n' + ",\n".join(runs) + "\n ]}\n"


def _dist_version(name: str) -> str:
    """Installed distribution version (minicons has no ``__version__``)."""
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
