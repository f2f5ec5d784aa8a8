"""The programs the code verifier runs in the sandbox, and how their reports are read on the host.

`stdio` tests run the extracted code itself, once per case, and compare its stdout on the host:
nothing about the expected output ever enters the sandbox. `assert` and `call` tests run one
fixed harness (HARNESS below) whose first stdin line carries a fresh random nonce, the code and
the tests; it closes stdin before any model code runs, so neither the program file nor stdin
shows the tests. Every verdict is a line `\\n<nonce>\\t<TAG>\\t...` written by the harness to a
duplicate of fd 1 taken before the model code ran. The host counts only lines carrying the
nonce, and requires the final `DONE` line: `sys.exit(0)` or `os._exit(0)` before the tests, a
printed fake marker, a redefined `check` (the tests are executed after the code, so theirs wins),
monkeypatched builtins (the harness holds its own references) or a trace function (cleared
before the tests) cannot produce a pass. `call` results are compared on the host as JSON, so an
object that claims to equal anything fails; `assert` checks run on a guarded candidate whose
return values must be plain built-in data for the same reason.

Known limit: the nonce is in the harness's memory while the model's function runs, so code that
walks the interpreter's objects (gc, frames) to find it could forge a line. Defeating that needs
the check to run in another process than the candidate; not done.
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass, field
from typing import Any

HARNESS = r'''
import sys as _sys, os as _os, json as _json, copy as _copy, threading as _threading


def _rlvr_harness():
    cfg = _json.loads(_sys.stdin.readline())
    _sys.stdin.close()
    _os.close(0)
    # Everything the verdict depends on is bound here, before any model code runs.
    nonce, out, write, exec_, compile_ = cfg.pop("nonce"), _os.dup(1), _os.write, exec, compile
    dumps, deepcopy, settrace, setprofile, thread_settrace = _json.dumps, _copy.deepcopy, _sys.settrace, _sys.setprofile, _threading.settrace
    type_, str_, enumerate_, BaseException_, AssertionError_, TypeError_ = type, str, enumerate, BaseException, AssertionError, TypeError
    flags = type.__dict__["__flags__"].__get__  # not `t.__flags__`, which a metaclass could fake
    plain = (int, float, complex, str, bytes, bool, type(None), range)
    containers = (list, tuple, set, frozenset)

    def report(*fields):
        text = "\n" + "\t".join([nonce] + [str_(f).replace("\n", " ").replace("\t", " ") for f in fields]) + "\n"
        try:
            write(out, text.encode("utf-8", "replace"))
        except BaseException_:
            pass

    def describe(error):
        return (type_(error).__name__ + ": " + str_(error))[:300]

    def check_plain(value, depth=0):
        t = type_(value)
        if t in plain:
            return
        if depth < 50 and t in containers:
            for item in value:
                check_plain(item, depth + 1)
        elif depth < 50 and t is dict:
            for k, v in value.items():
                check_plain(k, depth + 1)
                check_plain(v, depth + 1)
        elif flags(t) & (1 << 9):  # a heap type: a class written in Python, perhaps by the model
            raise TypeError_("the candidate returned a " + t.__name__ + ", not plain built-in data")

    def guard(fn):
        def candidate(*args, **kwargs):
            result = fn(*args, **kwargs)
            check_plain(result)
            return result
        return candidate

    def untrace():
        settrace(None)
        setprofile(None)
        thread_settrace(None)

    ns = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        code = compile_(cfg.get("prefix", "") + cfg["code"], "solution.py", "exec")
    except BaseException_ as error:
        try:  # a whole function after a bare-signature prefix: the code alone
            code = compile_(cfg["code"], "solution.py", "exec")
        except BaseException_:
            report("SYNTAX", describe(error))
            report("DONE")
            return
    try:
        exec_(code, ns)
    except BaseException_ as error:
        report("CRASH", describe(error))
        report("DONE")
        return
    if cfg["kind"] == "assert":
        try:
            untrace()
            exec_(compile_(cfg["test"], "tests.py", "exec"), ns)
            candidate, check = guard(ns[cfg["entry_point"]]), ns["check"]
        except BaseException_ as error:
            report("ERROR", 0, describe(error))
            report("DONE")
            return
        untrace()
        try:
            check(candidate)
        except AssertionError_ as error:
            report("FAIL", 0, describe(error))
        except BaseException_ as error:
            report("ERROR", 0, describe(error))
        else:
            report("PASS", 0)
    else:
        try:
            fn = ns[cfg["fn"]]
        except BaseException_ as error:
            report("ERROR", 0, describe(error))
            report("DONE")
            return
        for i, case in enumerate_(cfg["cases"]):
            untrace()
            try:
                text = dumps(fn(*deepcopy(case.get("args", [])), **deepcopy(case.get("kwargs", {}))))
            except BaseException_ as error:
                report("ERROR", i, describe(error))
                continue
            report("RESULT", i, text)
    report("DONE")


_rlvr_harness()
'''


@dataclass
class Report:
    """What the harness said, read from the lines that carry the nonce."""

    done: bool = False
    syntax_error: str | None = None
    crash: str | None = None
    outcomes: dict[int, tuple[str, str]] = field(default_factory=dict)  # test index -> (TAG, payload)


def new_nonce() -> str:
    return secrets.token_hex(16)


def harness_input(nonce: str, code: str, tests: dict[str, Any]) -> str:
    """The harness's stdin: one JSON line. `call` cases go without their expected values."""
    cfg: dict[str, Any] = {"nonce": nonce, "kind": tests["kind"], "code": code, "prefix": tests.get("prefix", "")}
    if tests["kind"] == "assert":
        cfg.update(test=tests["code"], entry_point=tests["entry_point"])
    else:
        cfg.update(fn=tests["fn"], cases=[{k: c[k] for k in ("args", "kwargs") if k in c} for c in tests["cases"]])
    return json.dumps(cfg) + "\n"


def parse_report(stdout: str, nonce: str) -> Report:
    report = Report()
    prefix = nonce + "\t"
    for line in stdout.split("\n"):
        if not line.startswith(prefix):
            continue
        fields = line[len(prefix):].split("\t", 2)
        tag = fields[0]
        if tag == "DONE":
            report.done = True
        elif tag == "SYNTAX":
            report.syntax_error = fields[1] if len(fields) > 1 else ""
        elif tag == "CRASH":
            report.crash = fields[1] if len(fields) > 1 else ""
        elif tag in ("PASS", "FAIL", "ERROR", "RESULT") and len(fields) >= 2 and fields[1].isdigit():
            report.outcomes.setdefault(int(fields[1]), (tag, fields[2] if len(fields) > 2 else ""))
    return report


def values_equal(got: Any, expected: Any, float_tol: float | None) -> bool:
    """JSON values compared exactly, or floats within `float_tol` (absolute or relative) when given."""
    if float_tol is not None and _is_number(got) and _is_number(expected) and (isinstance(got, float) or isinstance(expected, float)):
        return math.isclose(got, expected, rel_tol=float_tol, abs_tol=float_tol)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(values_equal(g, e, float_tol) for g, e in zip(got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(values_equal(got[k], expected[k], float_tol) for k in got)
    if isinstance(got, bool) != isinstance(expected, bool):
        return False
    return got == expected


def stdout_matches(got: str, expected: str, float_tol: float | None) -> bool:
    """Whitespace-separated tokens equal, numbers within `float_tol` when given."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        if float_tol is None:
            return False
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not math.isclose(fx, fy, rel_tol=float_tol, abs_tol=float_tol):
            return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
