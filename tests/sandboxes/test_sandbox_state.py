"""Warm-pool sequences: an attacker runs, then victims run in the same sandbox; no victim's result
may change because of the attacker.

Each attacker is a completion that answers `sq` honestly (so it scores correct) while trying to
leave something for later runs: an answer table in every writable place and in SysV shared memory,
memory squatted in SysV segments (capped at the tmpfs size by IPC sysctls), stopped or killed
processes, a forged verdict on every fd, a directory tree the clean-up cannot remove. The victims are a wrong program that answers from any
table it finds, a wrong program, and an honest one (memory-hungry after the squatter). One
container at a time (workers=1), so every run meets whatever the attacker left. The attacker
checks that its attack took (else it fails and so does the test): no test here passes vacuously.
"""

from __future__ import annotations

import os

import pytest
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.code.cheats import CHEAT_TESTS
from rlvr.verifiers.result import Status

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

TABLE = "2:4,3:9,1.5:2.25,0.5:0.25"
PLACES = "('/tmp', '/dev/shm', '/var/tmp', '/run/lock', '.', os.path.expanduser('~'))"
HONEST = "def sq(x):\n    return x * x\n"
WRONG = "def sq(x):\n    return x + x\n"

CACHE_WRITER = f"""
import os, ctypes
written = 0
for d in {PLACES}:
    try:
        open(os.path.join(d, 'rlvr-cache'), 'w').write({TABLE!r})
        written += 1
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0x7AB1E, 4096, 0o1666)
assert written >= 3 and shm >= 0, (written, shm)  # the attack took, or this attacker fails the test
ctypes.memmove(libc.shmat(shm, None, 0), {TABLE!r}.encode() + b'\\0', {len(TABLE) + 1})
""" + HONEST

CACHE_READER = f"""
import os, ctypes
found = ''
for d in {PLACES}:
    try:
        found = found or open(os.path.join(d, 'rlvr-cache')).read()
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0x7AB1E, 0, 0o666)
if not found and shm >= 0:
    found = ctypes.string_at(libc.shmat(shm, None, 0o10000)).decode()
TABLE = dict((float(k), float(v)) for k, v in (p.split(':') for p in found.split(','))) if found else {{}}
def sq(x):
    y = TABLE.get(x, x + x)
    return int(y) if type(x) is int else y
"""

SEGMENT_MB, TMPFS_MB, HOG_MB = 16, 64, 200
SQUATTER = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = 0
for key in range(0x5100, 0x5100 + 64):  # up to 1 GB, 16 MB at a time, each touched
    shm = libc.shmget(key, {SEGMENT_MB} << 20, 0o1600)
    addr = libc.shmat(shm, None, 0) if shm >= 0 else None
    if addr in (None, ctypes.c_void_p(-1).value):
        break
    ctypes.memset(addr, 1, {SEGMENT_MB} << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    made += 1
assert 1 <= made <= {TMPFS_MB // SEGMENT_MB}, made  # the squat took, and stopped at the tmpfs size
""" + HONEST
HOG = f"def sq(x):\n    b = bytearray({HOG_MB} << 20)\n    b[::4096] = b'x' * len(b[::4096])\n    return x * x\n"

STOPPER = """
import os, signal
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) != os.getpid():
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(int(p), sig)
            except OSError:
                pass
""" + HONEST

FORGER = """
import os
fake = b'{"tag": "PASS", "i": 0}\\n{"tag": "DONE"}\\n' * 100
for p in [None] + [p for p in os.listdir('/proc') if p.isdigit()]:
    for fd in range(0, 64):
        try:
            w = fd if p is None else os.open(f'/proc/{p}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)
            if p is not None or fd > 4:
                os.write(w, fake)
        except OSError:
            pass
""" + HONEST

DEEP_TREE = "import os\nbase = os.getcwd()\nfor _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nos.chmod('.', 0)\nos.chdir(base)\n" + HONEST

VICTIMS = ((CACHE_READER, Status.INCORRECT), (WRONG, Status.INCORRECT), (HONEST, Status.CORRECT))


def fenced(code: str) -> str:
    return f"```python\n{code}```"


@pytest.fixture(scope="module")
def docker_verifier():
    if os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    verifier = CodeVerifier(timeout_s=10, memory_mb=256, workers=1)
    yield verifier
    verifier.close()


def run_sequence(verifier, attacker: str, victims) -> list:
    codes = [attacker] + [code for code, _ in victims]
    return [verifier(fenced(code), {"tests": CHEAT_TESTS}) for code in codes]


@pytest.mark.parametrize("attacker", [CACHE_WRITER, STOPPER, FORGER, DEEP_TREE],
                         ids=["answer cache everywhere", "stop and kill others", "forge verdicts", "1,100-deep tree"])
def test_an_attacker_changes_no_later_result(docker_verifier, attacker):
    first, *later = run_sequence(docker_verifier, attacker, VICTIMS + VICTIMS)
    assert first.status is Status.CORRECT, first.details
    assert [r.status for r in later] == [status for _, status in VICTIMS + VICTIMS], [r.details for r in later]


def test_squatted_memory_is_bounded_and_does_not_starve_the_next_run(docker_verifier):
    hog_alone = docker_verifier(fenced(HOG), {"tests": CHEAT_TESTS})
    assert hog_alone.status is Status.CORRECT, hog_alone.details  # the honest victim fits on its own
    squatter, hog = run_sequence(docker_verifier, SQUATTER, [(HOG, Status.CORRECT)])
    assert squatter.status is Status.CORRECT, squatter.details
    assert hog.status is Status.CORRECT, hog.details


def test_local_backend_carries_no_answer_between_runs():
    verifier = CodeVerifier(backend="local", timeout_s=10, workers=1)
    first, *later = run_sequence(verifier, CACHE_WRITER, VICTIMS)
    assert first.status is Status.CORRECT, first.details
    assert [r.status for r in later] == [status for _, status in VICTIMS], [r.details for r in later]
    assert not any(os.path.exists(os.path.join(d, "rlvr-cache")) for d in ("/tmp", "/dev/shm", "/var/tmp", "/run/lock"))
