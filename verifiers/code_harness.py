"""The programs the code verifier runs in the sandbox, and how their verdicts are read on the host.

`stdio` tests run the extracted code itself, once per case, and compare its stdout on the host:
nothing about the expected output ever enters the sandbox. `assert` and `call` tests run two
processes under two users (sandboxes/agent.py): CANDIDATE, the model's code, and CHECKER, the
tests. The candidate process execs prefix + code and then only answers calls: a call request
(function name, arguments) arrives on its fd 3, the return value (or the exception's type name
and message) goes back on its fd 4, both through the strict serialiser of code_wire.py. The
checker holds the tests, which reach it on its own stdin; `check(candidate)` (assert) or
`fn(*args)` per case (call) runs there with `candidate` a proxy that sends each call across, so
what comes back is a fresh built-in value: an object that claims to equal everything, a proxy
type or an int subclass cannot cross, and patching `builtins`, `math.isclose` or the tracer in
the candidate's process changes nothing in the checker's. No test source, expected value or
verdict ever exists in the candidate's memory; the verdict lines go from the checker's fd 5 to
the supervisor, an fd the candidate never holds, so nothing the candidate prints or writes can
count (there is no nonce to steal). The final `DONE` line is required: a checker that did not
finish has no verdict.

What the candidate still controls: its own answers, and whether it raises (the checker re-raises
a built-in exception by name, or CandidateError). Arguments are copies: a test that relies on the
candidate mutating an argument in place does not see the mutation (none of HumanEval's does).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

_WIRE = files("rlvr.verifiers").joinpath("code_wire.py").read_text()

CANDIDATE = _WIRE + r'''
import sys as _sys


def _rlvr_watch():
    """What the code tries, for the hack monitor (code_signatures.py): an audit hook (PEP 578; code
    cannot remove one) notes opened paths outside Python's install, directory listings, /proc fd
    writes, tracers and signals; snapshots of builtins and math show what the code patched. Returns
    a function giving the notes (a list of "kind:detail" strings) after the code ran."""
    import builtins as _b
    import math as _m
    import os as _o
    roots = tuple(sorted({p for p in (_sys.prefix, _sys.base_prefix, _sys.exec_prefix, _sys.base_exec_prefix) if p}))
    given = ("/dev/null", "/dev/urandom", "/dev/random")
    notes = []
    path_dirs = {_o.path.abspath(p or ".") for p in _sys.path}

    def note(item):
        if len(notes) < 32 and item not in notes:
            notes.append(item)

    def hook(event, args):
        try:
            if event == "open" and args and not isinstance(args[0], int):
                path = _o.path.abspath(_o.fsdecode(args[0]))
                if path.startswith("/proc/") and "/fd/" in path:
                    note("channel:" + path)
                elif not path.startswith(roots) and path not in given:
                    note("read:" + path)
            elif event in ("os.listdir", "os.scandir") and args:
                path = _o.path.abspath(_o.fsdecode(args[0] if args[0] is not None else "."))
                if not path.startswith(roots) and path not in path_dirs:
                    note("read:" + path)
            elif event in ("sys.settrace", "sys.setprofile"):
                note("tamper:" + event)
            elif event in ("os.kill", "os.killpg"):
                note("tamper:" + event)
        except Exception:
            pass

    _sys.addaudithook(hook)
    before = {name: (mod, dict(vars(mod))) for name, mod in (("builtins", _b), ("math", _m))}

    def seen(ns):
        for name, (mod, old) in before.items():
            now = vars(mod)
            for key in set(old) | set(now):
                if now.get(key, None) is not old.get(key, None):
                    note("tamper:" + name + "." + key)
        for key in ("check", "candidate", "METADATA"):
            if key in ns:
                note("tamper:defines " + key)
        return list(notes)
    return seen


def _rlvr_serve():
    cfg = _json.loads(_sys.stdin.readline())
    _sys.stdin.close()
    requests, replies = 3, 4

    def describe(error):
        return (type(error).__name__ + ": " + str(error))[:300]

    ns = {"__name__": "solution", "__builtins__": __builtins__}
    seen = _rlvr_watch()
    try:
        code = compile(cfg["prefix"] + cfg["code"], "solution.py", "exec")
    except BaseException as error:
        try:  # a whole function after a bare-signature prefix: the code alone
            code = compile(cfg["code"], "solution.py", "exec")
        except BaseException:
            wire_send(replies, ["syntax", describe(error)])
            return
    try:
        exec(code, ns)
    except BaseException as error:
        wire_send(replies, ["crash", describe(error)])
        return
    wire_send(replies, ["ready", seen(ns)])
    while True:
        try:
            _kind, name, args, kwargs = wire_recv(requests)
        except EOFError:
            return
        try:
            result = ns[name](*wire_decode(args), **wire_decode(kwargs))
        except BaseException as error:
            wire_send(replies, ["raise", type(error).__name__, str(error)[:300]])
            continue
        try:
            wire_send(replies, ["ok", wire_encode(result)])
        except WireError as error:
            wire_send(replies, ["bad", str(error)])


_rlvr_serve()
'''

CHECKER = _WIRE + r'''
import sys as _sys
import builtins as _builtins


class CandidateGone(BaseException):
    """The candidate's process ended, or spoke out of protocol: no test may catch this."""


class CandidateError(Exception):
    """The candidate raised an exception that is not a built-in one."""


