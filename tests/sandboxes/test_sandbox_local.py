"""Local backend (bubblewrap + rlimits + a cgroup per run): the adversarial probes that apply to it are contained."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from rlvr.sandboxes.base import ExecStatus
from rlvr.sandboxes.local_backend import UidLeases
from rlvr.sandboxes.probes import PROBES, HostFixtures, run_probe

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers and the Docker engine are machine-wide

LOCAL_PROBES = [p for p in PROBES if "local" in p.backends]


@pytest.fixture(scope="module")
def sandbox():
    from rlvr.sandboxes.local_backend import LocalSandbox

    return LocalSandbox(workers=2)


@pytest.fixture(scope="module")
def host():
    with HostFixtures() as fixtures:
        yield fixtures


@pytest.mark.parametrize("probe", LOCAL_PROBES, ids=[p.name for p in LOCAL_PROBES])
def test_probe_is_contained(probe, sandbox, host):
    _, problem = run_probe(sandbox, probe, host)  # the probe's verdict, no host connection, a clean next run
    assert problem is None, problem


def test_stdin_stdout_exit_code(sandbox):
    execution = sandbox.run("import sys\nprint(sys.stdin.read()[::-1])\nsys.exit(2)", "abc")
    assert (execution.status, execution.exit_code, execution.stdout) == (ExecStatus.EXITED, 2, "cba\n")


def test_private_pid_namespace(sandbox):
    execution = sandbox.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert execution.ok
    assert len(eval(execution.stdout)) < 10  # only this run's handful of processes (pids are scrambled)


def test_program_checker_and_supervisor_are_three_users_as_root(sandbox):
    from rlvr.sandboxes.base import Checker, Limits

    if not sandbox.root:
        pytest.skip("separate users need root; doctor says so")
    checker = ("import os\nsup = open(f'/proc/{os.getppid()}/status').read().split('Uid:')[1].split()[0]\n"
               "os.write(5, f'{os.getuid()} {sup}'.encode())\n")
    execution = sandbox.run("import os, time\nprint(os.getuid(), flush=True)\ntime.sleep(100)\n", "",
                            Limits(wall_s=20, cpu_s=20), checker=Checker(checker))
    checker_uid, supervisor_uid = map(int, execution.verdict.split())
    program_uid = checker_uid - 1  # a leased pair (local_backend.UidLeases)
    assert execution.status is ExecStatus.EXITED and supervisor_uid == 0, execution
    assert execution.stdout in ("", f"{program_uid}\n") and program_uid >= UidLeases.BASE, execution


def test_host_processes_of_uid_65534_leave_the_program_its_process_limit(sandbox):
    """RLIMIT_NPROC counts a uid's processes host-wide. A Docker sandbox's programs run as 65534, the uid this
    backend used: with 60 of them alive, an honest program forking 20 children failed ('Resource temporarily
    unavailable', a runtime_error: CI, 2026-12-02). Each run now has a uid of its own."""
    if not sandbox.root:
        pytest.skip("the process limit applies as root only; doctor says so")
    others = [subprocess.Popen(["sleep", "120"], user=65534, group=65534) for _ in range(60)]
    try:
        program = ("import os\npids = [os.fork() or os._exit(0) for _ in range(20)]\n"
                   "print(sum(os.waitpid(p, 0)[1] == 0 for p in pids))\n")
        execution = sandbox.run(program)
    finally:
        for process in others:
            process.kill()
            process.wait()
    assert (execution.status, execution.stdout) == (ExecStatus.EXITED, "20\n"), execution


def test_concurrent_leases_hold_different_uids_and_free_them(tmp_path):
    """Two runs at once (threads of one sandbox, or two processes) never share a uid; a lease ends with its run."""
    leases = UidLeases(str(tmp_path))
    with leases.lease() as first, leases.lease() as second:
        assert len({*first, *second}) == 4 and first[1] == first[0] + 1
        holder = subprocess.Popen([sys.executable, "-c", HOLD_A_LEASE, str(tmp_path)], stdout=subprocess.PIPE,
                                  stdin=subprocess.PIPE, text=True)
        third = tuple(map(int, holder.stdout.readline().split()))  # another process, while both are held
        assert len({*first, *second, *third}) == 6
        holder.stdin.close()
        holder.wait(timeout=60)
    with leases.lease() as again:
        assert again == first  # every lease above has ended: slot 0 is free again


HOLD_A_LEASE = """import sys
from rlvr.sandboxes.local_backend import UidLeases
with UidLeases(sys.argv[1]).lease() as uids:
    print(*uids, flush=True)
    sys.stdin.read()
"""


PRIVATE_IN_THE_RUN = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # tmpfs of the run's own (local_backend.py)


@pytest.fixture
def host_dir():
    """A world-writable host directory outside the places the sandbox replaces, removed afterwards. Beside the
    tests unless the checkout itself lies under /tmp (CI may clone there); then the first writable other place."""
    def private(place: Path) -> bool:
        return any(str(place.resolve()).startswith(p + "/") or str(place.resolve()) == p for p in PRIVATE_IN_THE_RUN)

    candidates = [Path(__file__).parent, Path.home(), Path("/var/lib"), Path("/opt"), Path("/srv")]
    parent = next((c for c in candidates if c.is_dir() and os.access(c, os.W_OK) and not private(c)), None)
    if parent is None:
        pytest.skip(f"no writable host directory outside {PRIVATE_IN_THE_RUN}")
    path = Path(tempfile.mkdtemp(prefix=".rlvr-ro-", dir=parent))
    yield path
    shutil.rmtree(path)


def test_host_filesystem_is_read_only_and_writable_places_are_private(sandbox, host_dir):
    tmp_path = host_dir
    marker = tmp_path / "host-file"
    marker.write_text("host")
    os.chmod(tmp_path, 0o777)
    os.chmod(marker, 0o666)
    program = (
        "import os\n"
        f"for p in ({str(marker)!r}, {str(tmp_path / 'new')!r}, '/var/tmp/rlvr-local-probe', '/dev/shm/rlvr-local-probe',"
        " '/run/lock/rlvr-local-probe'):\n"
        "    try:\n        open(p, 'a').write('x')\n        print('wrote', p)\n"
        "    except OSError as e:\n        print('refused', p, e.errno)\n"
    )
    execution = sandbox.run(program)
    assert execution.ok, execution
    # Not bound inside (bubblewrap's fresh root): ENOENT; read-only where bound (/usr: the probes): EROFS.
    assert f"refused {marker} 2" in execution.stdout and f"refused {tmp_path / 'new'} 2" in execution.stdout
    assert marker.read_text() == "host" and not (tmp_path / "new").exists()
    for place in ("/var/tmp", "/dev/shm", "/run/lock"):
        assert not os.path.exists(f"{place}/rlvr-local-probe")  # written in the run's private tmpfs only
    assert sandbox.fs_problem == ""
