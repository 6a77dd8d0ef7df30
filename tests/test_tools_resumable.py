"""Record files of ``pll-harness score``: one writer at a time, and resuming that drops
only a record cut short by a killed write and refuses every other kind of damage."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pll_harness.file_formats import jsonl_text
from pll_harness.tools.resumable import (
    DamagedOutput,
    RecordFile,
    check_creatable,
    csv_text,
    record_format,
    start_all,
)

COLUMNS = ["id", "text", "score"]
ROWS = [
    {"id": "0", "text": "Plain text.", "score": "-1.5"},
    {"id": "1", "text": 'Stephen\nKing said "hi", twice.\r\nThen left.', "score": "-2.25"},
    {"id": "2", "text": "Line\u2028separator and \x85 next-line.", "score": "-3.0"},
]


def write(path, fmt, rows=ROWS):
    text = csv_text(COLUMNS, rows, header=True) if fmt == "csv" else jsonl_text(rows)
    path.write_bytes(text.encode("utf-8"))
    return text.encode("utf-8")


def reopen(path, fmt, **kwargs) -> list[dict]:
    """What a resuming run finds in ``path``, once it has started writing there."""
    record_file = RecordFile(path, fmt, COLUMNS, ("id",), **kwargs)
    try:
        record_file.start()
        return record_file.records
    finally:
        record_file.close()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_whole_records_read_back(tmp_path, fmt):
    path = tmp_path / f"out.{fmt}"
    data = write(path, fmt)
    assert reopen(path, fmt) == ROWS
    assert path.read_bytes() == data


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_record_cut_anywhere_is_dropped_and_the_rest_kept(tmp_path, fmt):
    """Cut at every byte of the last two records (inside quoted newlines, inside a UTF-8
    character): the whole records before the cut come back, the file is trimmed to them."""
    path = tmp_path / f"out.{fmt}"
    data = write(path, fmt)
    whole = [write(path, fmt, ROWS[:n]) for n in range(len(ROWS) + 1)]
    for cut in range(len(whole[1]), len(data)):
        path.write_bytes(data[:cut])
        kept = max(n for n in range(len(ROWS) + 1) if len(whole[n]) <= cut)
        assert reopen(path, fmt) == ROWS[:kept], cut
        assert path.read_bytes() == whole[kept], cut


def test_a_cut_header_starts_afresh(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("id,te")
    assert reopen(path, "csv") == []
    assert path.read_bytes() == b"id,text,score\r\n"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("blank", ["\n", "\r\n\r\n", "\n\n\n"])
def test_trailing_blank_lines_are_dropped_and_the_records_kept(tmp_path, fmt, blank):
    """An editor's extra final newline is no damage: the records stay, and the blank lines
    go, so that the next records follow the last one and the file stays well-formed."""
    path = tmp_path / f"out.{fmt}"
    data = write(path, fmt)
    path.write_bytes(data + blank.encode())
    record_file = RecordFile(path, fmt, COLUMNS, ("id",))
    try:
        assert record_file.records == ROWS
        record_file.start()
        record_file.append([{"id": "3", "text": "More.", "score": "-4.0"}])
    finally:
        record_file.close()
    assert reopen(path, fmt) == [*ROWS, {"id": "3", "text": "More.", "score": "-4.0"}]
    assert path.read_bytes().startswith(data) and not path.read_bytes().endswith(b"\n\n")


def test_a_blank_line_between_records_is_still_refused(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(jsonl_text(ROWS[:1]) + "\n" + jsonl_text(ROWS[1:]))
    with pytest.raises(DamagedOutput, match="line 2"):
        reopen(path, "jsonl")
    path = tmp_path / "out.csv"
    path.write_text(
        csv_text(COLUMNS, ROWS[:1], header=True)
        + "\r\n"
        + csv_text(COLUMNS, ROWS[1:], header=False),
        newline="",
    )
    with pytest.raises(DamagedOutput, match="broken after its first 1 records"):
        reopen(path, "csv")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_an_empty_file_that_a_failed_run_left_starts_afresh(tmp_path, fmt):
    """A run that fails while scoring its first chunk leaves the file it started: empty
    (JSONL) or a header alone (CSV).  The re-run reads no records and writes afresh."""
    path = tmp_path / f"out.{fmt}"
    path.write_text(csv_text(COLUMNS, [], header=True) if fmt == "csv" else "", newline="")
    record_file = RecordFile(path, fmt, COLUMNS, ("id",))
    try:
        assert record_file.records == []
        record_file.start()
        record_file.append(ROWS)
    finally:
        record_file.close()
    assert path.read_bytes() == write(tmp_path / f"whole.{fmt}", fmt)


def test_csv_written_with_plain_newlines_is_read(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("id,text,score\n0,Plain text.,-1.5\n")
    assert reopen(path, "csv") == ROWS[:1]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_duplicate_ids_are_refused(tmp_path, fmt):
    path = tmp_path / f"out.{fmt}"
    write(path, fmt, [*ROWS, ROWS[0]])
    with pytest.raises(DamagedOutput, match="holds id 0 twice"):
        reopen(path, fmt)


def test_a_fragment_between_records_is_refused(tmp_path):
    """What two interleaved writers leave: a cut row followed by more rows."""
    path = tmp_path / "out.csv"
    header_and_first = csv_text(COLUMNS, ROWS[:1], header=True)
    path.write_text(
        header_and_first + "1,Stephen" + csv_text(COLUMNS, ROWS[2:], header=False), newline=""
    )
    with pytest.raises(DamagedOutput, match="broken after its first 1 records"):
        reopen(path, "csv")
    path.write_text(header_and_first + "1,Stephen,-2.0,extra\r\n", newline="")
    with pytest.raises(DamagedOutput, match="broken"):
        reopen(path, "csv")


def test_a_broken_jsonl_line_is_refused(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(jsonl_text(ROWS[:1]) + '{"id": "1", "te\n' + jsonl_text(ROWS[2:]))
    with pytest.raises(DamagedOutput, match="line 2"):
        reopen(path, "jsonl")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_other_columns_are_refused(tmp_path, fmt):
    path = tmp_path / f"out.{fmt}"
    write(path, fmt)
    with pytest.raises(ValueError, match="has columns"):
        RecordFile(path, fmt, ["id", "text"], ("id",))


def test_an_unrelated_file_is_not_truncated(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text("my own notes")
    with pytest.raises(DamagedOutput):
        reopen(path, "csv")
    assert path.read_text() == "my own notes"


def test_nested_jsonl_fields_are_allowed(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({**ROWS[0], "tokens": [1, 2]}) + "\n")
    assert reopen(path, "jsonl", nested=("tokens",))[0]["tokens"] == [1, 2]


def test_a_second_writer_is_refused_until_the_first_closes(tmp_path):
    path = tmp_path / "out.csv"
    first = RecordFile(path, "csv", COLUMNS, ("id",))
    try:
        first.start()
        with pytest.raises(ValueError, match="being written by another writer"):
            RecordFile(path, "csv", COLUMNS, ("id",))
        first.append(ROWS)
    finally:
        first.close()
    assert reopen(path, "csv") == ROWS


def test_overwrite_starts_the_file_anew(tmp_path):
    path = tmp_path / "out.csv"
    write(path, "csv")
    record_file = RecordFile(path, "csv", COLUMNS, ("id",), overwrite=True)
    try:
        assert record_file.records == []
        record_file.start()
        record_file.append(ROWS[1:2])
    finally:
        record_file.close()
    assert reopen(path, "csv") == ROWS[1:2]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("count", [0, 1, 2, 3])
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "last-cut-short"])
def test_keep_first_cuts_the_file_after_its_first_records(tmp_path, fmt, count, cut):
    """Cut, not rewritten: the bytes of the records kept stay as they were (the records hold
    line breaks inside quotes and characters of several bytes), and a record cut short
    after them goes too."""
    path = tmp_path / f"out.{fmt}"
    data = write(path, fmt)
    if cut:
        path.write_bytes(data + data[-9:-4])  # a record cut short, as a killed write leaves it
    record_file = RecordFile(path, fmt, COLUMNS, ("id",))
    try:
        record_file.keep_first(count)
        assert record_file.records == ROWS[:count]
        record_file.start()
    finally:
        record_file.close()
    assert path.read_bytes() == write(tmp_path / "want", fmt, ROWS[:count])
    assert reopen(path, fmt) == ROWS[:count]


def test_a_field_past_the_csv_modules_default_limit_resumes(tmp_path):
    """csv's 128 KiB field limit would make a long text look like damage."""
    rows = [*ROWS, {"id": "3", "text": "word " * 40_000, "score": "-9.0"}]
    path = tmp_path / "out.csv"
    write(path, "csv", rows)
    previous = csv.field_size_limit(128 * 1024)  # as a fresh process has it
    try:
        assert reopen(path, "csv") == rows
    finally:
        csv.field_size_limit(previous)


