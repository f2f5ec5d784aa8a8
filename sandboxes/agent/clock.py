"""The run's clock for the sandbox supervisor (supervisor.py): which time counts against a program's limits.

Standard library only, no rlvr imports, no `from __future__`: base.agent_source() sends this file's source into
the sandbox between counters.py's and process.py's (the order: __init__.py).

Why (measured on the 2-core development machine with CPU hogs beside the sandbox): a python-tool cell
that needed 27 ms of CPU came back `timeout` at its 1 s wall limit. Its /proc/<pid>/schedstat said it had spent
1.008 s runnable on a run queue; its container's CPU quota had not throttled it (cpu.stat nr_throttled 0) and it
had no major page fault. The wall clock, started before the program was even forked, had charged the program
for the machine's load. So the supervisor reads this clock every TICK_S while a program runs:

- CPU ends a computing program: at `cpu_s` of the run's CPU (the program and every descendant; not the checker,
  not the supervisor) the run ends as a timeout. Counted where the program cannot hide it: the sandbox's own
  cgroup (`_cgroup_cpu`: Docker's container, the local backend's run cgroup as root), less the supervisor's, init's
  and the checker's own CPU. A sum over /proc misses processes that are gone: a grandchild whose parent exits at
  once is reaped by init and its CPU leaves the sum (round 4 of the hostile set spent its work there). Where no
  cgroup is readable (the local backend without root) the sum over live processes plus what init reaped since the
  run began is what counts; it misses children the kernel reaped itself (their parent ignored SIGCHLD), whose CPU
  no process is credited with. RLIMIT_CPU stays on every process.
- `wall_s` counts the run's time except time it waited for a CPU. Per tick, the waiting the run's threads report
  (their schedstat run_delay, summed; the supervisor's own too, which a program blocked on a full pipe waits on) is
  credited, but never more than the supervisor's own probe says a runnable thread waits on this machine now
  (`_probe_wait`: it spins for PROBE_S and reads its own run_delay; the highest of its last PROBES readings, as
  one short spin is noisy and an honest thread's credit should not lose to the noise): the program's threads are
  the program's, and a thread it made idle-class, or pinned beside its own other threads, waits for a CPU by its
  own choice (round 4: a SCHED_IDLE spinner made every tick look like waiting, and a program past its limit ran
  to the backstop). Threads at SCHED_IDLE or a positive nice are not credited at all. So a loaded machine still
  stretches a run (by at most 1 / (1 - the probe's share of waiting)); a program alone cannot. A program that sleeps or blocks ends at `wall_s`.
  The clock starts when the program is forked.
- A backstop: at BACKSTOP x `wall_s` of plain elapsed time any run ends, whatever it waited for, or at the job's
  `deadline_s` when that is sooner (a tool call's share of its turn's budget). Only a machine that gives a run less
  than a BACKSTOP-th of a CPU gets there (on cgroup v1, Docker's containers together weigh as much as one
  root-level process: a run beside 29 busy processes gets about a 30th of a CPU). The host's own kill comes later (base.host_timeout_s).

A task's run_delay grows only when it gets a CPU again, so a thread still waiting at a tick (runnable, no CPU
since the last tick) is counted as waiting for that tick, and that much is taken off its run_delay growth later.
"""

import os
import time

TICK_S = 0.1  # how often the clock is read while a program runs
BACKSTOP = 30  # a run ends at BACKSTOP x wall_s of elapsed time, whatever it waited for (10 until 2026-12-08: under
# cgroup v1 Docker's containers share one cgroup that weighs as much as one root-level process, so 8 CPU hogs and a
# busy test run beside the sandbox gave an honest run 0.065 of a CPU: 9.3 s for a 0.6 s program, at the backstop's edge)
PROBE_S = 0.01  # the supervisor's probe spins this long in a tick whose threads reported waiting
PROBE_FROM = 0.02  # ... when they reported more than this share of the tick (an idle machine costs no probe)
PROBES = 3  # waiting is credited up to the highest of this many last probe readings
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_SCHED_IDLE = 5
_CGROUP_FILE = {}  # supervisor pid -> its cgroup's CPU file (None: none)


