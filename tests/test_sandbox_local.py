"""Local backend (namespaces + rlimits): the adversarial probes that apply to it are contained."""

from __future__ import annotations

import pytest

from rlvr.sandboxes.base import ExecStatus
from rlvr.sandboxes.probes import PROBES, HostFixtures, run_probe

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
