"""Under CPU load an honest program is never failed for time it spent waiting for a CPU (no verdict that
load can flip), while a spinning program still ends at its CPU limit and a sleeping one at its wall limit.

Four CPU hogs per core run beside the sandbox for this module, as generation and training do beside the verifier
in RL, and two runs go at once, as the verifier's workers run them (two hogs per core and one run at a time slowed
these programs too little to fail them reliably on the old clock: 0.5 s of CPU took 0.7-0.8 s here). Before the
run clock (sandboxes/agent/clock.py) a python-tool cell using 27 ms of CPU came back `timeout` at its 1 s wall
limit: it had waited a second on the run queue. Every assertion is on statuses and CPU seconds, none on how long
the test takes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from rlvr.sandboxes.base import ExecStatus, Limits, MiB
from rlvr.sandboxes.session import PythonSession

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

HOGS_PER_CORE = 4
LIMITS = Limits(wall_s=1.0, cpu_s=1.0, memory_bytes=128 * MiB, output_bytes=4096)


def cpu_work(seconds: float) -> str:
    """Source that computes for `seconds` of its own CPU time: the same program on a fast or a slow machine."""
    return f"import time\nstart = time.process_time()\nwhile time.process_time() - start < {seconds}:\n    pass\n"


HONEST = cpu_work(0.6 * LIMITS.cpu_s) + "print('done')\n"  # 60% of its CPU limit
# A python-tool session: a probe, a cell computing for 45% of the limit, and one using its result (the session
# replays the earlier cells, so that one computes again).
CELLS = ("import os\nprint(sorted(k for k in globals() if not k.startswith('_')))",
         cpu_work(0.45 * LIMITS.cpu_s) + "total = 42\n",
         "print(total)")


@pytest.fixture(scope="module")
def hogs():
    """`while 1: pass`, HOGS_PER_CORE per core, for the module; killed (by their own pids) afterwards."""
    count = HOGS_PER_CORE * (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(count)]
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module", params=["docker", "local"])
def sandbox(request):
    from tests.sandboxes.test_sandbox_docker import backend_sandbox

    box = backend_sandbox(request.param, workers=2)
    yield box
    box.close()


def two_at_a_time(task, n: int) -> list:
    """`task()` n times, two at once, as the code verifier and the tool environment run them (one per pool slot)."""
    with ThreadPoolExecutor(max_workers=2) as workers:
        return list(workers.map(lambda _: task(), range(n)))


def session_statuses(sandbox) -> list:
    with PythonSession(sandbox, LIMITS) as session:
        return [(run.status, run.exit_code) for run in map(session.run, CELLS)]


def test_python_tool_cells_under_load_never_time_out(sandbox, hogs):
    statuses = [status for session in two_at_a_time(lambda: session_statuses(sandbox), 4) for status in session]
    assert statuses == [(ExecStatus.EXITED, 0)] * len(CELLS) * 4


def test_programs_using_most_of_their_cpu_limit_under_load_never_time_out(sandbox, hogs):
    runs = two_at_a_time(lambda: sandbox.run(HONEST, "", LIMITS), 6)
    assert [(r.status, r.stdout) for r in runs] == [(ExecStatus.EXITED, "done\n")] * len(runs), runs


def test_a_spinning_program_still_ends_at_its_cpu_limit_under_load(sandbox, hogs):
    """A generous wall limit, so that only the CPU limit can end it: a timeout with about its CPU limit spent.
    About: RLIMIT_CPU counts the kernel's exact run time, the reported cpu_s the tick-sampled rusage, and on a
    virtual machine whose host is busy the two differ (0.86 s reported for a 1 s RLIMIT_CPU, measured here)."""
    spin = sandbox.run("while True:\n    pass\n", "", LIMITS.with_(wall_s=5.0))
    assert spin.status is ExecStatus.TIMEOUT and 0.5 <= spin.cpu_s / LIMITS.cpu_s <= 1.5, spin


def test_a_spinning_program_with_equal_limits_is_a_timeout_under_load(sandbox, hogs):
    assert sandbox.run("while True:\n    pass\n", "", LIMITS).status is ExecStatus.TIMEOUT


def test_a_sleeping_program_still_ends_at_its_wall_limit_under_load(sandbox, hogs):
    sleep = sandbox.run("import time\ntime.sleep(100)\n", "", LIMITS)
    assert sleep.status is ExecStatus.TIMEOUT and sleep.cpu_s < 0.5, sleep


def test_a_fork_bomb_still_ends_under_load(sandbox, hogs):
    bomb = sandbox.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", "",
                       LIMITS.with_(pids=32))
    assert bomb.status is ExecStatus.TIMEOUT, bomb