class RunClock:
    """The limits of one run, read from /proc (the run's own PID namespace) and its cgroup every TICK_S."""

    def __init__(self, limits: dict, start: float, not_program: tuple = ()):
        self.wall_s, self.cpu_s = float(limits["wall_s"]), float(limits["cpu_s"])
        self.backstop_s = BACKSTOP * self.wall_s
        if limits.get("deadline_s"):
            self.backstop_s = min(self.backstop_s, float(limits["deadline_s"]))
        self.start = self.last = start
        self.counted = 0.0  # seconds counted against wall_s: elapsed less the waiting credited
        self.reported = 0.0  # seconds of waiting the run's threads reported, summed over ticks
        self.capped = 0.0  # the most waiting the probes allow, summed over ticks
        self.probes = []  # the supervisor's last probe readings
        self.cpu = 0.0  # the run's CPU seconds, the highest seen
        self.not_program = set(not_program)  # pids whose CPU is not the program's (the checker)
        self.me = os.getpid()
        if self.me not in _CGROUP_FILE:  # a supervisor's cgroup is fixed: looked up once, not per run
            _CGROUP_FILE[self.me] = _cgroup_cpu_file(self.me)
        self.cgroup = _CGROUP_FILE[self.me]
        self.checker_high = 0.0
        self.base = self._others()  # CPU of the sandbox, init, us and the checker at the start
        mine = _task_sample("self", self.me) or ("R", 0.0, 0.0, True)
        self.tasks = {("self", self.me): (*mine[:3], 0.0)}  # (pid, tid) -> (state, run s, delay s, s counted pending)
        self.next = start + min(TICK_S, self.wall_s)

    def until_tick(self, now: float) -> float:
        """Seconds until the clock must be read again (0 when due)."""
        return max(0.0, self.next - now)

    def tick(self, now: float) -> bool:
        """Read the run's tasks; True when a limit is reached (CPU, counted wall time or the backstop)."""
        dt, self.last = now - self.last, now
        waited = self._waited(dt)
        cap = waited
        if waited > PROBE_FROM * dt:  # the highest of the last PROBES readings: one short spin is noisy, and the
            self.probes = self.probes[1 - PROBES:] + [_probe_wait()]  # load it sees is the machine's, not the program's
            cap = dt * max(self.probes)
        # Capped over the whole run, not per tick: a thread's waiting reaches run_delay in lumps (when it gets a
        # CPU again), so an honest run reports more than the cap in one tick and less in the next; a per-tick cap
        # dropped each lump's excess, and under load the run was charged for waiting (a 0.6 s program timed out
        # at a 1 s limit after 7.7 s, in CI). The bound is the same: what is credited never exceeds the sum of
        # the caps, dt x the probe's share in the ticks where the run reported waiting.
        self.reported, self.capped = self.reported + waited, self.capped + cap
        self.counted = (now - self.start) - min(self.reported, self.capped)
        self.run_cpu()
        elapsed = max(now, time.monotonic()) - self.start  # the probe took time too
        if self.cpu >= self.cpu_s or self.counted >= self.wall_s or elapsed >= self.backstop_s:
            return True
        self.next = now + min(TICK_S, self.wall_s - self.counted, self.backstop_s - elapsed)
        return False

    def run_cpu(self) -> float:
        """The run's CPU seconds so far (the highest reading): its cgroup's, less what is not the program's, or
        (without a cgroup, or should that read lower) the run's live processes plus what init reaped."""
        now = self._others()
        live = _run_cpu(self.not_program | {1, self.me}) + now["reaped"] - self.base["reaped"]
        if self.cgroup is not None and now["cgroup"] is not None and self.base["cgroup"] is not None:
            spent = now["cgroup"] - self.base["cgroup"]
            spent -= sum(now[key] - self.base[key] for key in ("self", "init", "checker"))
            live = max(live, spent)
        self.cpu = max(self.cpu, live)
        return self.cpu

    def _others(self) -> dict:
        """CPU seconds so far: the sandbox cgroup's (None without one), ours, init's own, what init reaped, the
        checker's (with anything it reaped)."""
        init, checker = _stat_cpu(1), sum(sum(_stat_cpu(pid)) for pid in self.not_program)
        self.checker_high = max(self.checker_high, checker)  # a reaped checker reads 0
        return {"cgroup": _cgroup_cpu(self.cgroup), "self": _stat_cpu(self.me)[0], "init": init[0],
                "reaped": init[1], "checker": self.checker_high}

    def _waited(self, dt: float) -> float:
        """Seconds the run's threads spent runnable without a CPU since the last tick, summed over threads;
        threads that asked for less than a fair share (SCHED_IDLE, nice > 0) are not counted."""
        waited, seen = 0.0, {}
        for key in [("self", self.me)] + _run_tasks({1, self.me}):
            sample = _task_sample(*key)
            if sample is None:
                continue
            state, run, delay, fair = sample
            if key not in self.tasks:  # born since the last tick: all its waiting was in this run
                seen[key] = (state, run, delay, 0.0)
                waited += delay if fair else 0.0
                continue
            _, last_run, last_delay, pending = self.tasks[key]
            grew = delay - last_delay
            if grew > 0:  # it got a CPU again: its wait is now in run_delay, the part counted already aside
                waited += max(0.0, grew - pending) if fair else 0.0
                pending = 0.0
            if state == "R" and run == last_run and fair:  # runnable and no CPU all tick long: waiting right now
                waited += dt
                pending += dt
            seen[key] = (state, run, delay, pending)
        self.tasks = seen
        return waited


