"""The programs the code verifier runs in the sandbox, and how their verdicts are read on the host.

`stdio` tests run the extracted code itself, once per case, and compare its stdout on the host:
nothing about the expected output ever enters the sandbox. `assert` and `call` tests run two
processes under two users (sandboxes/agent/supervisor.py): CANDIDATE, the model's code, and CHECKER, the
tests (their code: candidate_program.py and checker_program.py, shipped as text after wire.py's). The candidate process execs prefix + code and then only answers calls: a call request
(function name, arguments) arrives on its fd 3, the return value (or the exception's type name,
message and built-in bases) goes back on its fd 4, both through the strict serialiser of
wire.py. The checker holds the tests, which reach it on its own stdin; `check(candidate)`
(assert) or `fn(*args)` per case (call) runs there with `candidate` a proxy that sends each call
across, so what comes back is a fresh value of a standard type the checker builds itself (a Counter
or a named tuple too): an object that claims to equal everything, a proxy type or an int subclass
cannot cross, and patching `builtins`, `math.isclose` or the tracer in
the candidate's process changes nothing in the checker's. No test source, expected value or
verdict ever exists in the candidate's memory; the verdict lines go from the checker's fd 5 to
the supervisor, an fd the candidate never holds, so nothing the candidate prints or writes can
count (there is no nonce to steal). The final `DONE` line is required: a checker that did not
finish has no verdict.

The hack monitor's notes share the candidate's fd 4 (monitor.py): an audit hook sends each note as a
["notes", [...]] message the moment it is made, at load or inside any call, and the checker, which skips
them while it waits for a reply, puts them on its verdict channel as OBSERVED lines straight away. When
the tests are done the checker asks for the end of notes (["end"]): the candidate compares builtins and
math once more and answers ["end"]; no answer while the candidate was still serving is itself a note. Notes
only add hack flags (signatures.py) and never touch the verdict, so a candidate that forges, floods
or suppresses them gains nothing: the monitor is evidence, not a verdict. The checker keeps at most 16 notes of
each kind, and the candidate's sender checks its descriptor at each send (monitor.py's _rlvr_sender).

The order of the calls tells the candidate nothing about its answers: were the checker
to stop at the first failing assert, "was I called again" would say whether the last answer passed,
and with any channel that outlives a run the samples of one prompt would learn the expected values
without solving the task. So the checker rewrites each `assert` of the tests (checker_program._rlvr_guard) to note
its outcome and go on, evaluates an assert's message whether it held or not (HumanEval/77's
messages call the candidate again), makes the tests' `all` and `any` consume their whole iterable
before deciding, and gives the verdict of the first assert that did not hold once `check` returns.
`call` cases are all called before anything is compared, on the host. What still ends a test early: an exception
outside an assert (a candidate's raise in a plain statement, which the candidate chose), a test that raises on
its own, and the test's own control flow outside asserts (an `if` on an answer, an explicit `raise
AssertionError`); so before an `assert` test runs, its calls are foreseen by a dry run whose stand-in answers
agree with every check, and made, in order (forecast.py): the test's calls are answered from those replies, and
only a call the dry run did not foresee is made live. Inside an assert, `and`, `or` and chained comparisons are
made eager (_rlvr_eager): every operand runs before the short-circuit's result is taken, since a red-team oracle
used `assert f(11) == True and f(12) == False ...` with a counter that outlives a warm container's run. A test
whose assert guarded a loop's end (assert i < 100 inside a search) now runs that loop to the time limit:
timeout, reward 0.

What the candidate still controls: its own answers, and whether it raises: the checker raises the
first of the exception's type and its built-in bases that the wire lets cross (wire.py's
CROSSING_EXCEPTIONS: ordinary errors such as ValueError, never StopIteration or SystemExit), else
CandidateError. Arguments are copies: a test that relies on the candidate mutating an argument in
place does not see the mutation (none of HumanEval's does).

On the host a `call` result and `stdio` output are compared with the expected values by compare.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from rlvr.verifiers.code.wire import WireError, wire_decode, wire_encode

_CODE = files("rlvr.verifiers.code")
_WIRE = _CODE.joinpath("wire.py").read_text()
_FORECAST = _CODE.joinpath("forecast.py").read_text()
_MONITOR = _CODE.joinpath("monitor.py").read_text()

# The two programs, each one text: their own files (candidate_program.py, checker_program.py) after the
# standard-library modules they use, so a linter, the tests and coverage see real files. monitor.py goes in as
# a string constant because the candidate execs it in a namespace of its own (candidate_program._rlvr_private).
CANDIDATE = _WIRE + "\n_RLVR_MONITOR = " + repr(_MONITOR) + "\n" + _CODE.joinpath("candidate_program.py").read_text()
CHECKER = _WIRE + _FORECAST + _CODE.joinpath("checker_program.py").read_text()


@dataclass
class Report:
    """What the checker said on its verdict channel."""

    done: bool = False
    syntax_error: str | None = None
    crash: str | None = None
    outcomes: dict[int, tuple[str, str]] = field(default_factory=dict)  # test index -> (TAG, payload)
    observed: list[str] = field(default_factory=list)  # the candidate harness's notes ("kind:detail"), see monitor.py's _rlvr_watch


def candidate_input(code: str, tests: dict[str, Any]) -> str:
    """The candidate process's stdin: its own code, nothing of the tests."""
    return json.dumps({"code": code, "prefix": tests.get("prefix", "")}) + "\n"


def checker_input(tests: dict[str, Any]) -> str:
    """The checker's stdin: the tests. `call` cases go without their expected values (compared on the host), their
    arguments wire-encoded (a tuple stays a tuple, an int of any size crosses); WireError for arguments that are
    not plain data."""
    cfg: dict[str, Any] = {"kind": tests["kind"], "prefix": tests.get("prefix", "")}
    if tests["kind"] == "assert":
        cfg.update(test=tests["code"], entry_point=tests["entry_point"])
    else:
        cfg.update(fn=tests["fn"], cases=[{"args": wire_encode(list(c.get("args", []))),
                                           "kwargs": wire_encode(dict(c.get("kwargs", {})))} for c in tests["cases"]])
    return json.dumps(cfg)


def read_result(payload: str) -> Any:
    """The value a `call` case returned, from the checker's RESULT text (wire-encoded JSON); WireError if it is not one."""
    try:
        node = json.loads(payload)
    except (ValueError, RecursionError):
        raise WireError("unreadable result") from None
    return wire_decode(node)


def _kept(observed: list[str], note: str) -> bool:
    """Whether a note joins those observed: a new one, with fewer than 16 of its kind there (the checker's cap,
    checker_program._rlvr_check's observe: every prefix the harness does not use counts as one kind, so forged notes cannot crowd
    out a kind not seen yet)."""
    known = ("read", "channel", "memory", "ctypes", "tamper")

    def kind(text: str) -> str:
        prefix = text.split(":", 1)[0]
        return prefix if prefix in known else "?"
    return note not in observed and sum(kind(o) == kind(note) for o in observed) < 16


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
        elif tag == "OBSERVED":  # one line per batch of notes, as they came
            try:
                notes = json.loads(text)
            except ValueError:
                notes = []
            for note in notes[:64] if isinstance(notes, list) else []:
                if _kept(report.observed, str(note)):
                    report.observed.append(str(note))
        elif tag in ("PASS", "FAIL", "ERROR", "RESULT") and type(i) is int and i >= 0:
            report.outcomes.setdefault(i, (tag, text))
    return report