@pytest.mark.parametrize(
    ("name", "explicit"),
    [
        ("out.gz", None),
        ("out.csv.gz", "jsonl"),
        ("out.jsonl.zst", None),
        ("out.csv.GZ", None),  # a suffix in capitals compresses as well
    ],
)
def test_a_compressed_name_is_refused_whatever_the_format(name, explicit):
    with pytest.raises(ValueError, match="drop the compression suffix"):
        record_format(name, explicit)


def test_fixed_fields_are_stamped_and_checked(tmp_path):
    path = tmp_path / "out.jsonl"
    columns = [*COLUMNS, "model"]
    first = RecordFile(path, "jsonl", columns, ("id",), fixed={"model": "a"})
    first.start()
    first.append([ROWS[0]])
    first.close()
    again = RecordFile(path, "jsonl", columns, ("id",), fixed={"model": "a"})
    assert again.records == [{**ROWS[0], "model": "a"}]
    again.close()
    with pytest.raises(ValueError, match="was written with model a, but this run has model b"):
        RecordFile(path, "jsonl", columns, ("id",), fixed={"model": "b"})


def test_a_hub_models_commit_is_checked_once_the_model_has_loaded(tmp_path):
    """Before the model loads its label has no commit, and only the rest is compared; the
    label it has once loaded (:meth:`RecordFile.confirm`) must name the records' commit,
    and is what the rows it adds hold."""
    path, columns = tmp_path / "out.jsonl", [*COLUMNS, "model"]
    first, other = "org/m commit=" + "a" * 40, "org/m commit=" + "b" * 40
    written = RecordFile(path, "jsonl", columns, ("id",), fixed={"model": first})
    written.start()
    written.append([ROWS[0]])
    written.close()
    resumed = RecordFile(path, "jsonl", columns, ("id",), fixed={"model": "org/m"})
    with pytest.raises(ValueError, match=r"at commit a{40}, but this run loaded commit b{40}"):
        resumed.confirm({"model": other})
    resumed.close()
    resumed = RecordFile(path, "jsonl", columns, ("id",), fixed={"model": "org/m"})
    resumed.confirm({"model": first})
    resumed.start()
    resumed.append([ROWS[1]])
    resumed.close()
    assert [json.loads(line)["model"] for line in path.read_text().splitlines()] == [first] * 2
    with pytest.raises(ValueError, match="but this run has model org/n;"):
        RecordFile(path, "jsonl", columns, ("id",), fixed={"model": "org/n"})


