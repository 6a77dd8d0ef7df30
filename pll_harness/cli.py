"""The ``pll-harness`` command: score, explain, diagnose, compare.

Each sub-command is a small parser (``add_<command>``) and a handler (``run_<command>``)
over a Python function in ``pll_harness.tools``; heavy imports (torch, transformers,
matplotlib) happen only when a sub-command runs.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from pll_harness.arguments import DTYPE_NAMES
from pll_harness.file_formats import SCORE_FILE_FORMATS, SENTENCE_FILE_FORMATS
from pll_harness.file_lock import same_file
from pll_harness.metrics import PLL_METRICS
from pll_harness.tasks.catalog import (
    BENCHMARKS,
    HEADLINE,
    LEADERBOARD_DIR,
    LEADERBOARD_METRICS,
    SCORE_DIFF,
)

DESCRIPTION = f"""\
Look inside pseudo-log-likelihood (PLL) scores of masked language models.

  score     PLL of every sentence in a file, all metrics side by side (CSV/JSONL)
  explain   per-token table (and bar chart) of one sentence, or of the difference of two
  diagnose  the metric desiderata of Kauf & Ivanova (2023): length, word frequency,
            out-of-vocabulary words, agreement with a causal LM; markdown + plots
  compare   leaderboard ({", ".join(b.title for b in BENCHMARKS)}, any task) from
            lm-eval result files
  crows-pairs
            CrowS-Pairs scored as its paper does: PLL of the tokens the two sentences
            share, the share of pairs where the more stereotyping one wins

Run `pll-harness <command> --help` for the options of each."""

EPILOG = """\
examples:
  pll-harness score --model bert-base-cased sentences.txt -o scores.csv
  pll-harness explain --model bert-base-cased "The traveler lost the souvenir." --plot fig.png
  pll-harness explain --model bert-base-cased "She is a nurse." "He is a nurse."
  pll-harness diagnose --model bert-base-cased --dataset eventsadapt --causal gpt2
  pll-harness compare results/ -o leaderboard/
  pll-harness crows-pairs --model bert-base-uncased --metric original -o crows.csv"""

FORMATTER = argparse.RawDescriptionHelpFormatter

RESUMABLE_COMMANDS = ("score", "crows-pairs", "diagnose")
"""Commands whose output a re-run resumes after an interruption."""

METRIC_HELP = (
    f"'all' (default) or a comma-separated list of: {', '.join(PLL_METRICS)}; may be repeated"
)

Subparsers = argparse._SubParsersAction


def path(text: str) -> str:
    """An argparse type: a file or folder name, not empty.  An empty ``-o ""`` (a shell
    variable left unset) would otherwise read as no output at all: stdout, no resume."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a file or folder name")
    return text


def refuse_writing_the_input(source: str | None, outputs: Iterable[tuple[str, str | None]]) -> None:
    """An output that is the input file (the same name, a link to it) would be read and
    written at once: resumed, it takes the input's rows for finished ones; with
    --overwrite, the input is lost.  Refused before anything is read or written."""
    for option, output in outputs:
        if source and output and same_file(source, output):
            raise ValueError(
                f"{option} {output} is the input file {source}: writing it would destroy the "
                "input. Give the output a name of its own."
            )


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, or a usage error that says so."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument(
        "--model",
        "-m",
        required=True,
        help="masked LM: hub name (bert-base-cased) or local folder",
    )
    group.add_argument("--metric", action="append", metavar="METRICS", help=METRIC_HELP)
    group.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)"
    )


def _add_causal_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--causal",
        metavar="MODEL",
        default=None,
        help="also score with this causal LM (hub name such as gpt2, or local folder): "
        "log P(sentence | BOS)",
    )


def _add_resume_options(parser: argparse.ArgumentParser, items: str) -> None:
    """--overwrite and --chunk-size of a command whose output is written as it goes and
    resumed (see :mod:`pll_harness.tools.resumable`)."""
    parser.add_argument(
        "--overwrite", action="store_true", help="start the output afresh instead of resuming it"
    )
    parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"{items} scored and written per step: what an interruption can lose "
        "(default: 32 on the CPU, 1024 on a GPU)",
    )


def _add_limit_option(parser: argparse.ArgumentParser, items: str) -> None:
    """--limit of a command over a data set: its first N ``items``, as lm-eval's --limit
    (applied by :func:`pll_harness.tools.sentences.first_items`)."""
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"score only the first N {items} (a partial run, for a quick look)",
    )


