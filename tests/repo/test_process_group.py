"""tests/process_group.py: a command's whole process tree ends with the test that started it, however it ends.

Each test builds a tree whose last process would otherwise live on (a grandchild in the command's session, as a
torchrun rank is), ends the tree's owner in one way, and waits until the grandchild is gone. With the guard
switched off (`subprocess.Popen(command, start_new_session=True)`, as tests/trainer/test_distributed.py launched torchrun
before) the grandchild of the first two tests survives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.process_group import popen_group, run_group

TESTS = Path(__file__).resolve().parents[1]
# a command whose child outlives it unless someone kills the session: prints the child's pid, then waits
TREE = ("import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(1000)\n")
GONE_WITHIN_S = 120  # a generous bound on a 0.5 s poll: only a stuck guard gets near it, not a loaded machine


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"  # a zombie has ended; only its parent's wait is missing


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_a_killed_test_process_takes_the_whole_tree_with_it():
    """The owner (a stand-in for a pytest worker) is SIGKILLed, so no clean-up of its own runs."""
    owner_code = (f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
                  "from process_group import popen_group\n"
                  "import subprocess, sys, time\n"
                  f"tree = popen_group([sys.executable, '-c', {TREE!r}], stdout=subprocess.PIPE, text=True)\n"
                  "print(tree.stdout.readline().strip(), flush=True)\n"
                  "time.sleep(1000)\n")
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    grandchild = int(owner.stdout.readline())
    assert _alive(grandchild)
    owner.kill()
    owner.wait()
    assert _wait_gone(grandchild), f"pid {grandchild} outlived the process that started its tree"


def test_a_timeout_kills_the_whole_tree_not_only_its_first_process(tmp_path):
    pid_file = tmp_path / "pid"
    tree = TREE.replace("print(child.pid, flush=True)", f"open({str(pid_file)!r}, 'w').write(str(child.pid))")
    with pytest.raises(subprocess.TimeoutExpired):
        run_group([sys.executable, "-c", tree], timeout=3)
    grandchild = int(pid_file.read_text())
    assert _wait_gone(grandchild)


def test_the_command_result_and_a_stack_request_pass_through(tmp_path):
    """Exit status and output are the command's; SIGUSR1 to the tree (tests/trainer/test_distributed.py asks a hung
    torchrun for its ranks' stacks so) reaches the command and spares the guard."""
    result = run_group([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=300)
    assert (result.returncode, result.stdout) == (3, "out\n")
    handler = ("import signal, sys, time\n"
               "signal.signal(signal.SIGUSR1, lambda *_: (print('stacks', flush=True), sys.exit(0)))\n"
               "print('ready', flush=True)\n"
               "time.sleep(1000)\n")
    tree = popen_group([sys.executable, "-c", handler], stdout=subprocess.PIPE, text=True)
    assert tree.stdout.readline() == "ready\n"
    os.killpg(tree.pid, signal.SIGUSR1)
    assert tree.stdout.readline() == "stacks\n"
    assert tree.wait(timeout=300) == 0