@pytest.mark.parametrize(("name", "explicit"), [("out.csv", "jsonl"), ("out.jsonl", "csv")])
def test_a_format_that_contradicts_the_name_is_refused(name, explicit):
    with pytest.raises(ValueError, match="is named"):
        record_format(name, explicit)
    assert record_format("out", explicit) == explicit
    assert record_format(name.replace("out", "same"), name.rsplit(".", 1)[1]) in ("csv", "jsonl")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_opening_creates_and_changes_nothing_until_the_run_starts(tmp_path, fmt):
    """A run that fails between opening its outputs and starting them (a model that does
    not load) leaves no file, nor a header alone, and an earlier run's file as it was."""
    new = tmp_path / "new" / f"out.{fmt}"
    RecordFile(new, fmt, COLUMNS, ("id",)).close()
    assert not new.parent.exists()

    cut = tmp_path / f"cut.{fmt}"
    data = write(cut, fmt)
    cut.write_bytes(data[:-3])
    for overwrite in (False, True):
        record_file = RecordFile(cut, fmt, COLUMNS, ("id",), overwrite=overwrite)
        record_file.close()
        assert cut.read_bytes() == data[:-3]


def test_a_file_another_run_creates_meanwhile_is_refused_and_left_to_it(tmp_path):
    """Two runs open a file that does not exist yet; the second to start is refused and
    removes only what it created itself (``start_all``)."""
    ours, theirs = tmp_path / "ours.csv", tmp_path / "theirs.csv"
    mine = [RecordFile(path, "csv", COLUMNS, ("id",)) for path in (ours, theirs)]
    other = RecordFile(theirs, "csv", COLUMNS, ("id",))
    try:
        other.start()
        other.append(ROWS[:1])
        with pytest.raises(ValueError, match="was created by another run while this one started"):
            start_all(mine)
        assert not ours.exists()
        other.append(ROWS[1:])
    finally:
        for record_file in (*mine, other):
            record_file.close()
    assert reopen(theirs, "csv") == ROWS


