"""The local backend must not reach the host: filesystem sockets, memory the run's limits do
not count (SysV shared memory, memfd pages no longer mapped), supplementary groups.

Each attacker reports how far it got, so that no row passes vacuously: the socket rows check the host listener
is up and count its connections; the memory rows print every MiB they hold as they go.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from rlvr.sandboxes.base import ExecStatus, Limits, MiB

pytestmark = pytest.mark.xdist_group("sandbox")

LIMITS = Limits(wall_s=20, cpu_s=20, memory_bytes=128 * MiB, tmpfs_bytes=16 * MiB)
HOARD_MB = 1024  # what each memory attacker tries to hold; far above what the run may use in all
# What one run may hold at most (local_backend.run_memory_bytes): 128 MiB of program, 5 x 16 MiB of tmpfs places,
# 16 MiB of SysV segments (ipc_sysctls), 64 MiB supervisor + 128 MiB checker headroom = 416 MiB.
RUN_BOUND = (128 + 5 * 16 + 16 + 64 + 128) * MiB
CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({path!r})
    print('CONNECTED')
except OSError as e:
    print('blocked', e.errno)
print(open('/proc/self/status').read().split('Groups:')[1].split('\\n')[0].split())
"""


@pytest.fixture(scope="module")
def sandbox():
    from rlvr.sandboxes.local_backend import LocalSandbox

    return LocalSandbox(workers=1)


class Listener:
    """A Unix socket listening at `path` that counts the connections it accepts."""

    def __init__(self, path: Path, mode: int, group: int = 0):
        self.path, self.connections = path, 0
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        os.chown(path, 0, group)
        os.chmod(path, mode)
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                self.server.accept()[0].close()
                self.connections += 1
            except OSError:
                continue

    def close(self):
        self.stop.set()
        self.thread.join()
        self.server.close()


