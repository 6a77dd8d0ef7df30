"""scripts/train_demo_model.py: a training cut into short runs equals one uninterrupted run.

A tiny BERT (1 layer, hidden 32) on a synthetic corpus trains for 9 steps once straight
through and once as three runs of at most 4 steps (``--run-steps``, the same mechanism that
``--max-minutes`` and SIGINT/SIGTERM use), each resuming from the checkpoint of the last. On CPU
the two must agree bitwise: weights, optimiser moments, loss history and held-out losses
(tolerance 0), since the data order, masks and RNG states are restored exactly.

The device tool's part (one bare machine a call, files back from $OUT only in pieces of at
most 16 MiB): ``--fit-minutes`` chooses the steps from a speed probe that leaves the training
untouched (bitwise the model of the same ``--steps``), ``--export-on-stop`` exports what an
early stop has, and ``scripts/device_bundle.py`` brings an export back byte for byte.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT

TINY = [
    "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "120",
    "--seq-len", "32", "--max-position", "64", "--batch-size", "8", "--steps", "9",
    "--warmup", "0.2", "--lr", "3e-3", "--heldout", "0.1", "--eval-every", "4",
    "--eval-seqs", "8", "--log-every", "1", "--ckpt-every", "100",
]  # fmt: skip


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train():
    return load_script("train_demo_model")


@pytest.fixture(scope="module")
def bundle():
    return load_script("device_bundle")


@pytest.fixture(scope="module")
def data(tmp_path_factory, train) -> Path:
    """A packed synthetic corpus: 60 documents of 5 short sentences."""
    rng = random.Random(0)
    nouns = ["dog", "cat", "teacher", "child", "farmer", "bird", "doctor", "river"]
    verbs = ["sees", "likes", "finds", "helps", "follows", "hears"]
    adjectives = ["old", "small", "happy", "green", "quiet"]
    docs = [
        "\n".join(
            f"The {rng.choice(adjectives)} {rng.choice(nouns)} {rng.choice(verbs)} "
            f"the {rng.choice(nouns)}."
            for _ in range(5)
        )
        for _ in range(60)
    ]
    root = tmp_path_factory.mktemp("tiny-corpus")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(f"# tiny\n{d}" for d in docs) + "\n", encoding="utf-8")
    packed = root / "packed.pt.xz"
    argv = ["--corpus", str(corpus), "--data", str(packed), "--work", str(root / "w")]
    assert train.main([*argv, *TINY, "--prepare-only"]) == 0
    return packed


def run(train, data: Path, work: Path, *extra: str) -> int:
    argv = ["--data", str(data), "--work", str(work), "--out", str(work / "out"), *TINY]
    return train.main([*argv, *extra])


def test_short_runs_resume_to_the_same_model_as_one_run(train, data, tmp_path):
    assert run(train, data, tmp_path / "straight") == 0
    cut = tmp_path / "cut"
    codes = [run(train, data, cut, "--run-steps", "4") for _ in range(3)]
    assert codes == [train.EXIT_RESUMABLE, train.EXIT_RESUMABLE, 0]

    a = torch.load(tmp_path / "straight" / "checkpoint.pt", weights_only=False)
    b = torch.load(cut / "checkpoint.pt", weights_only=False)
    assert a["step"] == b["step"] == 9
    assert a["history"] == b["history"] and len(a["history"]) == 9
    assert [e["heldout_loss"] for e in a["evals"]] == [e["heldout_loss"] for e in b["evals"]]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    moments = [(s["exp_avg"], t["exp_avg"]) for s, t in zip(
        a["opt"]["state"].values(), b["opt"]["state"].values(), strict=True)]  # fmt: skip
    assert all(torch.equal(x, y) for x, y in moments)
    assert a["history"][0][1] != a["history"][-1][1]  # it did train
    same = (tmp_path / "straight/out/model.safetensors").read_bytes()
    assert same == (cut / "out" / "model.safetensors").read_bytes()


def test_export_loads_as_a_fast_masked_lm(train, data, tmp_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    assert run(train, data, tmp_path, "--steps", "2") == 0
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "out")
    assert tokenizer.is_fast and tokenizer.mask_token == "[MASK]"
    assert model.dtype == torch.float32
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 32


def test_resume_under_another_schedule_is_refused(train, data, tmp_path):
    assert run(train, data, tmp_path, "--run-steps", "2") == train.EXIT_RESUMABLE
    with pytest.raises(SystemExit, match=re.escape("'lr': (0.003, 0.002)")):
        run(train, data, tmp_path, "--lr", "2e-3")


@pytest.mark.parametrize("minutes", ["0", "-1", "nan", "inf"])
def test_fit_minutes_must_be_positive(train, data, tmp_path, capsys, minutes):
    """0 once passed as "not given" and trained the default 3,000 steps."""
    argv = ["--data", str(data), "--work", str(tmp_path), "--out", str(tmp_path / "out")]
    argv += without(TINY, "--steps")
    with pytest.raises(SystemExit):
        train.main([*argv, "--fit-minutes", minutes])
    assert "must be a positive number of minutes" in capsys.readouterr().err
    assert not (tmp_path / "checkpoint.pt").exists()


def test_weights_over_the_size_limit_are_refused(train, data, tmp_path):
    assert run(train, data, tmp_path, "--run-steps", "1") == train.EXIT_RESUMABLE
    with pytest.raises(SystemExit, match=re.escape("over the 0.001 MB limit")):
        run(train, data, tmp_path, "--export-only", "--max-weights-mb", "0.001")
    assert not (tmp_path / "out").exists()


def test_export_on_stop_exports_what_an_early_stop_has(train, data, tmp_path):
    code = run(train, data, tmp_path, "--run-steps", "3", "--export-on-stop")
    assert code == train.EXIT_RESUMABLE
    meta = json.loads((tmp_path / "train_meta.json").read_text())
    assert meta["steps"] == 3 and meta["complete"] is False
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert run(train, data, tmp_path) == 0  # and the checkpoint still resumes to the end
    assert json.loads((tmp_path / "train_meta.json").read_text())["complete"] is True


def without(argv: list[str], *flags: str) -> list[str]:
    """``argv`` less the given flags and their values."""
    drop = {i + k for i, a in enumerate(argv) if a in flags for k in (0, 1)}
    return [a for i, a in enumerate(argv) if i not in drop]


def test_the_speed_probe_times_steps_only_after_one_of_each_batch_length(train):
    """Each new input shape is slow at first on a GPU, so that a probe timing the first
    steps chose a seventh of the steps an H100 had time for: the untimed steps cover every
    padded length of the epoch, once each."""
    lengths = torch.tensor([3, 9, 9, 4, 7, 3, 9, 2])
    batches = [[0, 3], [1, 2], [5, 7], [4, 0], [6, 3]]  # padded to 4, 9, 3, 7, 9
    assert train.probe_batches(batches, lengths) == [[0, 3], [1, 2], [5, 7], [4, 0]]


def probe_windows(train, monkeypatch, ms: list[float]) -> list[float]:
    """The windows the probe times when its k-th window runs at ``ms[k]`` ms a step, with
    windows of 100 steps and at least 10 s, at most 30 s of them."""
    monkeypatch.setattr(train, "PROBE_STEPS", 100)
    monkeypatch.setattr(train, "PROBE_MIN_S", 10.0)
    monkeypatch.setattr(train, "PROBE_MAX_S", 30.0)
    return [round(w * 1e3, 6) for w in train.probe_windows(lambda k: ms[k] / 1e3)]


def test_the_speed_probe_times_windows_until_the_speed_settles(train, monkeypatch):
    """An H200 sped up over the training's first few hundred steps, after the untimed ones:
    one window of 40 steps measured 37.4 ms a step where the training ran at 19, and chose
    half the steps the call had time for.  The probe goes on until its speed settles and
    takes the last window's."""
    # the first window and the training's speed are the H200's; the windows between made up
    h200 = [37.4, 30.0, 24.0, 21.0, 19.5, 19.3, 19.2, 19.2, 19.2]
    # the 6th window is the first within 10 % of the two before it
    assert probe_windows(train, monkeypatch, h200) == h200[:6]
    # settled at once, still timed for PROBE_MIN_S: 10 windows of 1 s
    assert probe_windows(train, monkeypatch, [10.0] * 20) == [10.0] * 10
    # a speed that never settles stops at PROBE_MAX_S: 30 s in 20 windows of 1.5 s
    swinging = [10.0, 20.0] * 20
    assert probe_windows(train, monkeypatch, swinging) == swinging[:20]
    # a steady speed-up of under 10 % a window is not settled: within 10 % of two windows
    assert probe_windows(train, monkeypatch, [50.0, 44.0, 40.0, 38.0, 37.5]) == [
        50.0, 44.0, 40.0, 38.0, 37.5,
    ]  # fmt: skip


