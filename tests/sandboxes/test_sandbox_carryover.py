"""State that outlives a run on inodes and kernel objects rather than in files: the
workdir's own root (its mode, default ACL and extended attributes) and the program uid's persistent keyring.

Docker reuses one container here (a warm pool of one), so every later run meets what the attacker left; the local
backend starts fresh namespaces per run, but the program's uid, leased per run, and that uid's kernel keyrings are
the host's. Every attacker checks that its own step took, or, where a backend refuses the step, the test asserts
the refusal: no row passes vacuously.
"""

from __future__ import annotations

import ctypes
import os
import platform

import pytest
from rlvr.sandboxes.base import ExecStatus, Limits, MiB
from rlvr.sandboxes.local_backend import UidLeases

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

LIMITS = Limits(wall_s=10, cpu_s=10, memory_bytes=256 * MiB)
ADD_KEY, KEYCTL = {"aarch64": (217, 219)}.get(platform.machine(), (248, 250))  # syscall numbers (x86_64 default)
PLACES = "('.', '..', os.path.expanduser('~'), '/tmp', '/dev/shm')"

XATTR_WRITER = f"""
import os
took = []
for d in {PLACES}:
    try:
        os.setxattr(d, 'user.rlvr-cache', b'2:4,3:9')
        took.append(d)
    except OSError:
        pass
assert '.' in took, took  # the workdir is the program's own: the attack takes, or this run fails the test
print('took', took)
"""
XATTR_READER = f"""
import os
found = []
for d in {PLACES}:
    try:
        found.append((d, os.getxattr(d, 'user.rlvr-cache')))
    except OSError:
        pass
print('found', found)
"""

# A default ACL granting nobody anything, then mode 0: files the supervisor writes into this directory later
# (main.py) would inherit the ACL and be unreadable by their owner, and the program could not enter it.
NO_ACCESS_ACL = ("struct.pack('<I', 2) + b''.join(struct.pack('<HHI', tag, 0, 0xFFFFFFFF) for tag in (1, 4, 0x20))")
LOCKER = f"""
import os, struct
os.setxattr('.', 'system.posix_acl_default', {NO_ACCESS_ACL})
os.chmod('.', 0)
for d in ('..', os.path.expanduser('~')):
    for step in (lambda: os.setxattr(d, 'system.posix_acl_default', {NO_ACCESS_ACL}), lambda: os.chmod(d, 0)):
        try:
            step()
        except OSError:
            pass
print('locked')
"""

HEADROOM_MB, VICTIM_MB = 160, 220  # the hoarder leaves the container 160 MiB; the victim needs 220 (+ Python)
XATTR_HOARDER = f"""
import os

def memory(name):
    for path in ('/sys/fs/cgroup/memory/memory.' + name, '/sys/fs/cgroup/memory.' + name):
        try:
            value = open(path).read().split()[0]
            return 1 << 62 if value == 'max' else int(value)
        except OSError:
            pass

limit = memory('limit_in_bytes') or memory('max')
hoarded = 0
while (memory('usage_in_bytes') or memory('current')) < limit - ({HEADROOM_MB} << 20):
    try:
        os.setxattr('.', f'user.h{{hoarded}}', b'x' * 65536)
    except OSError:
        break
    hoarded += 1
assert hoarded >= 1024, hoarded  # at least 64 MiB hidden, kernel memory the shared-memory check does not see
print('hoarded MiB', hoarded // 16)
"""
VICTIM = f"b = bytearray({VICTIM_MB} << 20)\nb[::4096] = b'x' * len(b[::4096])\nprint('fits')\n"

PERSISTENT_WRITER = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ring = libc.syscall({KEYCTL}, 22, -1, -2)  # KEYCTL_GET_PERSISTENT of our uid, linked into our process keyring
if ring < 0:
    print('refused', ctypes.get_errno())
else:
    assert libc.syscall({ADD_KEY}, b'user', b'rlvr-answers', b'2:4,3:9', 7, ring) >= 0, ctypes.get_errno()
    print('stored', os.getuid())
"""
PERSISTENT_READER = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ring = libc.syscall({KEYCTL}, 22, -1, -2)
key = libc.syscall({KEYCTL}, 10, ring, b'user', b'rlvr-answers', 0) if ring >= 0 else -1  # KEYCTL_SEARCH
print('found' if key >= 0 else 'nothing', os.getuid())
"""


@pytest.fixture(scope="module")
def client():
    from tests.sandboxes.test_sandbox_docker import require_docker

    return require_docker()


@pytest.fixture
def docker_box(client):
    """A pool of one per test: an attack that takes on the old code must not spill into the next test."""
    from rlvr.sandboxes.docker_backend import DockerSandbox

    box = DockerSandbox(pool_size=1)
    yield box
    box.close()


