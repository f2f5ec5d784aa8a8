"""Local backend (namespaces + rlimits): the adversarial probes that apply to it are contained."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from rlvr.sandboxes.base import ExecStatus
from rlvr.sandboxes.probes import PROBES, HostFixtures, run_probe

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

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
    assert max(eval(execution.stdout)) < 10  # only this run's handful of processes are visible


def test_program_checker_and_supervisor_are_three_users_as_root(sandbox):
    from rlvr.sandboxes.base import Checker, Limits

    if not sandbox.root:
        pytest.skip("separate users need root; doctor says so")
    checker = ("import os\nsup = open(f'/proc/{os.getppid()}/status').read().split('Uid:')[1].split()[0]\n"
               "os.write(5, f'{os.getuid()} {sup}'.encode())\n")
    execution = sandbox.run("import os, time\nprint(os.getuid(), flush=True)\ntime.sleep(100)\n", "",
                            Limits(wall_s=20, cpu_s=20), checker=Checker(checker))
    assert execution.status is ExecStatus.EXITED and execution.verdict == "65533 0", execution


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
    assert f"refused {marker} 30" in execution.stdout and f"refused {tmp_path / 'new'} 30" in execution.stdout
    assert marker.read_text() == "host" and not (tmp_path / "new").exists()
    for place in ("/var/tmp", "/dev/shm", "/run/lock"):
        assert not os.path.exists(f"{place}/rlvr-local-probe")  # written in the run's private tmpfs only
    assert sandbox.fs_problem == ""
