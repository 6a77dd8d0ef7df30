"""One writer per output file."""

from __future__ import annotations

import pytest

from pll_harness.file_lock import alone_or_shared, lock, share


def test_a_second_handle_is_refused_until_the_first_closes(tmp_path):
    path = tmp_path / "out.jsonl"
    first = open(path, "ab")  # noqa: SIM115
    lock(first, path, "the first test handle")
    refused = r"another writer \(the first test handle\?\)"
    with open(path, "ab") as second, pytest.raises(ValueError, match=refused):
        lock(second, path, "the first test handle")
    first.close()
    with open(path, "ab") as third:
        lock(third, path, "the first test handle")


def test_the_users_of_one_file_are_alone_or_share_it(tmp_path):
    path = tmp_path / "cache.db.pll-users"
    with open(path, "ab") as first, open(path, "ab") as second, open(path, "ab") as third:
        assert alone_or_shared(first)
        share(first)
        assert not alone_or_shared(second)  # shares it with the first
        first.close()
        assert not alone_or_shared(third)  # the second still holds it
        second.close()
    with open(path, "ab") as again:
        assert alone_or_shared(again)


def test_a_file_system_without_flock_leaves_every_user_alone(tmp_path, monkeypatch):
    """Some network mounts answer flock with ENOLCK: --use_cache runs went on there before
    the users' lock, and must still."""
    import errno
    import fcntl

    def unsupported(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", unsupported)
    with open(tmp_path / "users", "ab") as handle:
        assert alone_or_shared(handle)
        share(handle)


def test_a_file_system_without_flock_refuses_a_writer_with_what_to_do(tmp_path, monkeypatch):
    """An output on a mount that answers flock with ENOLCK stopped the run with a bare
    "[Errno 37] No locks available", which says neither which file nor what to do."""
    import errno
    import fcntl

    def unsupported(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", unsupported)
    path = tmp_path / "out.csv"
    with open(path, "ab") as handle, pytest.raises(ValueError, match=r"cannot be locked .*local"):
        lock(handle, path, "another writer")


@pytest.mark.parametrize("code", ["EACCES", "EAGAIN"])
def test_a_lock_held_elsewhere_is_another_writer_whatever_the_error_says(
    tmp_path, monkeypatch, code
):
    """Where flock is emulated with fcntl's locks, a lock held elsewhere answers EACCES:
    that is another writer, not a file system without locks (whose advice, a local disk,
    would send the user away from a file that is simply busy)."""
    import errno
    import fcntl

    def held(*_args):
        raise OSError(getattr(errno, code), "held")

    monkeypatch.setattr(fcntl, "flock", held)
    path = tmp_path / "out.csv"
    with open(path, "ab") as handle, pytest.raises(ValueError, match="another writer"):
        lock(handle, path, "another writer")


def test_any_other_lock_error_is_raised_as_it_is(tmp_path, monkeypatch):
    import errno
    import fcntl

    def broken(*_args):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(fcntl, "flock", broken)
    path = tmp_path / "out.csv"
    with open(path, "ab") as handle, pytest.raises(OSError, match="Bad file descriptor"):
        lock(handle, path, "another writer")


def test_two_names_one_of_which_does_not_exist_yet_are_two_files(tmp_path):
    """A resumed ``score -o scores.csv --tokens tokens.csv`` whose token file is new: the
    output exists and the token file does not yet, and the check that they differ must say
    so rather than stop the run on the missing one."""
    from pll_harness.file_lock import same_file

    existing = tmp_path / "scores.csv"
    existing.write_text("id\r\n")
    missing = tmp_path / "tokens.csv"
    assert not same_file(existing, missing)
    assert not same_file(missing, existing)
    assert same_file(existing, tmp_path / "." / "scores.csv")
