"""Hostile cells against the python tool's session (sandboxes/session.py), on both sandbox backends: one row per
attack on a replayed session. A cell the session replays must not rewrite a later cell, fake its output or its
status, end the replay early and count as clean, or make every later call time out. Each row failed on the
runner that kept the cells in a list of its own and replayed them all in one go."""

from __future__ import annotations

import pytest

from rlvr.sandboxes.base import ExecStatus, Limits, MiB
from rlvr.sandboxes.session import PythonSession

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uids are machine-wide

LIMITS = Limits(wall_s=1.0, cpu_s=1.0, memory_bytes=128 * MiB, output_bytes=4096)

# True while the cell is being replayed (its output going nowhere), False when it runs as the call's new cell:
# a cell that behaves only when replayed is invisible the one time its author sees it run.
REPLAYED = ("import io as _io, os as _os, stat as _stat, sys as _sys\n"
            "_replayed = not (isinstance(_sys.stdout, _io.TextIOWrapper) and _stat.S_ISFIFO(_os.fstat(1).st_mode))\n")
REAL, FORGED = "print('real')", "print('forged')"


@pytest.fixture(scope="module", params=["docker", "local"])
def sandbox(request):
    from tests.sandboxes.test_sandbox_docker import backend_sandbox

    box = backend_sandbox(request.param, workers=1)
    yield box
    box.close()


def session(sandbox) -> PythonSession:
    return PythonSession(sandbox, LIMITS)


def run_clean(s: PythonSession, code: str):
    execution = s.run(code)
    assert execution.ok, execution
    return execution


def test_a_replayed_cell_cannot_find_and_rewrite_the_new_cell(sandbox):
    """The new cell is not in the process while earlier cells replay: neither the runner's globals nor a scan
    of the whole heap finds its source."""
    rewrite = ("import gc, __main__\n"
               f"for _o in [getattr(__main__, '_cells', None), vars(__main__)] + gc.get_objects():\n"
               "    if isinstance(_o, list):\n"
               f"        _o[:] = [{FORGED!r} if _v == {REAL!r} else _v for _v in _o]\n"
               "    elif isinstance(_o, dict):\n"
               f"        for _k in [k for k, v in list(_o.items()) if v == {REAL!r}]: _o[_k] = {FORGED!r}\n")
    with session(sandbox) as s:
        run_clean(s, rewrite)
        assert run_clean(s, REAL).stdout == "real\n"


HOOKS = {  # each replaces a function the runner itself used to look up after the cells had run
    "builtins.compile": "import builtins as _b\n_c = _b.compile\n"
                        f"_b.compile = lambda source, *a, **k: _c({FORGED!r}, *a, **k)\n",
    "builtins.exec": f"import builtins as _b\n_b.exec = lambda *a, **k: _b.__dict__['print']('forged')\n",
    "ast.parse": f"import ast as _a\n_p = _a.parse\n_a.parse = lambda *a, **k: _p({FORGED!r})\n",
}


@pytest.mark.parametrize("hook", HOOKS)
def test_a_replayed_cell_cannot_hook_how_later_cells_are_compiled(sandbox, hook):
    """As in Python's own REPL: patching compile/exec/ast.parse changes what later cells call, not how the
    interpreter runs them."""
    with session(sandbox) as s:
        run_clean(s, HOOKS[hook])
        assert run_clean(s, REAL).stdout == "real\n"


def test_patched_print_and_repr_do_not_change_how_a_value_is_shown(sandbox):
    """A REPL shows a final expression's value with its own display hook, whatever `print` and `repr` became."""
    with session(sandbox) as s:
        run_clean(s, "import builtins\nbuiltins.print = lambda *a, **k: None\nbuiltins.repr = lambda o: 'forged'")
        assert run_clean(s, "6 * 7").stdout == "42\n"


def test_patched_sys_exit_and_traceback_cannot_turn_a_failing_cell_clean(sandbox):
    with session(sandbox) as s:
        run_clean(s, "import sys, traceback\nsys.exit = lambda *a: None\n"
                     "traceback.format_exception = lambda *a, **k: ['', '']")
        failed = s.run("1 / 0")
        assert not failed.ok and failed.exit_code == 1 and "ZeroDivisionError" in failed.stderr, failed
        assert run_clean(s, "print('after')").stdout == "after\n"  # the failed cell was not kept


def test_replayed_output_never_reaches_a_later_call(sandbox):
    with session(sandbox) as s:
        assert run_clean(s, "import os\nos.write(1, b'leaked\\n')\nprint('shown')").stdout == "leaked\nshown\n"
        assert run_clean(s, "print('b')").stdout == "b\n"


EXITS = {"os._exit(0)": "_os._exit(0)", "sys.exit(0)": "_sys.exit(0)", "raise SystemExit": "raise SystemExit"}


@pytest.mark.parametrize("how", EXITS)
def test_a_replay_that_ends_early_fails_the_call_and_resets_the_session(sandbox, how):
    """Ended early, the replay ran neither the rest of the cells nor the new one: that call fails and says the
    session was reset; the next call starts from nothing and runs."""
    with session(sandbox) as s:
        run_clean(s, REPLAYED + f"x = 1\nif _replayed:\n    {EXITS[how]}\n")
        after = s.run("y = 2\nprint('ran')")
        assert not after.ok and after.stdout == "" and "session was reset" in after.stderr, after
        assert run_clean(s, "print('x' in globals(), 'y' in globals())").stdout == "False False\n"


def test_a_cell_that_ends_the_interpreter_is_not_kept(sandbox):
    with session(sandbox) as s:
        run_clean(s, "x = 1")
        ended = s.run("import os\nprint('bye', flush=True)\nos._exit(0)")
        assert not ended.ok and ended.stdout == "bye\n" and "not kept" in ended.stderr, ended
        assert not s.run("raise SystemExit(0)").ok
        assert run_clean(s, "print(x)").stdout == "1\n"  # neither was kept; the state before them was


def test_a_cell_slow_only_when_replayed_resets_the_session_instead_of_timing_out_every_call(sandbox):
    with session(sandbox) as s:
        run_clean(s, REPLAYED + "x = 1\nif _replayed:\n    while True: pass\n")
        stuck = s.run("print(1)")
        assert not stuck.ok and "session was reset" in stuck.stderr, stuck
        assert run_clean(s, "print('x' in globals())").stdout == "False\n"


def test_a_replay_that_uses_half_the_limit_resets_a_session_whose_cell_times_out(sandbox):
    """Replay time grows with the session; once it takes half a call's limit and a call times out, the session
    starts over rather than timing out every heavier call after it."""
    with session(sandbox) as s:
        run_clean(s, REPLAYED + "import time\nif _replayed:\n    time.sleep(0.6)\n")
        spin = s.run("while True: pass")
        assert spin.status is ExecStatus.TIMEOUT and "session was reset" in spin.stderr, spin
        assert run_clean(s, "print('_replayed' in globals())").stdout == "False\n"


def test_a_cell_that_times_out_alone_keeps_the_session(sandbox):
    with session(sandbox) as s:
        run_clean(s, "x = 41")
        spin = s.run("while True: pass")
        assert spin.status is ExecStatus.TIMEOUT and "reset" not in spin.stderr, spin
        assert run_clean(s, "x + 1").stdout == "42\n"