def test_a_file_in_a_folder_that_cannot_be_made_is_refused_on_opening(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(NotADirectoryError, match="a-file"):
        RecordFile(tmp_path / "a-file" / "sub" / "out.csv", "csv", COLUMNS, ("id",))


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_output_that_is_a_pipe_or_a_device_is_refused_on_opening(tmp_path, kind):
    """A FIFO was refused with a bare "File or stream is not seekable"; /dev/full was read
    back for resuming, zeros without end, and the run hung."""
    import os

    if kind == "fifo":
        path = tmp_path / "out.csv"
        os.mkfifo(path)
    else:
        path = tmp_path / "device.csv"
        path.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="not a file but a pipe or a device"):
        RecordFile(path, "csv", COLUMNS, ("id",))


def test_jsonl_fields_are_in_the_order_of_the_columns(tmp_path):
    """The columns define a record's layout in JSONL as in CSV: the fixed ``model`` in its
    place, nested fields after, whatever order the row was built in."""
    path = tmp_path / "out.jsonl"
    columns = ["id", "model", "text", "score"]
    record_file = RecordFile(
        path, "jsonl", columns, ("id",), nested=("tokens",), fixed={"model": "m"}
    )
    try:
        record_file.start()
        record_file.append([{"tokens": [1], "score": "-1.5", "text": "Hi.", "id": "0"}])
    finally:
        record_file.close()
    assert list(json.loads(path.read_text())) == [*columns, "tokens"]