def _add_batch_tokens_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-batch-tokens",
        type=positive_int,
        default=None,
        metavar="N",
        help="tokens per forward pass (default: engine's choice)",
    )


def _add_precision_options(parser: argparse.ArgumentParser) -> None:
    """--dtype, --max-length and --add-prefix-space: settings that change the numbers,
    which a resumed output must have been written with (see
    :func:`pll_harness.provenance.scoring_model`)."""
    parser.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default="auto",
        help="the model's dtype (default: the checkpoint's own); bfloat16 is about twice as "
        "fast on a GPU, see the README for when it is safe",
    )
    parser.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        metavar="N",
        help="longest input in tokens, special tokens included; longer texts are scored in "
        "windows (default: the tokenizer's declared length, at most the model's)",
    )
    parser.add_argument(
        "--add-prefix-space",
        action="store_const",
        const=True,
        default=None,
        help="load the tokenizer with add_prefix_space=True, so that a byte-level BPE "
        "tokenizer reads the first word as the others (BabyBERTa needs it; default: the "
        "tokenizer's own setting)",
    )


# --------------------------------------------------------------------------- score


def add_score(commands: Subparsers) -> argparse.ArgumentParser:
    score = commands.add_parser(
        "score",
        formatter_class=FORMATTER,
        help="score sentences from a file",
        description="Score every sentence of FILE with each requested PLL metric.\n\n"
        "Input: a text file (one sentence per line), CSV/TSV or JSONL (pick the column with\n"
        "--column; default 'sentence' or 'text'), optionally .gz; '-' reads stdin.\n"
        "Output: one row per sentence with pll_<metric> (natural-log PLL sums); JSONL lines\n"
        "also hold every token's log-probability; for CSV, --tokens writes them to a second\n"
        "file. Re-running with the same --output skips the sentences already written;\n"
        "Ctrl-C, SIGTERM or SIGKILL lose at most the chunk being scored. One run at a time\n"
        "may write an output file: a second is refused.",
        epilog="example:\n  pll-harness score -m bert-base-cased --metric original,word_l2r "
        "--causal gpt2 data.csv --column sentence -o scores.jsonl",
    )
    _add_model_options(score)
    _add_causal_option(score)
    score.add_argument(
        "file", type=path, metavar="FILE", help="sentences: .txt, .csv, .tsv, .jsonl or -"
    )
    score.add_argument("--column", help="column/field holding the sentences (CSV, JSONL)")
    score.add_argument("--id-column", help="column/field to use as sentence id (default: row)")
    score.add_argument(
        "--input-format",
        choices=SENTENCE_FILE_FORMATS,
        help="input format when the file name does not tell",
    )
    score.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        type=path,
        help="output file (.csv or .jsonl); default: CSV on stdout (not resumable)",
    )
    score.add_argument(
        "--format",
        dest="output_format",
        choices=SCORE_FILE_FORMATS,
        help="output format (default: from the --output suffix, else csv)",
    )
    score.add_argument(
        "--tokens",
        dest="token_output",
        metavar="PATH",
        type=path,
        help="with CSV output: also write per-token scores here",
    )
    _add_resume_options(score, "sentences")
    _add_batch_tokens_option(score)
    _add_precision_options(score)
    score.add_argument("--no-progress", action="store_true", help="no progress bar")
    return score


def run_score(args: argparse.Namespace) -> None:
    from pll_harness.tools.score import score_file
    from pll_harness.tools.sentences import read_sentences

    refuse_writing_the_input(args.file, [("-o", args.output), ("--tokens", args.token_output)])
    sentences = read_sentences(
        args.file, column=args.column, id_column=args.id_column, fmt=args.input_format
    )
    done = score_file(
        sentences,
        args.model,
        output=args.output,
        metrics=args.metric,
        causal=args.causal,
        output_format=args.output_format,
        token_output=args.token_output,
        chunk_size=args.chunk_size,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        device=args.device,
        dtype=args.dtype,
        max_batch_tokens=args.max_batch_tokens,
        max_length=args.max_length,
        add_prefix_space=args.add_prefix_space,
    )
    if args.output:
        there = len(sentences) - done.new
        report = f"scored {done.new} sentences" + (f" ({there} already there)" if there else "")
        report += f" -> {args.output}"
        if done.again:
            report += f"; {done.again} of those again, for their token rows -> {args.token_output}"
        print(report, file=sys.stderr)


# --------------------------------------------------------------------------- explain


