"""The adapter's token log: appending after a run that was killed mid-record."""

from __future__ import annotations

import json

import pytest

import pll_harness.token_log as token_log
from pll_harness.token_log import TokenLog


@pytest.mark.parametrize("block", [token_log.TAIL_BLOCK, 7])
def test_append_drops_a_record_cut_short(tmp_path, monkeypatch, block):
    monkeypatch.setattr(token_log, "TAIL_BLOCK", block)  # 7: the last line spans blocks
    path = tmp_path / "tokens.jsonl"
    path.write_text('{"n": 1}\n{"n": 2, "text": "a long one"}\n{"n": 3, "te')
    log = TokenLog(path, "append")
    log.write([{"n": 4}])
    log.close()
    assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [1, 2, 4]


def test_append_keeps_whole_records_and_a_cut_first_record_goes(tmp_path):
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    whole.write_text('{"n": 1}\n')
    cut.write_text('{"n": 1')
    for path in (whole, cut):
        log = TokenLog(path, "append")
        log.write([{"n": 2}])
        log.close()
    assert whole.read_text() == '{"n": 1}\n{"n": 2}\n'
    assert cut.read_text() == '{"n": 2}\n'


def test_discard_removes_only_an_empty_log_this_run_created(tmp_path):
    """A run that fails as it starts left an empty log and the folders made for it."""
    made = tmp_path / "a" / "b" / "tokens.jsonl"
    TokenLog(made, "new").discard()
    assert not (tmp_path / "a").exists()
    kept = tmp_path / "kept.jsonl"
    kept.write_text('{"n": 1}\n')
    TokenLog(kept, "append").discard()
    assert kept.read_text() == '{"n": 1}\n'
    written = tmp_path / "out" / "written.jsonl"
    log = TokenLog(written, "new")
    log.write([{"n": 1}])
    log.discard()
    assert written.read_text() == '{"n": 1}\n'


def test_a_file_system_without_locks_leaves_no_empty_log_behind(tmp_path, monkeypatch):
    """ENOLCK stopped the run with what to do, but left the empty log it had just created
    (and its folders), which the next run, on a local disk as advised, does not need."""
    import errno
    import fcntl

    def unsupported(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", unsupported)
    with pytest.raises(ValueError, match="cannot be locked"):
        TokenLog(tmp_path / "a" / "tokens.jsonl", "new")
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept.jsonl"
    kept.write_text('{"n": 1}\n')
    with pytest.raises(ValueError, match="cannot be locked"):
        TokenLog(kept, "append")
    assert kept.read_text() == '{"n": 1}\n'


@pytest.mark.parametrize("mode", ["new", "overwrite", "append"])
def test_a_folder_is_refused_with_a_file_name_to_use(tmp_path, mode):
    """open() would fail with a bare errno (File exists, Is a directory)."""
    with pytest.raises(ValueError, match=r"is a folder; name a file in it, such as .*tokens"):
        TokenLog(tmp_path, mode)
    assert list(tmp_path.iterdir()) == []


def test_discard_keeps_an_empty_log_this_run_did_not_create(tmp_path):
    """An empty file the user made (``touch tokens.jsonl``) or an earlier run left is not
    this run's to delete when it fails as it starts: only a file it created goes."""
    path = tmp_path / "tokens.jsonl"
    path.write_text("")
    TokenLog(path, "append").discard()
    assert path.exists()
