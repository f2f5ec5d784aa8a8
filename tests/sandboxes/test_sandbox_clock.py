"""The run clock counts all of a run (sandboxes/agent/clock.py; issue 50, class 3): CPU spent where the program
hides it is still CPU, waiting the program makes for itself is not waiting for the machine, and a tool call
cannot outlast the turn's tool-time budget it started in.

Each was an attack of round 4's hostile set: work done in grandchildren whose parents exit at once (reaped by init,
their CPU left the clock's sum over live processes), an idle-class process pinned beside the program's own
spinner (every tick looked like waiting for a CPU, so wall time stopped until the backstop, 10 x the limit), and a
tool call running past the turn's cap, which was checked only between calls. Assertions are on statuses, CPU
seconds and the run's own reported time measured against its limits, never on how long the test takes.
"""

from __future__ import annotations

import time

import pytest
from rlvr.sandboxes.agent.clock import BACKSTOP
from rlvr.sandboxes.base import ExecStatus, Limits, MiB
from rlvr.sandboxes.session import PythonSession

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

LIMITS = Limits(wall_s=1.0, cpu_s=1.0, memory_bytes=128 * MiB, output_bytes=4096)

# 2 s of CPU, all of it in grandchildren: each child forks one and exits at once, so init reaps the grandchild.
GRANDCHILDREN = """
import os, time

def work(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

for _ in range(20):
    done, signal_ = os.pipe()
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            os.close(done)
            work(0.1)
        os._exit(0)
    os.close(signal_)
    os.waitpid(child, 0)
    os.read(done, 1)  # end of file once the grandchild exited
    os.close(done)
print("done")
"""

# The same 2 s in children of a parent that ignores SIGCHLD: the kernel reaps them itself, so no process (init
# included) is ever credited their CPU; only the cgroup has it.
AUTOREAPED = """
import os, signal, time

signal.signal(signal.SIGCHLD, signal.SIG_IGN)
for _ in range(20):
    done, signal_ = os.pipe()
    if os.fork() == 0:
        os.close(done)
        start = time.process_time()
        while time.process_time() - start < 0.1:
            pass
        os._exit(0)
    os.close(signal_)
    os.read(done, 1)  # end of file once the child exited
    os.close(done)
print("done")
"""

# A sleeping program and two spinners it pinned to one CPU, one idle-class and one at nice 19: the idle one is always
# runnable and hardly ever gets the CPU, so every tick it has waited, for a reason of the program's own making.
IDLE_SPINNERS = """
import os, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
if os.fork() == 0:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while True:
        pass
if os.fork() == 0:
    os.nice(19)
    while True:
        pass
time.sleep(1000)
"""


@pytest.fixture(scope="module", params=["docker", "local"])
def sandbox(request):
    from tests.sandboxes.test_sandbox_docker import backend_sandbox

    box = backend_sandbox(request.param, workers=1)
    yield box
    box.close()


@pytest.mark.parametrize("program", [GRANDCHILDREN, AUTOREAPED], ids=["reaped_by_init", "reaped_by_the_kernel"])
def test_cpu_spent_in_processes_that_are_gone_is_counted(sandbox, program):
    """A generous wall limit, so only CPU can end it: before, the program finished its 2 s of CPU as `exited`.
    Both backends here run with a cgroup (Docker's container; local as root); without one, the second escapes
    (sandboxes/README.md)."""
    cgroup = getattr(sandbox, "cgroup", "docker")  # LocalSandbox: its RunCgroup, None when not root
    if program is AUTOREAPED and (cgroup is None or cgroup != "docker" and not {"", "cpuacct"} & set(cgroup.dirs)):
        pytest.skip("the local backend without a CPU cgroup cannot see CPU that nobody reaped")
    run = sandbox.run(program, "", LIMITS.with_(wall_s=20.0))
    assert run.status is ExecStatus.TIMEOUT and run.cpu_s >= LIMITS.cpu_s, run


def test_an_idle_class_spinner_does_not_stop_the_wall_clock(sandbox):
    """A CPU limit as long as the backstop, so only the wall limit can end it early. Before, each tick counted as
    waiting for a CPU and the run went on to the backstop (BACKSTOP x wall_s, or its CPU limit, as long); now a
    thread that asked for less than a fair share (SCHED_IDLE, a positive nice) is not credited with waiting."""
    limits = LIMITS.with_(cpu_s=BACKSTOP * LIMITS.wall_s)
    run = sandbox.run(IDLE_SPINNERS, "", limits)
    assert run.status is ExecStatus.TIMEOUT and run.wall_s < BACKSTOP / 2 * limits.wall_s, run


def test_a_session_call_ends_at_the_budget_it_is_given(sandbox):
    """Its own limit is 30 s; the caller has 1 s left: the call is cut there and says so."""
    with PythonSession(sandbox, LIMITS.with_(wall_s=30.0, cpu_s=30.0)) as session:
        run = session.run("import time\ntime.sleep(20)\n", within_s=1.0)
    assert run.status is ExecStatus.TIMEOUT and "left of the caller's time budget" in run.stderr, run