def add_explain(commands: Subparsers) -> argparse.ArgumentParser:
    explain = commands.add_parser(
        "explain",
        formatter_class=FORMATTER,
        help="per-token scores of one or two sentences",
        description="Show each token's log-probability under every metric, grouped by word.\n"
        "With two sentences, align their tokens and show which tokens carry the difference.",
        epilog='example:\n  pll-harness explain -m bert-base-cased "She is a nurse." '
        '"He is a nurse." --plot nurse.png',
    )
    _add_model_options(explain)
    explain.add_argument("sentences", nargs="+", metavar="SENTENCE", help="one or two sentences")
    explain.add_argument(
        "--plot", type=path, metavar="PNG", help="draw the per-token bar chart here"
    )
    explain.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return explain


def run_explain(args: argparse.Namespace) -> None:
    from pll_harness.tools.explain import (
        check_sentences,
        explain,
        explain_sentences,
        plot_explanations,
    )

    if not args.json:
        print(explain(args.sentences, args.model, args.metric, args.plot, args.device), end="")
        return
    import json

    from pll_harness.tools.metrics import parse_metrics
    from pll_harness.tools.models import MLMScorers, short_model_name
    from pll_harness.tools.plotting import figure_path, save_figure

    check_sentences(args.sentences)
    if args.plot:
        figure_path(args.plot)
    scorers = MLMScorers(args.model, parse_metrics(args.metric), device=args.device)
    explanations = explain_sentences(scorers, args.sentences)
    if args.plot:
        title = short_model_name(args.model)
        save_figure(plot_explanations(explanations, title), args.plot)
    print(json.dumps([e.as_dict() for e in explanations], ensure_ascii=False, indent=2))


# --------------------------------------------------------------------------- diagnose


def add_diagnose(commands: Subparsers) -> argparse.ArgumentParser:
    diagnose = commands.add_parser(
        "diagnose",
        formatter_class=FORMATTER,
        help="metric desiderata report with plots",
        description="Check the desiderata of Kauf & Ivanova (2023) for each metric:\n"
        "  r(sentence length in tokens, -PLL)   should be positive\n"
        "  r(word PLL in 'My word is _', log word frequency (wordfreq))   positive\n"
        "  r(sentence PLL, causal LM log-likelihood)   positive (with --causal)\n"
        "and the out-of-vocabulary ratio (words split into 2+ tokens).\n"
        "Writes report.md, length.png, frequency.png (causal.png), sentences.csv, words.csv.",
        epilog="example:\n  pll-harness diagnose -m bert-base-cased --causal gpt2 -o diag/",
    )
    _add_model_options(diagnose)
    _add_causal_option(diagnose)
    diagnose.add_argument(
        "--dataset",
        type=path,
        default="eventsadapt",
        help="'eventsadapt' (the packaged EventsAdapt pairs) or a sentence file "
        "as for score (default: eventsadapt)",
    )
    diagnose.add_argument("--column", help="sentence column of a CSV/JSONL dataset")
    _add_limit_option(diagnose, "sentences of a file / pairs of EventsAdapt")
    diagnose.add_argument(
        "--output-dir",
        "-o",
        default="pll-diagnosis",
        metavar="DIR",
        type=path,
        help="folder for the report (default: pll-diagnosis)",
    )
    _add_resume_options(diagnose, "sentences or words")
    diagnose.add_argument("--no-progress", action="store_true", help="no progress bar")
    return diagnose


def run_diagnose(args: argparse.Namespace) -> None:
    from pll_harness.tools.diagnose import REPORT, TABLES, diagnose

    tables = [("-o", os.path.join(args.output_dir, name)) for name in TABLES.values()]
    refuse_writing_the_input(args.dataset, tables)
    diagnose(
        args.model,
        dataset=args.dataset,
        output_dir=args.output_dir,
        metrics=args.metric,
        causal=args.causal,
        limit=args.limit,
        column=args.column,
        device=args.device,
        progress=not args.no_progress,
        overwrite=args.overwrite,
        chunk_size=args.chunk_size,
    )
    report = os.path.join(args.output_dir, REPORT)
    with open(report, encoding="utf-8") as handle:
        print(handle.read(), end="")
    print(f"\nreport: {report}", file=sys.stderr)


# --------------------------------------------------------------------------- compare


