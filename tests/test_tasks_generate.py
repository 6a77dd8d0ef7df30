"""scripts/generate_tasks.py: how it reads each source format, and that the packaged YAMLs
are what it writes from the catalog today."""

from __future__ import annotations

import filecmp
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from pll_harness.task_paths import TASK_DIR

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "generate_tasks.py"


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_tasks", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_clams_lines_pair_each_true_with_the_false_after_it(generate, tmp_path: Path) -> None:
    path = tmp_path / "simple_agrmt.txt"
    path.write_text("True\tthe author laughs\nFalse\tthe author laugh\nTrue\tA b\nFalse\tA c")
    assert generate.clams_pairs(path) == [
        {"sentence_good": "the author laughs", "sentence_bad": "the author laugh"},
        {"sentence_good": "A b", "sentence_bad": "A c"},
    ]
    path.write_text("True\ta\nTrue\tb\nFalse\tc\nFalse\td\n")
    with pytest.raises(ValueError, match="alternate"):
        generate.clams_pairs(path)
    path.write_text("True\ta\n\nFalse\tb\n")
    with pytest.raises(ValueError, match="blank"):
        generate.clams_pairs(path)
    path.write_text("yes\ta\nno\tb\n")
    with pytest.raises(ValueError, match="True/False"):
        generate.clams_pairs(path)


def test_zorro_lines_are_bad_then_good(generate, tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("look at this purple things .\nlook at this purple thing .\n")
    assert generate.zorro_pairs(path) == [
        {
            "sentence_good": "look at this purple thing .",
            "sentence_bad": "look at this purple things .",
        }
    ]
    path.write_text("a .\nb .\nc .\n")
    with pytest.raises(ValueError, match="odd number"):
        generate.zorro_pairs(path)


def test_crows_pairs_rows_stay_verbatim(generate, tmp_path: Path) -> None:
    path = tmp_path / "crows.csv"
    path.write_text(
        ",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,anon_annotators\n"
        '0,"A, b.","C\nd.",antistereo,age,"[[\'age\']]",a1,"[\'a2\']"\n',
        encoding="utf-8",
    )
    assert generate.crows_pairs_records(path) == [
        {
            "id": 0,
            "sent_more": "A, b.",
            "sent_less": "C\nd.",
            "stereo_antistereo": "antistereo",
            "bias_type": "age",
            "annotations": "[['age']]",
            "anon_writer": "a1",
            "anon_annotators": "['a2']",
        }
    ]
    path.write_text(path.read_text().replace(",age,", ",height,"))
    with pytest.raises(ValueError, match="unknown bias_type 'height'"):
        generate.crows_pairs_records(path)


def test_packaged_yamls_are_what_the_catalog_generates(
    generate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the YAMLs into a copy of the task folder changes nothing, so the packaged
    tasks and the catalog (read by the tools and tests) cannot drift apart."""
    copy = tmp_path / "tasks"
    folders = ["blimp_pll", "eventsadapt_pll", "crows_pairs_pll", "clams_pll", "zorro_pll"]
    for folder in folders:
        (copy / folder).mkdir(parents=True)
    monkeypatch.setattr(generate, "TASK_DIR", copy)
    for write in (
        generate.write_blimp_yamls,
        generate.write_eventsadapt_yamls,
        generate.write_crows_pairs_yamls,
        generate.write_clams_yamls,
        generate.write_zorro_yamls,
    ):
        write()
    for folder in folders:
        written = sorted(p.relative_to(copy) for p in (copy / folder).rglob("*.yaml"))
        packaged = sorted(p.relative_to(TASK_DIR) for p in (TASK_DIR / folder).rglob("*.yaml"))
        assert written == packaged, folder
        _, mismatch, errors = filecmp.cmpfiles(copy, TASK_DIR, [str(p) for p in written], False)
        assert (mismatch, errors) == ([], []), folder