def _probe_wait() -> float:
    """The share of PROBE_S this thread, kept runnable, spent waiting for a CPU: what a runnable thread of a
    fair share waits on this machine now. Measured with a 10 ms spin against 8 CPU hogs on 2 cores: 0.90 on
    average against 0.90 for a thread spinning for 3 s beside it (0.79-0.94 per spin)."""
    before, start = _task_sample("self", "self"), time.monotonic()
    while time.monotonic() - start < PROBE_S:
        pass
    after, took = _task_sample("self", "self"), time.monotonic() - start
    if before is None or after is None or took <= 0:
        return 1.0  # unreadable: the program's own report stands, as before the probe
    return min(1.0, max(0.0, (after[2] - before[2]) / took))


def _cgroup_cpu_file(me: int):
    """The file holding the CPU time of the cgroup this supervisor is directly in, as the sandbox shows it
    (cgroup v2 cpu.stat, v1 cpuacct.usage); None where there is none, or where the cgroup shown is not ours
    (a host's whole hierarchy, a parent of ours): its other members' CPU would be charged to the program."""
    for directory, name in (("/sys/fs/cgroup", "cpu.stat"), ("/sys/fs/cgroup/cpuacct", "cpuacct.usage"),
                            ("/sys/fs/cgroup/cpu,cpuacct", "cpuacct.usage")):
        try:
            with open(os.path.join(directory, "cgroup.procs")) as f:
                members = f.read().split()
        except OSError:
            continue
        path = os.path.join(directory, name)
        if str(me) in members and _cgroup_cpu(path) is not None:
            return path
    return None


def _cgroup_cpu(path):
    """CPU seconds used so far by every process that was ever in the cgroup of `path`; None when unreadable."""
    if path is None:
        return None
    try:
        with open(path) as f:
            text = f.read()
        if path.endswith("cpu.stat"):
            usage = dict(line.split() for line in text.splitlines() if line.count(" ") == 1)
            return int(usage["usage_usec"]) / 1e6
        return int(text) / 1e9
    except (OSError, KeyError, ValueError):
        return None


def _stat_cpu(pid) -> tuple:
    """(own CPU seconds, CPU seconds of the children it reaped) of a process, (0, 0) when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK, (int(fields[13]) + int(fields[14])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def _run_tasks(skip: set) -> list:
    """(pid, tid) of every thread of every process in the namespace but `skip`."""
    tasks = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            tasks += [(name, tid) for tid in os.listdir(f"/proc/{name}/task")]
        except OSError:
            continue
    return tasks


def _task_sample(pid, tid):
    """(state, seconds on a CPU, seconds runnable on a run queue, whether it asked for a fair share: not
    SCHED_IDLE, nice <= 0) of one thread, None when it is gone. ("self", "self"): the calling thread."""
    prefix = "/proc/thread-self" if tid == "self" else f"/proc/{pid}/task/{tid}"
    try:
        with open(f"{prefix}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open(f"{prefix}/schedstat", "rb") as f:
            run, delay = f.read().split()[:2]
        fair = int(fields[16]) <= 0 and int(fields[38]) != _SCHED_IDLE  # nice, policy
    except (OSError, IndexError, ValueError):
        return None
    return fields[0].decode(), int(run) / 1e9, int(delay) / 1e9, fair


def _run_cpu(skip: set) -> float:
    """CPU seconds of the processes in the namespace but `skip`, with the children each has reaped."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime (clock ticks)
        except (OSError, IndexError, ValueError):
            continue
    return total / _CLK_TCK