@pytest.mark.parametrize("dropout", ["0.0", "0.1"])
def test_fit_minutes_trains_the_model_of_the_steps_it_chose(
    train, data, tmp_path, monkeypatch, dropout
):
    """The real probe runs (on its copy, windows of 2 timed steps after its untimed ones);
    the speed it reports is replaced by 3 s a step, so that the steps depend on the clock
    only through the run's start-up (under 45 s), and stay few enough to train twice in
    seconds.  With dropout, the probe's steps draw from the global random generator, which
    the training must find untouched."""
    probe = train.probe_speed
    monkeypatch.setattr(train, "PROBE_STEPS", 2)
    monkeypatch.setattr(train, "PROBE_MIN_S", 0.0)
    monkeypatch.setattr(train, "probe_speed", lambda *a: (probe(*a), ([3.0], 0.0))[1])
    base = [*without(TINY, "--steps", "--eval-every"), "--eval-every", "50", "--dropout", dropout]
    fit = tmp_path / "fit"
    argv = ["--data", str(data), "--work", str(fit), "--out", str(fit / "o"), *base]
    argv += ["--fit-minutes", "1", "--fit-reserve", "0"]
    assert train.main([*argv, "--run-steps", "5"]) == train.EXIT_RESUMABLE
    assert train.main(argv) == 0  # the resumed run keeps the first run's steps
    steps = json.loads((fit / "train_meta.json").read_text())["steps"]
    assert 3 < steps <= 0.9 * 60 / 3  # (1 - PROBE_MARGIN) x 60 s at 3 s a step, less start-up
    fixed = tmp_path / "fixed"
    argv = ["--data", str(data), "--work", str(fixed), "--out", str(fixed / "o"), *base]
    assert train.main([*argv, "--steps", str(steps)]) == 0
    same = (fit / "o" / "model.safetensors").read_bytes()
    assert same == (fixed / "o" / "model.safetensors").read_bytes()


