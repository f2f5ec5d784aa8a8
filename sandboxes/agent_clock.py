"""The run's clock for the sandbox supervisor (agent.py): which time counts against a program's limits.

Standard library only, no rlvr imports, no `from __future__`: base.agent_source() sends this file's source into
the sandbox between agent_reset.py's and agent_process.py's.

Why (measured on the 2-core development machine with CPU hogs beside the sandbox): a python-tool cell
that needed 27 ms of CPU came back `timeout` at its 1 s wall limit. Its /proc/<pid>/schedstat said it had spent
1.008 s runnable on a run queue; its container's CPU quota had not throttled it (cpu.stat nr_throttled 0) and it
had no major page fault. The wall clock, started before the program was even forked, had charged the program
for the machine's load. So the supervisor reads this clock every TICK_S while a program runs:

- CPU ends a computing program: the CPU time of the run's processes (the program and its descendants, summed;
  not the checker, not the supervisor) at `cpu_s` ends the run as a timeout. RLIMIT_CPU stays on every process.
- `wall_s` counts the run's time except time it waited for a CPU: in each tick, the time any of the run's
  threads (the program's, the checker's, and the supervisor's own, which a blocked writer waits on) spent
  runnable on a run queue is not counted, up to the tick's length. A program that sleeps or blocks (a sleep, a
  read that nobody answers) still ends at `wall_s`. The clock starts when the program is forked.
- A backstop: at BACKSTOP x `wall_s` of plain elapsed time any run ends, whatever it waited for. Only a machine
  that gives a run less than a BACKSTOP-th of a CPU, or a program whose own short-lived orphans keep it
  waiting (their CPU vanishes with them), gets there. The host's own kill comes later (base.host_timeout_s).

A task's run_delay grows only when it gets a CPU again, so a thread still waiting at a tick (runnable, no CPU
since the last tick) is counted as waiting for that tick, and that much is taken off its run_delay growth later.
"""

import os

TICK_S = 0.1  # how often the clock is read while a program runs
BACKSTOP = 10  # a run ends at BACKSTOP x wall_s of elapsed time, whatever it waited for
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class RunClock:
    """The limits of one run, read from /proc (the run's own PID namespace) every TICK_S."""

    def __init__(self, limits: dict, start: float, not_program: tuple = ()):
        self.wall_s, self.cpu_s = float(limits["wall_s"]), float(limits["cpu_s"])
        self.start = self.last = start
        self.counted = 0.0  # seconds counted against wall_s
        self.cpu = 0.0  # the run's CPU seconds, the highest sum seen
        self.not_program = set(not_program)  # pids whose CPU is not the program's (the checker)
        self.me = os.getpid()
        mine = _task_sample("self", self.me) or ("R", 0.0, 0.0)
        self.tasks = {("self", self.me): (*mine, 0.0)}  # (pid, tid) -> (state, run s, delay s, s counted as pending)
        self.next = start + min(TICK_S, self.wall_s)

    def until_tick(self, now: float) -> float:
        """Seconds until the clock must be read again (0 when due)."""
        return max(0.0, self.next - now)

    def tick(self, now: float) -> bool:
        """Read the run's tasks; True when a limit is reached (CPU, counted wall time or the backstop)."""
        dt, self.last = now - self.last, now
        self.counted += dt - min(dt, self._waited(dt))
        self.cpu = max(self.cpu, _run_cpu(self.not_program | {1, self.me}))
        elapsed = now - self.start
        if self.cpu >= self.cpu_s or self.counted >= self.wall_s or elapsed >= BACKSTOP * self.wall_s:
            return True
        self.next = now + min(TICK_S, self.wall_s - self.counted, BACKSTOP * self.wall_s - elapsed)
        return False

    def _waited(self, dt: float) -> float:
        """Seconds the run's threads spent runnable without a CPU since the last tick, summed over threads."""
        waited, seen = 0.0, {}
        for key in [("self", self.me)] + _run_tasks({1, self.me}):
            sample = _task_sample(*key)
            if sample is None:
                continue
            state, run, delay = sample
            if key not in self.tasks:  # born since the last tick: all its waiting was in this run
                seen[key] = (state, run, delay, 0.0)
                waited += delay
                continue
            _, last_run, last_delay, pending = self.tasks[key]
            grew = delay - last_delay
            if grew > 0:  # it got a CPU again: its wait is now in run_delay, the part counted already aside
                waited += max(0.0, grew - pending)
                pending = 0.0
            if state == "R" and run == last_run:  # runnable and no CPU all tick long: waiting right now
                waited += dt
                pending += dt
            seen[key] = (state, run, delay, pending)
        self.tasks = seen
        return waited


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
    """(state, seconds on a CPU, seconds runnable on a run queue) of one thread, None when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0].decode()
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
            run, delay = f.read().split()[:2]
    except (OSError, IndexError, ValueError):
        return None
    return state, int(run) / 1e9, int(delay) / 1e9


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
