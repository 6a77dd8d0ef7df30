"""The command line's own behaviour: how errors and a closed output end a command."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from pll_harness.cli import build_parser, main


def test_an_output_that_is_a_folder_is_an_error_not_a_traceback(tmp_path, tiny_bert_dir, capsys):
    data = tmp_path / "in.txt"
    data.write_text("A cat sat.\n")
    folder = tmp_path / "out.csv"
    folder.mkdir()
    assert main(["score", "-m", tiny_bert_dir, str(data), "-o", str(folder)]) == 1
    assert "pll-harness score: error:" in capsys.readouterr().err


def test_a_reader_that_leaves_ends_the_command_quietly():
    """`pll-harness score ... | head -1`: the pipe closes while the command writes."""
    script = (
        "import sys\n"
        "from pll_harness import cli\n"
        "def run(args):\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "cli.run = run\n"
        "sys.exit(cli.main(['score', '-m', 'some-model', 'in.txt']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == ""


def test_no_progress_also_hides_the_libraries_bars_and_puts_them_back(
    tmp_path, tiny_bert_dir, capsys
):
    """transformers draws a "Loading weights" bar of its own, which the command's switch
    did not reach; the libraries' switches are the process's, so a caller of ``main``
    keeps its bars afterwards."""
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as transformers_logging

    data = tmp_path / "in.txt"
    data.write_text("A cat sat.\n")
    assert main(["score", "-m", tiny_bert_dir, str(data), "--no-progress"]) == 0
    quiet = capsys.readouterr().err
    assert "Loading weights" not in quiet and "scoring" not in quiet
    assert transformers_logging.is_progress_bar_enabled() and not are_progress_bars_disabled()
    assert main(["score", "-m", tiny_bert_dir, str(data)]) == 0
    assert "Loading weights" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "advice"),
    [
        ((), "re-run the same command"),
        (("--overwrite",), "re-run it without --overwrite"),
    ],
)
def test_a_stopped_run_says_how_to_resume_it(monkeypatch, capsys, tmp_path, options, advice):
    """After --overwrite, the same command would start over and drop what the run wrote."""
    import pll_harness.cli as cli

    def stopped(_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run", stopped)
    sentences = tmp_path / "s.txt"
    sentences.write_text("A cat sat.\n")
    argv = ["score", "--model", "pll-demo", str(sentences), "-o", str(tmp_path / "o.csv")]
    assert main([*argv, *options]) == 128 + 2
    assert f"stopped by SIGINT; {advice} to resume." in capsys.readouterr().err


def test_the_command_line_imports_no_torch_until_a_command_runs():
    """``pll-harness --help`` and a usage error answer at once (0.12 s against 1.8 s when
    the command line lived in pll_harness.tools, whose package imports every tool)."""
    code = (
        "import sys\n"
        "from pll_harness.cli import main\n"
        "try:\n"
        "    main(['score', '-m', 'm', '--dtype', 'bf16', 'x.txt'])\n"
        "except SystemExit as usage:\n"
        "    assert usage.code == 2\n"
        "heavy = ('torch', 'transformers', 'pll_harness.tools')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["score", "-m", "m", "in.txt", "-o", ""],
        ["score", "-m", "m", "in.txt", "-o", "s.csv", "--tokens", " "],
        ["score", "-m", "m", ""],
        ["diagnose", "-m", "m", "--dataset", ""],
        ["diagnose", "-m", "m", "-o", ""],
        ["explain", "-m", "m", "A cat.", "--plot", ""],
        ["compare", "r/", "-o", ""],
        ["compare", ""],
        ["crows-pairs", "-m", "m", "--pairs", ""],
        ["crows-pairs", "-m", "m", "-o", ""],
    ],
)
def test_an_empty_path_is_a_usage_error(argv, capsys):
    """``-o "$OUT"`` with OUT unset: score wrote to stdout, with nothing to resume."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "is empty; give a file or folder name" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["score", "diagnose", "crows-pairs", "compare"])
def test_the_help_states_the_defaults_the_tools_use(command, capsys):
    """The command line stays free of torch, so it cannot import the chunk sizes from the
    scoring tool: its help restates them, and this keeps the two equal."""
    from pll_harness.tasks.catalog import HEADLINE, LEADERBOARD_DIR
    from pll_harness.tools.score import DEFAULT_CHUNK_SIZES

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    if command == "compare":
        assert f"(default: {LEADERBOARD_DIR})" in text and f"(default: {HEADLINE})" in text
    else:
        cpu, accelerator = DEFAULT_CHUNK_SIZES["cpu"], DEFAULT_CHUNK_SIZES["accelerator"]
        assert f"(default: {cpu} on the CPU, {accelerator} on a GPU)" in text
    if command == "diagnose":
        from pll_harness.tools.diagnose import diagnose

        defaults = inspect.signature(diagnose).parameters
        args = build_parser().parse_args(["diagnose", "-m", "some-model"])
        for name in ("dataset", "output_dir"):
            assert getattr(args, name) == defaults[name].default
            assert f"(default: {defaults[name].default})" in text


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["score", "score --tokens", "crows-pairs", "diagnose"])
def test_an_output_that_is_the_input_is_refused_before_anything_is_written(
    tmp_path, capsys, command, link
):
    """``-o`` naming the input (or a link to it) was refused as "another input" only when
    resumed, with advice to use --overwrite, which then emptied the input and wrote scores
    into it; a re-run took those rows for the input and said all was done."""
    import os

    data = tmp_path / "diag" / "sentences.csv"
    data.parent.mkdir()
    data.write_text("id,text,label\n1,A cat sat.,x\n2,She is a nurse.,y\n")
    before = data.read_text()
    output = tmp_path / "out.csv"
    if link == "same":
        output = data
    elif link == "symlink":
        output.symlink_to(data)
    else:
        os.link(data, output)
    argv = {
        "score": ["score", "-m", "m", str(data), "-o", str(output)],
        "score --tokens": ["score", "-m", "m", str(data), "-o", "o.csv", "--tokens", str(output)],
        "crows-pairs": ["crows-pairs", "-m", "m", "--pairs", str(data), "-o", str(output)],
        "diagnose": ["diagnose", "-m", "m", "--dataset", str(output), "-o", str(data.parent)],
    }[command]
    assert main([*argv, "--overwrite"]) == 1
    assert "is the input file" in capsys.readouterr().err
    assert data.read_text() == before


def test_a_full_disk_names_the_output_and_says_the_run_resumes(tmp_path, monkeypatch, capsys):
    """A full disk or a file size limit stopped the run with a bare "[Errno 28] No space
    left on device", naming no file, although a re-run resumes what was written."""
    import errno

    import pll_harness.tools.score

    def out_of_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pll_harness.tools.score, "score_file", out_of_room)
    data = tmp_path / "in.txt"
    data.write_text("A cat sat.\n")
    assert main(["score", "-m", "m", str(data), "-o", "out.csv"]) == 1
    assert capsys.readouterr().err == (
        "pll-harness score: error: No space left on device while writing out.csv: what was "
        "written before is kept; make room (or raise the file size limit) and re-run the same "
        "command to resume\n"
    )
    assert main(["score", "-m", "m", str(data), "-o", "out.csv", "--tokens", "t.csv"]) == 1
    assert "while writing out.csv or t.csv: " in capsys.readouterr().err