def test_a_file_removed_after_a_failed_start_is_never_handed_to_another_run(tmp_path, monkeypatch):
    """``start_all`` removes the file it created while it still holds the lock: a run that
    opened it between the lock's release and its removal would write to a file that no
    longer has a name, and lose every record."""
    ours, theirs = tmp_path / "ours.csv", tmp_path / "theirs.csv"
    mine = [RecordFile(path, "csv", COLUMNS, ("id",)) for path in (ours, theirs)]
    other = RecordFile(theirs, "csv", COLUMNS, ("id",))
    close, late = RecordFile.close, []

    def close_then_open_again(record_file):
        close(record_file)
        if record_file.path == ours and not late:
            late.append(RecordFile(ours, "csv", COLUMNS, ("id",)))

    monkeypatch.setattr(RecordFile, "close", close_then_open_again)
    try:
        other.start()
        with pytest.raises(ValueError, match="was created by another run while this one started"):
            start_all(mine)
        late[0].start()
        late[0].append(ROWS)
    finally:
        for record_file in (*mine, other, *late):
            close(record_file)
    assert reopen(ours, "csv") == ROWS


def test_a_link_to_nothing_is_refused_before_anything_is_written(tmp_path):
    """Creating the file exclusively through such a link fails every time, which read as
    another run having created it meanwhile."""
    link = tmp_path / "out.csv"
    link.symlink_to(tmp_path / "missing" / "target.csv")
    with pytest.raises(ValueError, match=r"out.csv is a link to .*target.csv, which does not"):
        RecordFile(link, "csv", COLUMNS, ("id",))
    assert not (tmp_path / "missing").exists()
    target = tmp_path / "elsewhere.csv"
    write(target, "csv", ROWS[:1])
    present = tmp_path / "present.csv"
    present.symlink_to(target)
    check_creatable(present)  # a link to a file is that file (diagnose's report.md)
    assert reopen(present, "csv") == ROWS[:1]


@pytest.mark.parametrize(
    ("fmt", "bad"),
    [
        *(("csv", bad) for bad in ("oops92.21", "n/a", "")),
        *(("jsonl", bad) for bad in ("oops92.21", "", True, None)),
    ],
)
def test_a_score_that_is_not_a_number_is_damage(tmp_path, fmt, bad):
    """Taken for a finished record, it stopped a later command with a bare "could not
    convert string to float" that named no file."""
    path = tmp_path / f"out.{fmt}"
    write(path, fmt, [*ROWS[:2], {**ROWS[2], "score": bad}])
    assert reopen(path, fmt) == [*ROWS[:2], {**ROWS[2], "score": bad}]  # not a number column
    with pytest.raises(ValueError, match=rf"out.{fmt} holds id 2 with score .*not a number"):
        reopen(path, fmt, numeric=["score"])


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_an_output_saved_with_a_byte_order_mark_resumes(tmp_path, fmt):
    """A spreadsheet program that saves the file puts one before the header: it was
    refused as other columns ('\ufeffid') or, in JSON Lines, as a line that is no record."""
    path = tmp_path / f"out.{fmt}"
    path.write_bytes(b"\xef\xbb\xbf" + write(path, fmt, ROWS[:2]) + b"2,Cut sh")
    record_file = RecordFile(path, fmt, COLUMNS, ("id",))
    try:
        assert record_file.records == ROWS[:2]
        record_file.start()
        record_file.append(ROWS[2:])
    finally:
        record_file.close()
    assert path.read_bytes() == b"\xef\xbb\xbf" + write(tmp_path / "want", fmt)
    assert reopen(path, fmt) == ROWS