def add_compare(commands: Subparsers) -> argparse.ArgumentParser:
    compare = commands.add_parser(
        "compare",
        formatter_class=FORMATTER,
        help="leaderboard from lm-eval result files",
        description="Read lm-eval result files (results_*.json from --output_path; folders are\n"
        "searched) of pll-mlm and other models (e.g. hf), and write leaderboard.md,\n"
        "leaderboard.csv and leaderboard.png: one row per model scored one way (its\n"
        "checkpoint, the model arguments that change scores, --limit). The packaged\n"
        "benchmarks keep their layout (BLiMP by phenomenon, EventsAdapt, CrowS-Pairs by bias\n"
        "type, CLAMS by language, Zorro by phenomenon); any other task with an accuracy-like\n"
        "metric gets a plain column.",
        epilog="example:\n  pll-harness compare out/ -o leaderboard/",
    )
    compare.add_argument(
        "results", nargs="+", type=path, metavar="RESULTS", help="result JSON files or folders"
    )
    compare.add_argument(
        "--output-dir",
        "-o",
        default=LEADERBOARD_DIR,
        metavar="DIR",
        type=path,
        help=f"folder for the outputs (default: {LEADERBOARD_DIR})",
    )
    compare.add_argument(
        "--metric",
        default=HEADLINE,
        choices=LEADERBOARD_METRICS,
        help=f"{HEADLINE}: each task's accuracy-like metric (pct_stereotype for CrowS-Pairs, "
        f"first_preferred for pair-preference tasks); {SCORE_DIFF}: mean score difference "
        f"(default: {HEADLINE})",
    )
    compare.add_argument(
        "--all-columns",
        action="store_true",
        help="keep every column of the benchmarks run, also those that no run has",
    )
    return compare


def run_compare(args: argparse.Namespace) -> None:
    from pll_harness.tools.compare import compare

    board = compare(args.results, args.output_dir, args.metric, args.all_columns)
    print(board.to_markdown(), end="")
    print(f"\nwritten to {args.output_dir}/leaderboard.{{md,csv,png}}", file=sys.stderr)


# --------------------------------------------------------------------------- crows-pairs


def add_crows_pairs(commands: Subparsers) -> argparse.ArgumentParser:
    crows = commands.add_parser(
        "crows-pairs",
        formatter_class=FORMATTER,
        help="CrowS-Pairs with its paper's shared-token score",
        description="Score each pair of CrowS-Pairs (Nangia et al. 2020) the way its paper\n"
        "does: each sentence's PLL over the tokens both sentences share, the tokens in which\n"
        "they differ staying visible. Prints, per metric, the share of pairs in which the\n"
        "more stereotyping sentence scores higher (50 % = no preference), over all pairs, by\n"
        "direction and by bias type. --metric original gives the paper's per-sentence\n"
        "scores; the other metrics apply their masking within the shared tokens. lm-eval's\n"
        "crows_pairs_pll task scores whole sentences instead.\n\n"
        "--output is written as pairs are scored and can be resumed, as for score:\n"
        "re-running with the same --output scores only the pairs it lacks; Ctrl-C, SIGTERM\n"
        "or SIGKILL lose at most the chunk being scored. One run at a time may write it.",
        epilog="example:\n  pll-harness crows-pairs -m bert-base-uncased --metric original "
        "-o crows.csv",
    )
    _add_model_options(crows)
    crows.add_argument(
        "--pairs",
        metavar="FILE",
        type=path,
        help="CSV/TSV/JSONL with sent_more and sent_less (and bias_type, stereo_antistereo); "
        "default: the packaged CrowS-Pairs",
    )
    crows.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        type=path,
        help="write every pair's scores here, .csv or .jsonl by the name",
    )
    _add_limit_option(crows, "pairs")
    _add_resume_options(crows, "pairs")
    _add_batch_tokens_option(crows)
    _add_precision_options(crows)
    crows.add_argument("--no-progress", action="store_true", help="no progress bar")
    return crows


def run_crows_pairs(args: argparse.Namespace) -> None:
    from pll_harness.tools.crows_pairs import read_pairs, score_pairs, summary
    from pll_harness.tools.sentences import first_items
    from pll_harness.tools.tables import fmt_number, markdown_table

    refuse_writing_the_input(args.pairs, [("-o", args.output)])
    pairs = read_pairs(args.pairs)
    chosen = first_items(pairs, args.limit)
    results = score_pairs(
        chosen,
        args.model,
        args.metric,
        device=args.device,
        max_batch_tokens=args.max_batch_tokens,
        dtype=args.dtype,
        max_length=args.max_length,
        add_prefix_space=args.add_prefix_space,
        output=args.output,
        chunk_size=args.chunk_size,
        overwrite=args.overwrite,
        progress=not args.no_progress,
    )
    rows = summary(results, of=len(pairs))
    metrics = list(results[0].more) if results else []
    # A tie counts against sent_more; the counts show where that decides, when it does.
    tied = [m for m in metrics if any(row[f"ties_{m}"] for row in rows)]
    header = [
        "group",
        "pairs",
        *(f"pct_stereotype {m}" for m in metrics),
        *(f"ties {m}" for m in tied),
    ]
    print(
        markdown_table(
            header,
            (
                [row["group"], row["pairs"]]
                + [fmt_number(row[f"pct_stereotype_{m}"]) for m in metrics]
                + [row[f"ties_{m}"] for m in tied]
                for row in rows
            ),
        )
    )
    if len(chosen) < len(pairs):
        print(
            f"\n--limit {args.limit}: the first {len(chosen)} of the {len(pairs)} pairs, not "
            "the whole data set; these shares are not its score."
        )
    if args.output:
        print(f"pair scores -> {args.output}", file=sys.stderr)


