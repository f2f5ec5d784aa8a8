"""A stateful Python session on any sandbox: `open`, `run(code)` as often as wanted, `close`.

Variables persist across `run` calls of one session and never across sessions. How: by replay. The
session keeps the cells that ran cleanly; each `run` executes, in one ordinary sandbox run, those
earlier cells with their output discarded and then the new cell, in one fresh namespace. So every
call has exactly today's hardening (a fresh process under the per-run limits, the container's state
wiped after it by the supervisor, a dirty container replaced by the pool), and there is no
long-lived interpreter whose state could leak into another trajectory or outlive `close`.

Choices and their costs, written down because a live interpreter would behave differently:
  * the per-call limits (`Limits`: wall, CPU, memory, output) bound the replay and the new cell
    together, and replay time grows with the number of cells (the tool tasks here use few); time
    a call spends waiting for a CPU on a loaded machine is not counted (agent_clock.py);
  * a cell that did not exit cleanly (exception, timeout, memory) is not kept, so its partial
    effects are not either; a cell whose result depends on time or randomness is recomputed;
  * files written by a cell do not persist (the workdir is wiped after every run), only variables;
  * as in a REPL, a cell ending in an expression prints its repr (None prints nothing).
Not done yet: a persistent in-container interpreter (one container per trajectory held from the
warm pool) to make long sessions cheap; it needs a new supervisor job type in agent.py.
"""

from __future__ import annotations

import json

from rlvr.sandboxes.base import Execution, Limits, Sandbox

RUNNER = '''
import ast, contextlib, io, json, sys, traceback
_cells = json.loads({cells!r})
def _run(source, namespace, show):
    tree = ast.parse(source, "<cell>", "exec")
    last = tree.body.pop() if show and tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
        if value is not None:
            print(repr(value))
_namespace = {{"__name__": "__main__", "__builtins__": __builtins__}}
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for _cell in _cells[:-1]:
        _run(_cell, _namespace, False)
try:
    _run(_cells[-1], _namespace, True)
except BaseException as _error:
    if isinstance(_error, SystemExit):
        raise
    _lines = traceback.format_exception(type(_error), _error, _error.__traceback__)
    sys.stderr.write(_lines[0] + "".join(l for l in _lines[1:] if 'File "<cell>"' in l or not l.startswith("  File")))
    sys.exit(1)
'''


class PythonSession:
    """One trajectory's Python state on `sandbox` (see the module docstring). Not thread-safe: one trajectory, one caller."""

    def __init__(self, sandbox: Sandbox, limits: Limits | None = None):
        self.sandbox, self.limits = sandbox, limits
        self._cells: list[str] | None = None

    def open(self) -> PythonSession:
        self._cells = []
        return self

    def run(self, code: str) -> Execution:
        """Run `code` after the session's earlier clean cells; it is kept when it exits with code 0."""
        if self._cells is None:
            raise RuntimeError("PythonSession.run before open() or after close()")
        if not isinstance(code, str):
            raise TypeError(f"code must be a string, got {type(code).__name__}")
        cells = self._cells + [code]
        execution = self.sandbox.run(RUNNER.format(cells=json.dumps(cells)), "", self.limits)
        if execution.ok:
            self._cells.append(code)
        return execution

    def close(self) -> None:
        """Forget the session's state; safe to call twice. The sandbox itself belongs to the caller."""
        self._cells = None

    def __enter__(self) -> PythonSession:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()