def test_a_tool_call_cannot_outlast_its_turns_tool_time(sandbox):
    """tool_multiply: a 1 s cap on a message's tool time and a 30 s call limit; a call sleeping 20 s used to run
    to its end (the cap was checked only before a call started), now it is stopped at the cap as a timeout, and
    the message's next call is not run."""
    from rlvr.envs import load_env

    env = load_env("tool_multiply", digits=2, tool_timeout_s=30.0, max_tool_seconds_per_turn=1.0)
    env._sandbox = sandbox
    row = env.rows("train", 1)[0]
    state = env.start(row)
    call = '<tool_call>{"name": "python", "arguments": {"code": "import time\\ntime.sleep(20)\\nprint(1)"}}</tool_call>'
    reply = env.step(row, state, call * 2)
    env.close(state)
    assert reply.messages[0]["content"].endswith("[timeout]") and "already took" in reply.messages[1]["content"]
    assert reply.tool_errors == 2, reply


def _fake_run(monkeypatch, probe: float, reaped=lambda k: 0.0, ticks=100, tick=None, sample=True):
    """A RunClock over one program thread that is runnable and gets no CPU at any tick (what an idle-class thread
    reports), with the supervisor's probe measuring `probe` of its own time waiting, and `reaped(k)` CPU seconds
    reaped by init at tick k; no cgroup. Returns the tick at which the clock ends the run (None: not in `ticks`).
    `sample=False` keeps the caller's `_task_sample`, which reads the tick number from `tick`."""
    from rlvr.sandboxes.agent import clock as agent_clock  # `clock` is the RunClock below

    tick = tick if tick is not None else [0]
    monkeypatch.setattr(agent_clock, "_cgroup_cpu_file", lambda me: None)
    monkeypatch.setattr(agent_clock, "_CGROUP_FILE", {})  # nothing this process looked up before
    monkeypatch.setattr(agent_clock, "_run_cpu", lambda skip: 0.0)
    monkeypatch.setattr(agent_clock, "_stat_cpu", lambda pid: (0.0, reaped(tick[0]) if pid == 1 else 0.0))
    monkeypatch.setattr(agent_clock, "_run_tasks", lambda skip: [("7", "7")])
    if sample:
        monkeypatch.setattr(agent_clock, "_task_sample", lambda pid, tid: ("S", 0.0, 0.0, True) if pid == "self"
                            else ("R", 0.0, 0.0, True))
    monkeypatch.setattr(agent_clock, "_probe_wait", lambda: probe)
    start = time.monotonic()  # the clock's backstop also reads the real clock (its probe takes time)
    clock = agent_clock.RunClock({"wall_s": 1.0, "cpu_s": 1.0}, start)
    for k in range(1, ticks + 1):
        tick[0] = k
        if clock.tick(start + 0.1 * k):
            return k, clock
    return None, clock


def test_waiting_is_credited_only_up_to_what_the_supervisors_probe_measured(monkeypatch):
    """The thread reports waiting all of every tick; the machine made the probe wait a quarter of its time: a
    quarter of each tick is credited, so the 1 s wall limit ends the run after about 1 / 0.75 s. With the
    program's report trusted (a probe that always waited), it would run to the backstop (BACKSTOP x 10 ticks)."""
    assert _fake_run(monkeypatch, probe=0.25)[0] in (13, 14)  # 0.1 (new thread) + 12 x 0.075 = 1.0, or a float under
    assert _fake_run(monkeypatch, probe=1.0, ticks=BACKSTOP * 10)[0] == BACKSTOP * 10


def test_waiting_that_reaches_run_delay_in_lumps_is_credited_in_full(monkeypatch):
    """An honest program on a loaded machine waits 90% of the time and runs 10%, but its run_delay grows in lumps:
    0.045 s in one tick, 0.135 s in the next (it lands when the thread gets a CPU again). The probe says a thread
    waits 0.9 of its time. Capped over the run, all of it is credited: after 60 ticks (6 s) 6 - 5.4 = 0.6 s counts
    against the 1 s wall limit, the 10% it ran. Capped per tick (before), each 0.135 lost 0.045: 0.0325 s counted
    per tick and the run ended at tick 31, a timeout load had caused (CI, 2026-12-07: 0.6 s of CPU, 7.7 s)."""
    from rlvr.sandboxes.agent import clock as agent_clock  # `clock` is the RunClock below

    delay = lambda k: 0.18 * (k // 2) + (0.045 if k % 2 else 0.0)  # run_delay at tick k
    tick = [0]
    monkeypatch.setattr(agent_clock, "_task_sample", lambda pid, tid: ("S", 0.0, 0.0, True) if pid == "self"
                        else ("S", 0.01 * tick[0], delay(tick[0]), True))
    ended, clock = _fake_run(monkeypatch, probe=0.9, ticks=60, tick=tick, sample=False)
    assert ended is None and abs(clock.counted - 0.6) < 1e-6, clock.counted


def test_without_a_cgroup_cpu_that_init_reaped_is_the_runs(monkeypatch):
    """No cgroup (the local backend without root): orphans that init reaped since the run began count, 0.2 s of
    CPU per tick here, so the 1 s CPU limit ends the run at tick 5, long before its wall limit."""
    ended, clock = _fake_run(monkeypatch, probe=1.0, reaped=lambda k: 0.2 * k)
    assert ended == 5 and clock.cpu >= 1.0