# --------------------------------------------------------------------------- the command

COMMANDS: dict[
    str,
    tuple[Callable[[Subparsers], argparse.ArgumentParser], Callable[[argparse.Namespace], None]],
] = {
    "score": (add_score, run_score),
    "explain": (add_explain, run_explain),
    "diagnose": (add_diagnose, run_diagnose),
    "compare": (add_compare, run_compare),
    "crows-pairs": (add_crows_pairs, run_crows_pairs),
}
"""Each sub-command's parser and handler, in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pll-harness", description=DESCRIPTION, epilog=EPILOG, formatter_class=FORMATTER
    )
    from pll_harness import __version__

    parser.add_argument("--version", action="version", version=f"pll-harness {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add, _ in COMMANDS.values():
        add(commands)
    return parser


def run(args: argparse.Namespace) -> int:
    _, handle = COMMANDS[args.command]
    with _library_bars(shown=not getattr(args, "no_progress", False)):
        handle(args)
    return 0


@contextmanager
def _library_bars(shown: bool) -> Iterator[None]:
    """``--no-progress`` means no bar at all: also none of transformers' ("Loading
    weights") and the Hub's, which the command's own switch does not reach.  Their
    switches are the process's, so they are put back as they were (a caller of ``main``
    in Python keeps its bars)."""
    if shown:
        yield
        return
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )
    from transformers.utils import logging as transformers_logging

    transformers_on = transformers_logging.is_progress_bar_enabled()
    hub_off = are_progress_bars_disabled()
    transformers_logging.disable_progress_bar()
    disable_progress_bars()
    try:
        yield
    finally:
        if transformers_on:
            transformers_logging.enable_progress_bar()
        if not hub_off:
            enable_progress_bars()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return run(args)
    except BrokenPipeError:
        # The reader of our standard output left (`| head`): nothing more to say to it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        print(f"pll-harness {args.command}: error: {_os_error_text(error, args)}", file=sys.stderr)
        return 1
    except (ValueError, ImportError) as error:
        print(f"pll-harness {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        signum = getattr(interrupt, "signum", signal.SIGINT)
        resume = _how_to_resume(args)
        print(
            f"pll-harness {args.command}: stopped by {signal.Signals(signum).name}"
            f"{f'; {resume}' if resume else ''}.",
            file=sys.stderr,
        )
        return 128 + signum


OUT_OF_ROOM = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
"""Errors of a write that found no room: a full disk, a file size limit, a quota."""


def _os_error_text(error: OSError, args: argparse.Namespace) -> str:
    """``error`` as said, and for a write that found no room (which names no file), where
    it wrote and that what it wrote is kept for a resume."""
    resume = _how_to_resume(args)
    if error.errno not in OUT_OF_ROOM or not resume:
        return str(error)
    # The error names no file: with --tokens, the token file may be the one that failed.
    files = " or ".join(filter(None, (_written(args), getattr(args, "token_output", None))))
    return (
        f"{error.strerror} while writing {files}: what was written before is kept; "
        f"make room (or raise the file size limit) and {resume}"
    )


def _written(args: argparse.Namespace) -> str | None:
    return getattr(args, "output", None) or getattr(args, "output_dir", None)


def _how_to_resume(args: argparse.Namespace) -> str:
    """``re-run ... to resume`` for a command whose output a re-run resumes, else empty."""
    if not _written(args) or args.command not in RESUMABLE_COMMANDS:
        return ""
    # With --overwrite the same command would start over and drop what this run wrote.
    same = "it without --overwrite" if getattr(args, "overwrite", False) else "the same command"
    return f"re-run {same} to resume"


if __name__ == "__main__":
    sys.exit(main())