def test_bundle_brings_an_export_back_byte_for_byte(train, bundle, data, tmp_path):
    assert run(train, data, tmp_path / "w", "--steps", "2") == 0
    export, meta = tmp_path / "w" / "out", tmp_path / "w" / "train_meta.json"
    out = tmp_path / "OUT"
    manifest = bundle.pack([export, meta], out, "pll-demo", piece_mib=0.02)
    pieces = sorted(out.glob("pll-demo.tar.*"))
    assert len(pieces) == len(manifest["pieces"]) >= 3  # the weights span several pieces
    assert all(p.stat().st_size <= 0.02 * 2**20 for p in pieces)
    assert bundle.unpack(out / "pll-demo.json", tmp_path / "back") == manifest["members"]
    originals = [*sorted(export.iterdir()), meta]
    for original in originals:
        name = original.name if original == meta else f"out/{original.name}"
        assert (tmp_path / "back" / name).read_bytes() == original.read_bytes(), name
    assert len(manifest["members"]) == len(originals)


def test_bundle_refuses_a_damaged_or_missing_piece(bundle, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "blob.bin").write_bytes(bytes(range(256)) * 1000)
    bundle.pack([src], tmp_path / "OUT", "b", piece_mib=0.1)
    piece = tmp_path / "OUT" / "b.tar.001"
    good = piece.read_bytes()
    piece.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(SystemExit, match="differs from the manifest"):
        bundle.unpack(tmp_path / "OUT" / "b.json", tmp_path / "x")
    piece.unlink()
    with pytest.raises(SystemExit, match="is missing"):
        bundle.unpack(tmp_path / "OUT" / "b.json", tmp_path / "y")


