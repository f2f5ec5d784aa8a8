"""The supervisor's per-run wipe (sandboxes/agent/reset.py) on hostile trees, run on the host.

Properties: it never raises; it empties what it can reach; it never follows a link out of the
directory it wipes; past its depth or entry budget it says False (the sandbox is then replaced).
The workdir root is root's and 0711, and any change to a root inode (mode, owner, extended
attributes) is reported, which makes the sandbox dirty.
"""

from __future__ import annotations

import os

import pytest
from rlvr.sandboxes.agent import reset
from rlvr.sandboxes.agent.reset import (
    WIPE_MAX_DEPTH,
    WIPE_MAX_ENTRIES,
    _changed_roots,
    _prepare_roots,
    _root_state,
    _wipe,
)


def test_an_ordinary_tree_is_emptied(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    (tmp_path / "g").write_text("y")
    os.mkfifo(tmp_path / "fifo")
    assert _wipe(str(tmp_path)) is True
    assert os.listdir(tmp_path) == []


def test_links_out_are_removed_not_followed(tmp_path):
    outside, box = tmp_path / "outside", tmp_path / "box"
    outside.mkdir()
    box.mkdir()
    (outside / "keep").write_text("host data")
    (box / "to_dir").symlink_to(outside, target_is_directory=True)
    (box / "to_file").symlink_to(outside / "keep")
    assert _wipe(str(box)) is True
    assert os.listdir(box) == [] and (outside / "keep").read_text() == "host data"


def remove_chain(path: str) -> None:
    """Remove a d/d/d/... chain one level at a time from the top (shutil.rmtree recurses and fails)."""
    top, below, spare = os.path.join(path, "d"), os.path.join(path, "d", "d"), os.path.join(path, "e")
    while os.path.isdir(top):
        if os.path.isdir(below):
            os.rename(below, spare)
            os.rmdir(top)
            os.rename(spare, top)
        else:
            os.rmdir(top)


def test_a_1100_deep_chain_is_refused_without_raising(tmp_path):
    path = str(tmp_path)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(1100):  # deeper than PATH_MAX allows by name: built relative to each level
                os.mkdir("d", dir_fd=fd)
                child = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
        assert 1100 > WIPE_MAX_DEPTH
        assert _wipe(path) is False
    finally:  # a chain left in pytest's tmp would break pytest's own clean-up of old tmp dirs later
        remove_chain(path)
    assert os.listdir(path) == []


def test_too_many_entries_is_refused(tmp_path, monkeypatch):
    assert WIPE_MAX_ENTRIES >= 1000
    monkeypatch.setattr(reset, "WIPE_MAX_ENTRIES", 50)  # the same budget check, 50 files instead of 20,000
    for i in range(60):
        (tmp_path / str(i)).touch()
    assert _wipe(str(tmp_path)) is False


def test_a_directory_without_permissions_is_still_emptied(tmp_path):
    locked = tmp_path / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "f").write_text("x")
    os.chmod(locked / "inner", 0)
    os.chmod(locked, 0)
    assert _wipe(str(tmp_path)) is True
    assert os.listdir(tmp_path) == []


def test_a_missing_or_non_directory_path_is_false_not_an_exception(tmp_path):
    (tmp_path / "file").write_text("x")
    assert _wipe(str(tmp_path / "file")) is False
    assert _wipe(str(tmp_path / "absent")) is False


def test_the_workdir_root_is_roots_and_passable_only(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the supervisor is root; chown to root needs it")
    root = tmp_path / "sandbox"
    baseline = _prepare_roots(str(root))
    st = os.lstat(root)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o711)
    assert baseline[str(root)] == _root_state(str(root)) and _changed_roots(baseline) == []


@pytest.mark.parametrize("change", ["xattr", "mode", "owner"])
def test_any_change_to_a_root_inode_is_reported(tmp_path, change):
    """What the program could once do to the workdir root : now it is root's, and were it changed
    anyway, the sandbox is reported dirty (replaced) rather than passed on."""
    baseline = {str(tmp_path): _root_state(str(tmp_path))}
    if change == "xattr":
        try:
            os.setxattr(tmp_path, "user.rlvr-cache", b"2:4,3:9")
        except OSError as error:
            pytest.skip(f"no user xattrs on this filesystem: {error}")
    elif change == "mode":
        os.chmod(tmp_path, 0)
    elif os.geteuid() == 0:
        os.chown(tmp_path, os.getuid() + 1, -1)
    else:
        pytest.skip("chown needs root")
    try:
        assert [problem.split(" itself")[0] for problem in _changed_roots(baseline)] == [str(tmp_path)]
    finally:
        os.chmod(tmp_path, 0o700)
