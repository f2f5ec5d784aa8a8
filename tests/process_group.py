"""Child process trees that end with the test that started them, however the test ends.

A test that launches `torchrun` starts three levels of processes (the agent, its ranks, their workers) in a session
of their own, so a Ctrl-C or a kill aimed at pytest never reaches them, and `subprocess.run(timeout=...)` kills
only the agent. Found on a loaded machine: a fresh clone's `make test` stopped by hand left a torchrun rank waiting
in a collective 35 minutes later. So such a command runs under a guard (this file's `__main__`): the guard leads
the new session, starts the command inside it, and kills every process of the session when the command ends, when
the guard is told to stop (SIGTERM, SIGINT, SIGHUP), or when the test process that started it is gone (its parent
pid changes: polled twice a second, because a SIGKILLed pytest runs no clean-up of its own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

POLL_S = 0.5


def popen_group(command: Sequence[str], **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen(command)` in a session of its own that dies with this process (see the module docstring);
    `os.killpg(proc.pid, sig)` reaches the whole tree."""
    guard = [sys.executable, str(Path(__file__).resolve()), str(os.getpid()), "--", *command]
    return subprocess.Popen(guard, start_new_session=True, **popen_kwargs)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL every process of `proc`'s session (a no-op once it is empty) and reap the guard."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_group(command: Sequence[str], timeout: float, **popen_kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(command, capture_output=True, text=True, timeout=timeout)`, except that a timeout (or any
    exception) kills the whole tree, not just its first process."""
    proc = popen_group(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen_kwargs)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _session_members(session: int) -> list[int]:
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        if int(fields[3]) == session:
            members.append(int(entry.name))
    return members


def _kill_session() -> None:
    for pid in _session_members(os.getsid(0)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _guard(parent: int, command: list[str]) -> int:
    def stop(signum, frame):
        _kill_session()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    signal.signal(signal.SIGUSR1, lambda *_: None)  # a killpg(SIGUSR1) asking the tree for stacks spares the guard
    child = subprocess.Popen(command)
    try:
        while True:
            try:
                returncode = child.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if os.getppid() != parent:  # the test process is gone
                    returncode = -signal.SIGKILL
                    break
    finally:
        _kill_session()  # the command's own orphans too
    return returncode if returncode >= 0 else 128 - returncode


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: process_group.py PARENT_PID -- COMMAND...")
    sys.exit(_guard(int(sys.argv[1]), sys.argv[3:]))