@pytest.fixture
def run_dir():
    """A host directory in /run (as /run/docker.sock is), which the sandbox does not replace with a tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("making a socket in /run needs root")
    path = Path(tempfile.mkdtemp(prefix="rlvr-sock-", dir="/run"))
    yield path
    shutil.rmtree(path)


def test_world_writable_host_socket_is_unreachable(sandbox, run_dir):
    """As root: any world-writable socket outside the tmpfs'd places was reachable (read-only mounts do not stop
    connect(2))."""
    os.chmod(run_dir, 0o755)
    listener = Listener(run_dir / "api.sock", 0o777)
    try:
        probe = socket.socket(socket.AF_UNIX)
        probe.connect(str(listener.path))  # the listener works: a refusal inside is the sandbox's doing
        probe.close()
        execution = sandbox.run(CONNECT.format(path=str(listener.path)), "", LIMITS)
    finally:
        listener.close()
    assert execution.ok and "blocked" in execution.stdout, execution
    assert listener.connections == 1  # only ours


AS_A_DOCKER_GROUP_USER = """
import sys
from rlvr.sandboxes.local_backend import LocalSandbox
from rlvr.sandboxes.base import Limits, MiB
execution = LocalSandbox(workers=1).run(sys.argv[1], "", Limits(wall_s=20, cpu_s=20, memory_bytes=128 * MiB))
print(execution.status.value, execution.exit_code, execution.stdout, execution.stderr[-500:])
"""
USER, GROUP = 2_099_999_000, 2_099_999_001  # no account has these ids; GROUP plays the host's `docker` group


def test_socket_of_a_supplementary_group_is_unreachable_for_a_user_in_it(run_dir):
    """Run by a user in the `docker` group, the program reached the host's Docker API: the user namespace kept the
    user's supplementary groups and the socket was visible. Here an ordinary user with GROUP among its groups
    runs the local backend against a socket only GROUP may use."""
    os.chown(run_dir, 0, GROUP)
    os.chmod(run_dir, 0o750)
    listener = Listener(run_dir / "docker.sock", 0o660, GROUP)
    packages = Path(tempfile.mkdtemp(prefix="rlvr-pkg-"))
    try:
        os.chmod(packages, 0o755)
        # a copy the user can read, importable as rlvr: the checkout itself may sit under a directory only root
        # may enter (a CI clone in `mktemp -d`, mode 0700)
        root = Path(__file__).resolve().parents[2]
        shutil.copytree(root / "rlvr", packages / "rlvr", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(root / "sandboxes", packages / "rlvr" / "sandboxes", ignore=shutil.ignore_patterns("__pycache__"))
        for path in [packages, *packages.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        python = shutil.which("python3", path="/usr/bin:/bin")  # the user cannot read root's own interpreters
        check = subprocess.run(
            [python, "-c", f"import socket; socket.socket(socket.AF_UNIX).connect({str(listener.path)!r}); print('ok')"],
            user=USER, group=USER, extra_groups=[GROUP], capture_output=True, text=True, timeout=60)
        assert check.stdout == "ok\n", check.stderr  # outside a sandbox the user does reach it
        done = subprocess.run([python, "-c", AS_A_DOCKER_GROUP_USER, CONNECT.format(path=str(listener.path))],
                              user=USER, group=USER, extra_groups=[GROUP], capture_output=True, text=True,
                              timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(packages)}, cwd="/")
    finally:
        listener.close()
        shutil.rmtree(packages)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exited 0 ") and "blocked" in done.stdout, done.stdout
    assert listener.connections == 1  # only the check's


def test_no_supplementary_groups_even_when_the_caller_has_some(tmp_path):
    """As root: the supervisor (and so the checker and whatever it starts) ran with the caller's groups."""
    if os.geteuid() != 0:
        pytest.skip("a non-root user cannot drop its groups inside a user namespace (doctor says so)")
    program = ("import os\nfor pid in ('self', str(os.getppid())):\n"
               "    print(pid, open(f'/proc/{pid}/status').read().split('Groups:')[1].split('\\n')[0].split())\n")
    script = ("import sys\nfrom rlvr.sandboxes.local_backend import LocalSandbox\n"
              "e = LocalSandbox(workers=1).run(sys.argv[1])\nprint(e.status.value, e.stdout, e.stderr[-300:])\n")
    done = subprocess.run([sys.executable, "-c", script, program], extra_groups=[GROUP, 27],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "exited self []" and lines[1].endswith(" []") and len(lines) >= 2, done.stdout


SYSV_HOARDER = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
held = 0
for i in range({HOARD_MB // 16}):
    shm = libc.shmget(0x10000 + i, 16 << 20, 0o1600)
    if shm < 0:
        print('refused', ctypes.get_errno(), flush=True)
        break
    addr = libc.shmat(shm, None, 0)
    ctypes.memset(addr, 1, 16 << 20)  # touched, so every page is memory
    libc.shmdt(ctypes.c_void_p(addr))  # unmapped: no longer in the address space the rlimit counts
    held += 16
    print('held', held, flush=True)
"""
MEMFD_HOARDER = f"""
import mmap, os
held, fds = 0, []
for i in range({HOARD_MB // 8}):
    fd = os.memfd_create('hoard')
    os.ftruncate(fd, 8 << 20)
    with mmap.mmap(fd, 8 << 20) as m:
        m.write(b'x' * (8 << 20))  # touched, then unmapped: the pages stay in the file
    fds.append(fd)
    held += 8
    print('held', held, flush=True)
"""


def _held_mb(stdout: str) -> int:
    return max([int(line.split()[1]) for line in stdout.splitlines() if line.startswith("held")], default=0)


@pytest.mark.parametrize("hoarder", [SYSV_HOARDER, MEMFD_HOARDER], ids=["sysv-shm", "memfd"])
def test_memory_outside_the_address_space_is_bounded(sandbox, hoarder):
    """RLIMIT_AS counts mapped memory only: 1.4-1.5 GiB of SysV segments or memfd pages, each unmapped after being
    touched, were held under a 512 MiB limit. A run may hold at most its memory limit plus what its tmpfs and
    supervisor are allowed (RUN_BOUND)."""
    execution = sandbox.run(hoarder, "", LIMITS)
    held = _held_mb(execution.stdout)
    assert held >= 16, execution  # the attack itself ran
    assert held * MiB <= RUN_BOUND, (held, execution.status, execution.stderr[-300:])
    assert execution.status in (ExecStatus.EXITED, ExecStatus.MEMORY_LIMIT), execution
    after = sandbox.run("print('fine')", "", LIMITS)
    assert after.ok and after.stdout == "fine\n", after
