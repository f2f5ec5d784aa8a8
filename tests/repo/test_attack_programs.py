"""The attack programs longer than a few lines are files (sandboxes/probe_programs/, verifiers/code/cheat_programs/),
each shipped as its text: nothing formatted into a cheat; a probe's header lines set to the host's values
(sandboxes/probes.py: _program), and a header that does not match its values refused, never run with defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr.sandboxes import probes
from rlvr.verifiers.code.cheats import CHEATS

ROOT = Path(__file__).resolve().parents[2]
PROBE_FILES = sorted((ROOT / "sandboxes" / "probe_programs").glob("*.py"))
CHEAT_FILES = sorted((ROOT / "verifiers" / "code" / "cheat_programs").glob("*.py"))
CTX = probes.ProbeContext(port=4242, secret="s3cret", host_path="/host/file", abstract_socket="abstract-x",
                          marker="rlvr-probe-0123abcd", fs_socket="/run/x/api.sock")


def _shipped_probes() -> list[str]:
    return [p.program(CTX) for p in probes.PROBES] + [probes.AFTERMATH]


def test_every_cheat_file_is_a_cheat_row_whole_and_compiles():
    codes = {code for _, code, _ in CHEATS}
    assert len(CHEAT_FILES) == 11
    for path in CHEAT_FILES:
        text = path.read_text(encoding="utf-8")
        assert text in codes, f"{path.name} is not the text of any CHEATS row (unshipped, or changed on the way)"
        compile(text, path.name, "exec")


def test_every_probe_file_is_shipped_with_its_header_set_and_compiles():
    shipped = _shipped_probes()
    assert len(PROBE_FILES) == 5
    for path in PROBE_FILES:
        body = path.read_text(encoding="utf-8").partition("\n\n")[2] or path.read_text(encoding="utf-8")
        users = [text for text in shipped if text.endswith(body)]
        assert users, f"{path.name} is shipped by no probe"
        for text in users:
            compile(text, path.name, "exec")


def test_a_probe_header_carries_this_runs_values():
    """The marker is the run's own (the state probes look for it later), the syscall numbers this machine's."""
    by_name = {p.name: p for p in probes.PROBES}
    state = by_name["leave state: files everywhere, SysV IPC, message queue, shared memory"].program(CTX)
    assert state.split("\n\n")[0].splitlines()[2:] == [
        "marker = 'rlvr-probe-0123abcd'", f"WRITABLE = {probes.STATE_PLACES + ('.',)!r}",
        f"ADD_KEY = {probes.ADD_KEY}", f"KEYCTL = {probes.KEYCTL}", "KEY_NAME = 'rlvr-probe-key'"]
    workdir = by_name["mark the workdir itself: xattrs, default ACL, mode 0"].program(CTX)
    assert "marker = 'rlvr-probe-0123abcd'\n" in workdir and "rlvr-probe-x" not in workdir
    assert f"HOARD_MB = {probes.HOARD_MB}\n" in probes.HOARDER.program(CTX)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(probes, "_PROGRAMS", tmp_path)
    (tmp_path / "two.py").write_text(f"{probes._HEADER}: two values\nA = 1\nB = 'x'\n\nprint(A, B)\n")
    (tmp_path / "plain.py").write_text("print('no header')\n")
    return tmp_path


def test_program_sets_every_header_line(folder):
    assert probes._program("two", A=7, B="y") == f"{probes._HEADER}: two values\nA = 7\nB = 'y'\n\nprint(A, B)\n"
    assert probes._program("plain") == "print('no header')\n"


@pytest.mark.parametrize("values, error", [
    ({"A": 7}, "header line 'B' was given no value"),
    ({"A": 7, "B": "y", "C": 0}, r"no header line for \['C'\]"),
])
def test_a_header_that_does_not_match_its_values_is_refused(folder, values, error):
    with pytest.raises(ValueError, match=error):
        probes._program("two", **values)


def test_values_for_a_program_without_a_header_are_refused(folder):
    with pytest.raises(ValueError, match="plain.py has no header"):
        probes._program("plain", A=1)
