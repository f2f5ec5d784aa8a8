"""A stateful Python session on any sandbox: `open`, `run(code)` as often as wanted, `close`.

Variables persist across `run` calls of one session and never across sessions. How: by replay. The
session keeps the cells that ran cleanly; each `run` executes, in one ordinary sandbox run, those
earlier cells with their output discarded and then the new cell, in one fresh namespace. So every
call has exactly today's hardening (a fresh process under the per-run limits, the container's state
wiped after it by the supervisor, a dirty container replaced by the pool), and there is no
long-lived interpreter whose state could leak into another trajectory or outlive `close`.

Who drives the replay. The cells are the policy's and may be hostile to the runner that replays them, so the
runner does not hold them: a trusted driver does, the sandbox's checker (base.Checker: another user, its stdin
and memory out of the program's reach, its verdict channel a descriptor the program never has). The driver
sends one cell at a time over the checker pipe, each with a fresh random nonce, and sends the next only after
the runner acknowledged the last with that nonce; every acknowledgement goes to the verdict channel, which the
host reads. What this guarantees, whatever the cells do:
  * no replayed cell can read or rewrite the new cell: its source is not in the process until every earlier
    cell has returned to the runner;
  * a call is clean (its cell kept) only when the driver saw every cell, replayed and new, return to the runner
    in order and the run ended normally; a cell that ends the interpreter (`os._exit`, `sys.exit`, a signal)
    is never kept, and a replay that does not complete fails its call;
  * a replay that does not complete (a cell that exits, raises, crashes or spins only when replayed), or one
    that took half the wall limit of a call that then timed out, resets the session: that call's observation
    says so and every later call starts from an empty namespace, instead of failing or timing out for ever.
What the runner does, best effort inside the one process: it binds everything it uses (reading cells, compiling,
showing a value, formatting an error, acknowledging) before any cell runs and keeps it out of the cells'
namespace (`__main__` is the cells' own module, as in a REPL); replayed cells write to /dev/null at the
descriptor level, so their output (print, os.write, a subprocess's) never reaches a later observation. So
patching `print`, `repr`, `compile`, `exec`, `ast.parse`, `json`, `traceback` or `sys.exit` changes what
later cells' own code calls, as in Python's REPL, never how the runner runs them, shows their values or
reports their errors. Not guaranteed: a cell that deliberately reaches the runner's frames or closures
(`sys._getframe`, `gc`, `ctypes`) or leaves a thread reading its pipe can impersonate the runner from then on
(rewrite the next cell, fake its output and acknowledgement): nothing inside one interpreter can stop that
short of a process per cell, which would lose live state. A trace hook or a patched builtin that breaks later
cells breaks them as it would in a REPL. On the local backend run without root the driver shares the
program's user (local_backend.py: `separate_users`); the program can then kill it, which only fails the call.

Choices and their costs, written down because a live interpreter would behave differently:
  * the per-call limits (`Limits`: wall, CPU, memory, output) bound the replay and the new cell
    together, and replay time grows with the number of cells (the tool tasks here use few); time
    a call spends waiting for a CPU on a loaded machine is not counted (agent/clock.py); a caller with a budget
    of its own (a turn's tool time) passes what is left of it as `within_s`, which caps the call's wall limit
    and ends it at that much elapsed time, waiting or not (Limits.deadline_s);
  * a cell that did not return cleanly (exception, `sys.exit`, timeout, memory) is not kept, so its partial
    effects are not either; a cell whose result depends on time or randomness is recomputed;
  * the run ends when the new cell returns: threads or child processes it left are stopped, `atexit`
    handlers do not run;
  * files written by a cell do not persist (the workdir is wiped after every run), only variables;
  * as in a REPL, a cell ending in an expression prints its repr (None prints nothing).
The `Execution` that `run` returns is the sandbox's with `exit_code` the cell's: 0 when it returned (kept),
1 when it raised, the process's own code (None for 0, or when it never ran) when it ended the interpreter.
Not done yet: a persistent in-container interpreter (one container per trajectory held from the
warm pool) to make long sessions cheap; it needs a new supervisor job type in agent/supervisor.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib.resources import files

from rlvr.sandboxes.base import Checker, ExecStatus, Execution, Limits, Sandbox

# The program and its driver (module docstring), each its own file, shipped as text.
_FOLDER = files("rlvr.sandboxes")
RUNNER = _FOLDER.joinpath("session_runner.py").read_text()
DRIVER = _FOLDER.joinpath("session_driver.py").read_text()

RESET = ("python session error: the session's earlier cells no longer replay cleanly (cell {at} of {n}: {why}), "
         "so the session was reset and every variable from earlier calls is gone; this call's code did not run")
SLOW_RESET = ("\n[replaying the session's earlier cells took {took:.2f} s of this call's {limit:g} s limit, so the "
              "session was reset: every variable from earlier calls is gone]")
OVER_BUDGET = "\n[stopped at the {s:.2f} s left of the caller's time budget]"
NOT_KEPT = "\n[the cell ended the interpreter before returning (exit code {code}); it is not kept]"


class PythonSession:
    """One trajectory's Python state on `sandbox` (see the module docstring). Not thread-safe: one trajectory, one caller."""

    def __init__(self, sandbox: Sandbox, limits: Limits | None = None):
        self.sandbox, self.limits = sandbox, limits
        self._cells: list[str] | None = None
        self.resets = 0  # times the session lost its state because its replay failed (module docstring)

    def open(self) -> PythonSession:
        self._cells = []
        return self

    def run(self, code: str, within_s: float | None = None) -> Execution:
        """Run `code` after the session's earlier clean cells; it is kept when it returned without an exception.

        `within_s`: what is left of the caller's own time budget (a turn's tool time): the call's wall limit is
        at most that, and it ends at that much elapsed time even when it waited for a CPU (Limits.deadline_s),
        so a budget is never overrun by a call started inside it."""
        if self._cells is None:
            raise RuntimeError("PythonSession.run before open() or after close()")
        if not isinstance(code, str):
            raise TypeError(f"code must be a string, got {type(code).__name__}")
        limits = self.limits
        if within_s is not None:
            if isinstance(within_s, bool) or not isinstance(within_s, (int, float)) or not within_s > 0:
                raise ValueError(f"within_s must be a positive number of seconds, got {within_s!r}")
            limits = limits or getattr(self.sandbox, "limits", None) or Limits()
            limits = limits.with_(wall_s=min(limits.wall_s, within_s),
                                  deadline_s=min(limits.deadline_s or float("inf"), within_s))
        driver = Checker(DRIVER, json.dumps(self._cells + [code]))
        execution = self.sandbox.run(RUNNER, "", limits, checker=driver)
        if execution.status is ExecStatus.ERROR:  # the sandbox failed: nothing is known of the cells
            return execution
        ready, acks = _read_verdict(execution.verdict)
        n = len(self._cells)
        if ready and (len(acks) < n or not all(ok for ok, _ in acks[:n])):
            raised = bool(acks) and not acks[-1][0]  # the driver stops at the first error
            why = ("it raised an exception" if raised else execution.status.value
                   if execution.status is not ExecStatus.EXITED else "it ended the interpreter")
            self._reset()
            return replace(execution, stdout="", exit_code=None,
                           stderr=RESET.format(at=len(acks) + (not raised), n=n, why=why))
        final = acks[n][0] if ready and len(acks) > n else None
        if final and execution.status is ExecStatus.EXITED:
            self._cells.append(code)
            return replace(execution, exit_code=0)
        stderr, code_ = execution.stderr, 1 if final is False else (execution.exit_code or None)
        if final is None and execution.status is ExecStatus.EXITED:
            stderr += NOT_KEPT.format(code=execution.exit_code)
        limit = (self.limits or Limits()).wall_s
        if execution.status is ExecStatus.TIMEOUT and n and ready and acks[n - 1][1] >= limit / 2:
            stderr += SLOW_RESET.format(took=acks[n - 1][1], limit=limit)
            self._reset()
        elif execution.status is ExecStatus.TIMEOUT and within_s is not None and within_s < limit:
            stderr += OVER_BUDGET.format(s=within_s)
        return replace(execution, stderr=stderr, exit_code=code_)

    def _reset(self) -> None:
        self._cells = []
        self.resets += 1

    def close(self) -> None:
        """Forget the session's state; safe to call twice. The sandbox itself belongs to the caller."""
        self._cells = None

    def __enter__(self) -> PythonSession:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


def _read_verdict(verdict: str) -> tuple[bool, list[tuple[bool, float]]]:
    """The driver's record: whether the runner started, and (returned cleanly, seconds since it started) per cell."""
    lines = verdict.splitlines()
    if not lines or lines[0] != "ready":
        return False, []
    acks = []
    for line in lines[1:]:
        index, status, seconds = (line.split() + ["", "", ""])[:3]
        if index != str(len(acks)) or status not in ("ok", "error"):
            break
        acks.append((status == "ok", float(seconds)))
    return True, acks
