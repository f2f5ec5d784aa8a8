"""Counters a program can read are no register between runs (issue 50, class 1).

A writer run sets a counter to a chosen remainder (8 bits: the value mod 256) by allocating until the next
number fits; a later reader run allocates one number and decodes the value from it, as an answer cache
would. The counters: the inode numbers of memfds (one kernel tmpfs for the whole host, handed out in per-CPU
batches), the container's pid counter, its tmpfs inode counters (/tmp and the workdir) and its SysV IPC ids.
The places: the same warm container, a fresh container, the local backend's fresh namespaces, and from
Docker to local. Each test first checks that the writer's encoding took (the attack ran), then that no more
than one of TRIALS readers lands within NEAR of the value: with the supervisor's scrambles (agent/counters.py)
each lands there with probability NEAR/256, before them every one did. Pinned to one CPU (0), as an attacker
would be, so the per-CPU batches line up.
"""

from __future__ import annotations

import random

import pytest
from rlvr.sandboxes.base import ExecStatus, Limits

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

TRIALS = 4
NEAR = 3  # decoded - value in 0..2 counts as read back (a reader may land a step or two past the writer)
LIMITS = Limits(wall_s=20, cpu_s=20)

PIN = "import os, sys, ctypes\nos.sched_setaffinity(0, {0})\n"
LIBC = "libc = ctypes.CDLL(None, use_errno=True)\n"

# memfd: the host-wide internal tmpfs; the next memfd created on CPU 0 gets the value
MEMFD_WRITER = PIN + """
value = int(sys.stdin.read())
for _ in range(4096):
    fd = os.memfd_create('w'); ino = os.fstat(fd).st_ino; os.close(fd)
    if (ino + 1) % 256 == value:
        print('set'); break
"""
MEMFD_READER = PIN + """
fd = os.memfd_create('r'); print(os.fstat(fd).st_ino)
"""

# the pid counter of the container's PID namespace: the next program's pid gets the value
PID_WRITER = PIN + """
import threading
value = int(sys.stdin.read())
for _ in range(40000):
    t = threading.Thread(target=int); t.start(); t.join()
    if (int(open('/proc/sys/kernel/ns_last_pid').read()) + 1) % 256 == value:
        print('set'); break
"""
PID_READER = "import os\nprint(os.getpid())\n"

# tmpfs inode counters: /tmp's next file and the next run directory (made on the workdir's tmpfs) get the value
TMPFS_WRITER = PIN + """
value = int(sys.stdin.read())
done = 0
for place in ('/tmp', '.'):
    for _ in range(4096):
        path = os.path.join(place, 'f')
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600); ino = os.fstat(fd).st_ino; os.close(fd); os.unlink(path)
        if (ino + 1) % 256 == value:
            done += 1; break
print('set' if done == 2 else 'not set')
"""
TMPFS_READER = PIN + """
fd = os.open('/tmp/r', os.O_CREAT | os.O_WRONLY, 0o600); print(os.fstat(fd).st_ino, os.stat('.').st_ino)
"""

# SysV message queue ids of the container's IPC namespace: id = sequence * 32768 + an index cycling through
# 64 slots (while few queues exist), the sequence stepping at each wrap; the count is sequence * 64 + index
SYSV_WRITER = PIN + LIBC + """
value = int(sys.stdin.read())
for _ in range(4096):
    qid = libc.msgget(0, 0o1600); libc.msgctl(qid, 0, None)
    if ((qid >> 15) * 64 + (qid & 32767) + 1) % 256 == value:
        print('set'); break
"""
SYSV_READER = PIN + LIBC + """
qid = libc.msgget(0, 0o1600); libc.msgctl(qid, 0, None); print((qid >> 15) * 64 + (qid & 32767))
"""


def _run(sandbox, program: str, stdin: str = "") -> str:
    result = sandbox.run(program, stdin, LIMITS)
    assert result.status == ExecStatus.EXITED and result.exit_code == 0, result
    return result.stdout


def _read_back(write, read, decode) -> list[tuple[int, list[int]]]:
    """TRIALS rounds of writer then reader; (value, decoded numbers) per round. The writer must say its
    encoding took: a test whose attack did not run would pass for nothing."""
    rounds = []
    for _ in range(TRIALS):
        value = random.randrange(8, 248)
        assert write(str(value)).strip() == "set", "the writer could not set the counter"
        rounds.append((value, decode(read())))
    return rounds