def _rlvr_check():
    cfg = _json.loads(_sys.stdin.read())
    verdict, requests, replies = 5, 4, 3

    def report(tag, i=None, text=None):
        line = {"tag": tag, **({} if i is None else {"i": i}), **({} if text is None else {"text": text})}
        data = (_json.dumps(line) + "\n").encode()
        while data:
            data = data[_os.write(verdict, data):]

    def describe(error):
        return (type(error).__name__ + ": " + str(error))[:300]

    def receive():
        try:
            return wire_recv(replies)
        except EOFError:
            raise CandidateGone("the program's process ended") from None
        except WireError as error:
            raise CandidateGone("the program broke the protocol: " + str(error)) from None

    def proxy(name):
        def candidate(*args, **kwargs):
            try:
                request = ["call", name, wire_encode(args), wire_encode(kwargs)]
            except WireError as error:
                raise TypeError("the tests passed a value that cannot cross to the candidate: " + str(error)) from None
            try:
                wire_send(requests, request)
            except OSError:
                raise CandidateGone("the program's process ended") from None
            reply = receive()
            kind = reply[0] if type(reply) is list and reply and type(reply[0]) is str else None
            if kind == "ok" and len(reply) == 2:
                try:
                    return wire_decode(reply[1])
                except WireError as error:
                    raise CandidateGone("the program sent " + str(error)) from None
            if kind == "raise" and len(reply) == 3:
                exc_name, message = str(reply[1])[:100], str(reply[2])[:300]
                exc_type = getattr(_builtins, exc_name, None)
                if isinstance(exc_type, type) and issubclass(exc_type, Exception):
                    try:
                        error = exc_type(message)
                    except BaseException:
                        error = CandidateError(exc_name + ": " + message)
                else:
                    error = CandidateError(exc_name + ": " + message)
                raise error
            if kind == "bad" and len(reply) == 2:
                raise TypeError("the candidate returned a value that is not plain data (" + str(reply[1])[:200] + ")")
            raise CandidateGone("the program broke the protocol: unexpected reply")
        candidate.__name__ = name
        return candidate

    try:
        hello = receive()
    except CandidateGone as error:
        report("CRASH", text="before its code was loaded: " + str(error))
        report("DONE")
        return
    tag = hello[0] if type(hello) is list and hello else None
    if tag in ("syntax", "crash") and len(hello) == 2:
        report("SYNTAX" if tag == "syntax" else "CRASH", text=str(hello[1])[:300])
        report("DONE")
        return
    if tag != "ready":
        report("CRASH", text="the program broke the protocol before its code was loaded")
        report("DONE")
        return
    if len(hello) == 2 and type(hello[1]) is list:
        report("OBSERVED", text=_json.dumps([str(x)[:300] for x in hello[1][:32]]))
    if cfg["kind"] == "assert":
        ns = {"__name__": "tests"}
        try:  # the prompt's helpers (HumanEval's `poly`, imports) for the tests; the record's text, not the model's
            exec(compile(cfg["prefix"], "prompt.py", "exec"), ns)
        except BaseException:
            ns = {"__name__": "tests"}
        candidate = ns[cfg["entry_point"]] = proxy(cfg["entry_point"])
        try:
            exec(compile(cfg["test"], "tests.py", "exec"), ns)
            check = ns["check"]
        except BaseException as error:
            report("ERROR", 0, describe(error))
            report("DONE")
            return
        try:
            check(candidate)
        except AssertionError as error:
            report("FAIL", 0, describe(error))
        except BaseException as error:
            report("ERROR", 0, describe(error))
        else:
            report("PASS", 0)
    else:
        fn = proxy(cfg["fn"])
        for i, case in enumerate(cfg["cases"]):
            try:
                text = _json.dumps(fn(*case.get("args", []), **case.get("kwargs", {})))
            except BaseException as error:
                report("ERROR", i, describe(error))
                continue
            report("RESULT", i, text)
    report("DONE")


_rlvr_check()
'''


@dataclass
class Report:
    """What the checker said on its verdict channel."""

    done: bool = False
    syntax_error: str | None = None
    crash: str | None = None
    outcomes: dict[int, tuple[str, str]] = field(default_factory=dict)  # test index -> (TAG, payload)
    observed: list[str] = field(default_factory=list)  # the candidate harness's notes ("kind:detail"), see _rlvr_watch


def candidate_input(code: str, tests: dict[str, Any]) -> str:
    """The candidate process's stdin: its own code, nothing of the tests."""
    return json.dumps({"code": code, "prefix": tests.get("prefix", "")}) + "\n"


def checker_input(tests: dict[str, Any]) -> str:
    """The checker's stdin: the tests. `call` cases go without their expected values (compared on the host)."""
    cfg: dict[str, Any] = {"kind": tests["kind"], "prefix": tests.get("prefix", "")}
    if tests["kind"] == "assert":
        cfg.update(test=tests["code"], entry_point=tests["entry_point"])
    else:
        cfg.update(fn=tests["fn"], cases=[{k: c[k] for k in ("args", "kwargs") if k in c} for c in tests["cases"]])
    return json.dumps(cfg)


def parse_report(verdict: str) -> Report:
    """Read the checker's verdict lines (JSON objects); anything else is ignored."""
    report = Report()
    for line in verdict.split("\n"):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        tag, i, text = item.get("tag"), item.get("i"), str(item.get("text", ""))
        if tag == "DONE":
            report.done = True
        elif tag == "SYNTAX":
            report.syntax_error = text
        elif tag == "CRASH":
            report.crash = text
        elif tag == "OBSERVED" and not report.observed:
            try:
                notes = json.loads(text)
            except ValueError:
                notes = []
            report.observed = [str(n) for n in notes] if isinstance(notes, list) else []
        elif tag in ("PASS", "FAIL", "ERROR", "RESULT") and type(i) is int and i >= 0:
            report.outcomes.setdefault(i, (tag, text))
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