CARD = REPO_ROOT / "pll_harness" / "models" / "pll-demo" / "README.md"
# The card's device command on this CPU: the same text with a tiny model and a fixed length
# (a time budget would make the test as slow as the budget, or fail on a busy machine; the
# budgeting itself is tested above).
ON_CPU = {
    "--device": "cpu", "--layers": "1", "--hidden": "32", "--heads": "2", "--batch-size": "8",
    "--blimp-dev": "1", "--log-every": "10", "--eval-every": "10",
}  # fmt: skip


def card_device_call() -> tuple[str, int]:
    """The bash block that follows "`command`:" in the model card, and its `timeout_s`."""
    text = CARD.read_text(encoding="utf-8")
    block = re.search(r"`command`:\s*```bash\n(.*?)```", text, re.S)
    timeout = re.search(r"`timeout_s`: `(\d+)`", text)
    assert block and timeout, "the model card has no device call"
    return textwrap.dedent(block.group(1)), int(timeout.group(1))


def test_the_cards_device_call_fits_the_tools_limits(train):
    """The command is short enough, its arguments parse, and its budget ends inside its
    timeout: training by --fit-minutes, the guard's stop by --max-minutes, then the final
    evaluation and export (within --fit-reserve) before timeout_s (at most 600)."""
    command, timeout = card_device_call()
    assert len(command) <= 2000 and timeout <= 600
    line = next(ln for ln in command.splitlines() if "scripts/train_demo_model.py" in ln)
    argv = shlex.split(line.split("scripts/train_demo_model.py", 1)[1].split("2>&1")[0])
    args = train.parse_args(argv)
    assert args.fit_minutes and args.export_on_stop and args.device == "cuda"
    assert args.fit_minutes < args.max_minutes
    assert args.max_minutes * 60 + args.fit_reserve < timeout


def test_the_cards_device_command_runs_and_its_files_come_back(train, bundle, data, tmp_path):
    """The model card's one device call, as the device would run it but on the CPU: in a tree
    with the packed data where `carry` puts it, $OUT a fresh folder; what it leaves there must
    pass the device tool's limits and unpack to a loadable export."""
    command, _ = card_device_call()
    for flag, value in ON_CPU.items():
        command, n = re.subn(rf"{flag} \S+", f"{flag} {value}", command)
        assert n == 1, flag
    command, n = re.subn(r"--fit-minutes \S+ --fit-reserve \S+", "--steps 20", command)
    assert n == 1
    command = command.replace("W=/tmp/demo", f"W={tmp_path / 'disk'}")
    command = command.replace("python3 ", f"{sys.executable} ")
    tree = tmp_path / "tree"
    (tree / ".demo-train" / "device").mkdir(parents=True)
    for name in ("scripts", "pll_harness"):
        (tree / name).symlink_to(REPO_ROOT / name)
    packed = tree / ".demo-train" / "device" / "packed_64.pt.xz"
    argv = ["--corpus", str(data.parent / "corpus.txt"), "--data", str(packed)]
    argv += ["--work", str(tmp_path / "prep"), "--vocab-size", "120", "--heldout", "0.1"]
    assert train.main([*argv, "--batch-size", "8", "--prepare-only"]) == 0
    out = tmp_path / "OUT"
    out.mkdir()
    env = {**os.environ, "OUT": str(out)}
    done = subprocess.run(["bash", "-c", command], cwd=tree, env=env, capture_output=True)
    assert done.returncode == 0, done.stdout.decode()[-3000:] + done.stderr.decode()[-3000:]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= bundle.OUT_MAX_FILES
    assert all(p.stat().st_size <= bundle.OUT_MAX_FILE_BYTES for p in files)
    meta = json.loads((out / "train_meta.json").read_text())
    assert meta["complete"] is True and "blimp_dev" in meta["evals"][-1]
    back = tmp_path / "back"
    bundle.unpack(out / "pll-demo.json", back)
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(back / "pll-demo")
    assert model.dtype == torch.float32 and model.config.num_hidden_layers == 1