def _assert_not_read_back(rounds) -> None:
    near = [(value, got) for value, decoded in rounds for got in decoded if (got - value) % 256 < NEAR]
    per_round = len(near) / max(1, len(rounds[0][1]))
    assert per_round <= 1, f"the reader decoded the writer's value in {per_round:g} of {len(rounds)} rounds: {near}"


def _ints(text: str) -> list[int]:
    return [int(word) % 256 for word in text.split()]


@pytest.fixture(scope="module")
def docker():
    from rlvr.sandboxes.docker_backend import DockerSandbox

    try:
        sandbox = DockerSandbox(LIMITS, pool_size=1)  # one container: every run meets what the last one left
        sandbox.run("pass", "", LIMITS)
    except Exception as error:  # noqa: BLE001
        pytest.skip(f"docker unavailable: {error}")
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="module")
def local():
    from rlvr.sandboxes.local_backend import LocalSandbox

    try:
        sandbox = LocalSandbox(LIMITS, workers=1)
        sandbox.run("pass", "", LIMITS)
    except Exception as error:  # noqa: BLE001
        pytest.skip(f"local sandbox unavailable: {error}")
    yield sandbox
    sandbox.close()


def test_memfd_inodes_carry_nothing_in_a_warm_container(docker):
    rounds = _read_back(lambda v: _run(docker, MEMFD_WRITER, v), lambda: _run(docker, MEMFD_READER), _ints)
    _assert_not_read_back(rounds)


def test_memfd_inodes_carry_nothing_to_a_fresh_container():
    from rlvr.sandboxes.docker_backend import DockerSandbox

    cold = DockerSandbox(LIMITS, pool_size=1, warm=False)  # a fresh container for every run
    try:
        try:
            cold.run("pass", "", LIMITS)
        except Exception as error:  # noqa: BLE001
            pytest.skip(f"docker unavailable: {error}")
        rounds = _read_back(lambda v: _run(cold, MEMFD_WRITER, v), lambda: _run(cold, MEMFD_READER), _ints)
    finally:
        cold.close()
    _assert_not_read_back(rounds)


def test_memfd_inodes_carry_nothing_between_local_runs(local):
    rounds = _read_back(lambda v: _run(local, MEMFD_WRITER, v), lambda: _run(local, MEMFD_READER), _ints)
    _assert_not_read_back(rounds)


def test_memfd_inodes_carry_nothing_from_docker_to_local(docker, local):
    rounds = _read_back(lambda v: _run(docker, MEMFD_WRITER, v), lambda: _run(local, MEMFD_READER), _ints)
    _assert_not_read_back(rounds)


def test_pid_counter_carries_nothing_in_a_warm_container(docker):
    rounds = _read_back(lambda v: _run(docker, PID_WRITER, v), lambda: _run(docker, PID_READER), _ints)
    _assert_not_read_back(rounds)


def test_tmpfs_inode_counters_carry_nothing_in_a_warm_container(docker):
    rounds = _read_back(lambda v: _run(docker, TMPFS_WRITER, v), lambda: _run(docker, TMPFS_READER), _ints)
    _assert_not_read_back(rounds)


def test_sysv_ids_carry_nothing_in_a_warm_container(docker):
    rounds = _read_back(lambda v: _run(docker, SYSV_WRITER, v), lambda: _run(docker, SYSV_READER), _ints)
    _assert_not_read_back(rounds)


def test_a_run_that_moves_a_counter_far_gets_a_fresh_container(docker):
    """Noise only slows a writer that moves a counter by the noise's width per step; a run that moves one by more
    than the width (agent/counters.py: SPREAD) has its container replaced, whose counters start afresh."""
    far = "import threading, os\nfor _ in range(2000):\n    t = threading.Thread(target=int); t.start(); t.join()\n" \
          "print(int(open('/proc/sys/kernel/ns_last_pid').read()))\n"
    for _ in range(2):
        moved_to = int(_run(docker, far))
        assert moved_to >= 2000
        pid = int(_run(docker, PID_READER))
        assert pid < moved_to, f"the next program ran in the same container (pid {pid} after {moved_to})"