@pytest.fixture(scope="module")
def local_box(tmp_path_factory):
    """A local sandbox whose runs, one at a time, all lease the same uid, one no other run on this machine uses
    (a private lease directory and base): the second run of a pair is always the first one's uid."""
    from rlvr.sandboxes.local_backend import LocalSandbox

    leases = UidLeases(str(tmp_path_factory.mktemp("leases")), base=UidLeases.BASE + 2 * UidLeases.SLOTS)
    return LocalSandbox(workers=1, leases=leases)


@pytest.fixture(params=["docker", "local"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def box(backend, request):
    return request.getfixturevalue(f"{backend}_box")


def containers(client, box) -> set:
    from rlvr.sandboxes.pool import INSTANCE_LABEL, list_sandboxes

    return {c["Id"] for c in list_sandboxes(client, f"{INSTANCE_LABEL}={box.instance}") if c["State"] == "running"}


def test_an_xattr_answer_cache_is_gone_for_the_next_run(box):
    writer = box.run(XATTR_WRITER, "", LIMITS)
    assert writer.ok, writer
    reader = box.run(XATTR_READER, "", LIMITS)
    assert (reader.status, reader.stdout) == (ExecStatus.EXITED, "found []\n"), (writer.stdout, reader)


def test_the_reader_met_the_writers_container(client, docker_box):
    """The row above is not vacuous on Docker: a clean attacker leaves its container in the pool for the reader."""
    assert docker_box.run(XATTR_WRITER, "", LIMITS).ok
    before = containers(client, docker_box)
    assert docker_box.run(XATTR_READER, "", LIMITS).ok
    assert len(before) == 1 and containers(client, docker_box) == before


def test_the_workdir_cannot_be_locked_for_later_runs(box):
    locker = box.run(LOCKER, "", LIMITS)
    assert (locker.status, locker.stdout) == (ExecStatus.EXITED, "locked\n"), locker
    later = [box.run("import os\nprint(len(os.listdir('.')))\n", "", LIMITS) for _ in range(3)]
    assert [(r.status, r.exit_code, r.stdout) for r in later] == [(ExecStatus.EXITED, 0, "1\n")] * 3, later


def test_memory_hidden_in_xattrs_does_not_starve_the_next_run(docker_box):
    """Local runs have no container to starve: their tmpfs, xattrs included, is gone with their mount namespace."""
    alone = docker_box.run(VICTIM, "", LIMITS)
    assert alone.ok, alone  # the victim fits in a clean container
    hoarder = docker_box.run(XATTR_HOARDER, "", LIMITS)
    assert hoarder.ok, hoarder
    victim = docker_box.run(VICTIM, "", LIMITS)
    assert (victim.status, victim.stdout) == (ExecStatus.EXITED, "fits\n"), (hoarder.stdout, victim)


def test_the_persistent_keyring_is_empty_for_the_next_run(backend, box):
    """Local: the leased uid's persistent keyring is the host kernel's and outlives the run (and the rlvr process);
    it is emptied. Docker: the default seccomp profile refuses keyctl (EPERM), so the channel does not exist."""
    if backend == "local" and not box.root:
        pytest.skip("without root the local runs have a user namespace, and keyrings, of their own")
    writer = box.run(PERSISTENT_WRITER, "", LIMITS)
    reader = box.run(PERSISTENT_READER, "", LIMITS)
    assert writer.ok and reader.ok, (writer, reader)
    if backend == "docker":
        assert writer.stdout == "refused 1\n", writer  # Docker's seccomp profile: EPERM
    else:
        assert writer.stdout.split()[1] == reader.stdout.split()[1], (writer.stdout, reader.stdout)  # one uid
    assert reader.stdout.startswith("nothing"), (writer.stdout, reader.stdout)


def test_a_key_left_by_a_run_killed_before_its_reset_is_not_seen(local_box):
    """A supervisor killed mid-run (the host's kill after its grace) never resets; the next lease of that uid
    must still start with an empty persistent keyring."""
    if not local_box.root:
        pytest.skip("without root the local runs have a user namespace, and keyrings, of their own")
    uid = local_box.leases.base  # slot 0: what the next run leases (the lease directory is this module's alone)
    assert store_persistent_key(uid)
    reader = local_box.run(PERSISTENT_READER, "", LIMITS)
    assert reader.ok and reader.stdout == f"nothing {uid}\n", reader


def store_persistent_key(uid: int) -> bool:
    """As `uid` (a forked child of this root test process), put a key into that uid's persistent keyring."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            os.setgid(uid)
            os.setuid(uid)
            ring = libc.syscall(KEYCTL, 22, -1, -2)
            code = 0 if ring >= 0 and libc.syscall(ADD_KEY, b"user", b"rlvr-answers", b"2:4,3:9", 7, ring) >= 0 else 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