def test_each_chunk_is_on_disk_before_the_next_is_scored(tmp_path, monkeypatch):
    """A chunk flushed but not synced can be lost to a power cut or a node that goes down
    while the resumed run takes the file as it finds it: every append ends with an fsync
    of the output."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    record_file = RecordFile(tmp_path / "out.csv", "csv", COLUMNS, ("id",))
    try:
        record_file.start()
        synced.clear()
        record_file.append(ROWS[:1])
        assert synced == [record_file.handle.fileno()]
    finally:
        record_file.close()


def test_a_folder_this_process_cannot_write_in_is_refused_on_opening(tmp_path, monkeypatch):
    """An output in a read-only folder must stop the run before the models load, not once
    they have. Root may write anywhere, so the folder is read-only as ``os.access`` says."""
    import os

    monkeypatch.setattr(os, "access", lambda path, mode: not mode & os.W_OK)
    with pytest.raises(PermissionError):
        check_creatable(tmp_path / "out.csv")


@pytest.mark.parametrize("how", ["removed", "replaced", "its folder replaced by a file"])
def test_a_file_removed_or_replaced_under_a_run_stops_it(tmp_path, how):
    """A run held its file open and went on writing into it after ``rm`` or ``sed -i``
    (which writes a new file under the name): every later record was lost, and the run
    said it had written them."""
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "out.csv"
    record_file = RecordFile(path, "csv", COLUMNS, ("id",))
    record_file.start()
    record_file.append([{"id": "0", "text": "a", "score": -1.0}])
    if how == "its folder replaced by a file":
        folder.rename(tmp_path / "moved")
        folder.write_bytes(b"")
    else:
        path.unlink()
    if how == "replaced":
        path.write_bytes(b"id,text,score\r\n")
    with pytest.raises(ValueError, match="removed or replaced"):
        record_file.append([{"id": "1", "text": "b", "score": -2.0}])
    record_file.close()


def test_a_file_named_relatively_is_found_again_from_another_working_folder(tmp_path, monkeypatch):
    """The check that the file still has its name looks it up by the absolute name it
    had when the run began, not relative to wherever the process is now."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    record_file = RecordFile(Path("out.csv"), "csv", COLUMNS, ("id",))
    record_file.start()
    monkeypatch.chdir(tmp_path / "elsewhere")
    record_file.append([{"id": "0", "text": "a", "score": -1.0}])
    record_file.close()
    assert (tmp_path / "out.csv").read_text().count("\n") == 2


def test_a_jsonl_key_held_as_a_number_and_as_text_is_a_duplicate(tmp_path):
    """The tools match records by ``str(id)``: ``0`` beside ``"0"`` was taken for two
    records, and the file, holding two scores of one sentence, for a finished one."""
    path = tmp_path / "out.jsonl"
    path.write_text(
        jsonl_text([{"id": "0", "text": "a", "score": -1.0}, {"id": 0, "text": "a", "score": -2.0}])
    )
    with pytest.raises(DamagedOutput, match="twice"):
        RecordFile(path, "jsonl", COLUMNS, ("id",))


def test_a_file_system_without_locks_leaves_no_empty_output_behind(tmp_path, monkeypatch):
    """ENOLCK stopped the run with what to do, but left the empty output it had just
    created; a file another writer holds (EAGAIN) is never removed."""
    import errno
    import fcntl

    def unsupported(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    path = tmp_path / "out.csv"
    record_file = RecordFile(path, "csv", COLUMNS, ("id",))
    monkeypatch.setattr(fcntl, "flock", unsupported)
    with pytest.raises(ValueError, match="cannot be locked"):
        record_file.start()
    assert not path.exists()

    def held(*_args):
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(fcntl, "flock", held)
    record_file = RecordFile(path, "csv", COLUMNS, ("id",))
    with pytest.raises(ValueError, match="another writer"):
        record_file.start()
    assert path.exists()


def test_a_file_that_got_records_before_the_lock_failed_is_kept(tmp_path, monkeypatch):
    """ENOLCK can come late (a network mount's lock daemon that does not answer), and
    another writer, on a client whose locks work, may have opened the file just created
    and written its records meanwhile: a file with content is never removed."""
    import errno
    import fcntl

    path = tmp_path / "out.csv"

    def another_writer_then_no_lock(*_args):
        path.write_text("id,text\n1,theirs\n")
        raise OSError(errno.ENOLCK, "No locks available")

    record_file = RecordFile(path, "csv", COLUMNS, ("id",))
    monkeypatch.setattr(fcntl, "flock", another_writer_then_no_lock)
    with pytest.raises(ValueError, match="cannot be locked"):
        record_file.start()
    assert path.read_text() == "id,text\n1,theirs\n"
