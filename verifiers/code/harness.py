"""The programs the code verifier runs in the sandbox, and how their verdicts are read on the host.

`stdio` tests run the extracted code itself, once per case, and compare its stdout on the host:
nothing about the expected output ever enters the sandbox. `assert` and `call` tests run two
processes under two users (sandboxes/agent.py): CANDIDATE, the model's code, and CHECKER, the
tests. The candidate process execs prefix + code and then only answers calls: a call request
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
without solving the task. So the checker rewrites each `assert` of the tests (_rlvr_guard) to note
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

_WIRE = files("rlvr.verifiers.code").joinpath("wire.py").read_text()
_FORECAST = files("rlvr.verifiers.code").joinpath("forecast.py").read_text()
_MONITOR = files("rlvr.verifiers.code").joinpath("monitor.py").read_text()

CANDIDATE = _WIRE + "\n_RLVR_MONITOR = " + repr(_MONITOR) + "\n" + r'''
import sys as _sys


def _rlvr_private():
    """(_rlvr_sender, _rlvr_watch) from monitor.py, run in a namespace of their own with a copy of builtins taken
    now, before the program's code runs (monitor.py's docstring says why)."""
    import builtins
    ns = {"__builtins__": dict(vars(builtins)), "__name__": "_rlvr_monitor", "_json": _json, "_os": _os,
          "_sys": _sys, "MAX_MESSAGE": MAX_MESSAGE, "WireError": WireError}
    exec(compile(_RLVR_MONITOR, "monitor.py", "exec"), ns)
    return ns["_rlvr_sender"], ns["_rlvr_watch"]


def _rlvr_raised(error):
    """[type name, message, names of the built-in classes of its MRO]: what the checker picks its exception from."""
    try:
        message = str(error)[:300]
    except BaseException:
        message = ""
    bases = [k.__name__ for k in type(error).__mro__ if k.__module__ == "builtins"][:20]
    return [type(error).__name__[:100], message, bases]


def _rlvr_processor():
    """platform's cached processor set before the hook, as `uname -p` gives it on Debian (its "unknown" is '' in
    platform), so no library's platform.uname()[i] starts a program. Only for code that names pandas: importing
    platform costs about 2 ms, which the other runs are spared."""
    import platform
    vars(platform.uname()).setdefault("processor", "")


def _rlvr_serve():
    cfg = _json.loads(_sys.stdin.readline())
    _sys.stdin.close()
    requests, replies = 3, 4
    sender, watch = _rlvr_private()
    send = sender(replies)

    def describe(error):
        return (type(error).__name__ + ": " + str(error))[:300]

    ns = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        code = compile(cfg["prefix"] + cfg["code"], "solution.py", "exec")
    except BaseException as error:
        try:  # a whole function after a bare-signature prefix: the code alone
            code = compile(cfg["code"], "solution.py", "exec")
        except BaseException:
            send(["syntax", describe(error)])
            return
    if "pandas" in cfg["code"]:  # Debian's pandas reads platform.uname()[4] on import, which runs `uname -p`:
        _rlvr_processor()  # a program started, noted as read_files, for every honest `import pandas`
    # watched from here: compiling runs none of the program's code, but a SyntaxError makes CPython open
    # "solution.py" for the line's text, which the hook would note as the program reading a file
    seen = watch(send)
    try:
        exec(code, ns)
    except BaseException as error:
        send(["crash", describe(error)])
        return
    seen(ns)
    send(["ready"])
    while True:
        try:
            request = wire_recv(requests)
        except EOFError:
            return
        if request == ["end"]:  # the checker's last request: builtins and math once more, then the marker
            seen(ns)
            send(["end"])
            return
        _kind, name, args, kwargs = request
        if "pandas" not in _sys.modules and '"P"' in _json.dumps(request):  # a pandas argument: decoding imports
            _rlvr_processor()  # pandas, which would run `uname -p` (as above)
        try:
            result = ns[name](*wire_decode(args), **wire_decode(kwargs))
        except BaseException as error:
            send(["raise", *_rlvr_raised(error)])
            continue
        try:
            send(["ok", wire_encode(result)])
        except Exception as error:  # WireError, or a value whose own parts raise when read
            send(["bad", str(error) if type(error) is WireError else describe(error)])


_rlvr_serve()
'''

CHECKER = _WIRE + _FORECAST + r'''
import sys as _sys


def _rlvr_site():
    """The interpreter's own packages (numpy, scipy, pandas where installed) for the tests: the checker is forked
    from the supervisor's `python3 -I -S`, whose path has the standard library only. Appended, so the standard
    library comes first; no .pth file is run. One BLAS thread: the checker may start no process or thread."""
    import site
    for key in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        _os.environ.setdefault(key, "1")
    for path in site.getsitepackages():
        if path not in _sys.path and _os.path.isdir(path):
            _sys.path.append(path)


_rlvr_site()


class CandidateGone(BaseException):
    """The candidate's process ended, or spoke out of protocol: no test may catch this."""


class CandidateError(Exception):
    """The candidate raised an exception that may not cross as itself (not in CROSSING_EXCEPTIONS)."""


def _rlvr_guard(source):
    """The test code compiled with each `assert TEST, MESSAGE` statement rewritten to

        try: _rlvr_outcome = True if TEST else False
        except Exception as _rlvr_error: _rlvr_outcome = _rlvr_error
        try: _rlvr_message = MESSAGE                 # None when the assert has no message
        except Exception as _rlvr_error: _rlvr_message = None
        _rlvr_assertion(LINE, _rlvr_outcome, _rlvr_message)

    so that an assert that does not hold is noted and the test goes on (see the module docstring).
    Built with the compiler's own AST (`_ast`, no `ast` import: a run pays about 0.1 ms for it)."""
    import _ast as A
    tree = compile(source, "tests.py", "exec", A.PyCF_ONLY_AST)
    _rlvr_guard_statements(tree, A)
    return compile(tree, "tests.py", "exec")


def _rlvr_guard_statements(node, A):
    """Rewrite every assert in the statement lists under `node` (asserts are statements: only those lists hold one)."""
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is not list or not value or not isinstance(value[0], (A.stmt, A.excepthandler, A.match_case)):
            continue
        out = []
        for item in value:
            if type(item) is A.Assert:
                out.extend(_rlvr_guarded(item, A))
            else:
                _rlvr_guard_statements(item, A)
                out.append(item)
        setattr(node, name, out)


def _rlvr_guarded(node, A):
    """The statements that replace one assert, placed at its line."""
    at = {"lineno": node.lineno, "col_offset": node.col_offset,
          "end_lineno": node.end_lineno, "end_col_offset": node.end_col_offset}

    def name(ident, store=False):
        return A.Name(id=ident, ctx=A.Store() if store else A.Load(), **at)

    def constant(value):
        return A.Constant(value=value, **at)

    def caught(target, value, fallback):
        assign = A.Assign(targets=[name(target, True)], value=value, **at)
        handler = A.ExceptHandler(type=name("Exception"), name="_rlvr_error",
                                  body=[A.Assign(targets=[name(target, True)], value=fallback, **at)], **at)
        return A.Try(body=[assign], handlers=[handler], orelse=[], finalbody=[], **at)

    held = A.IfExp(test=_rlvr_eager(node.test, A), body=constant(True), orelse=constant(False), **at)
    message = _rlvr_eager(node.msg, A) if node.msg is not None else constant(None)
    note = A.Call(func=name("_rlvr_assertion"), args=[constant(node.lineno), name("_rlvr_outcome"), name("_rlvr_message")],
                  keywords=[], **at)
    return [caught("_rlvr_outcome", held, name("_rlvr_error")), caught("_rlvr_message", message, constant(None)),
            A.Expr(value=note, **at)]


def _rlvr_eager(node, A):
    """`node` (an assert's expression) with every `and`/`or` and every chained comparison (`a < b < c`) made eager:
    each operand becomes a thunk that _rlvr_boolop / _rlvr_chain all call, in order, before deciding, and then
    decide as the short-circuit would have (the first falsy/truthy operand's value, an operand's exception only
    where the short-circuit would have reached it). So whether the candidate is called for a later operand never
    depends on its earlier answers: `assert f(1) == a and f(2) == b` cannot tell a second call that the first answer
    held (a red-team test oracle). Left as written: an operand holding `:=` (a thunk would scope its name)."""
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, A.AST):
            setattr(node, field, _rlvr_eager(value, A))
        elif type(value) is list:
            setattr(node, field, [_rlvr_eager(v, A) if isinstance(v, A.AST) else v for v in value])
    if type(node) not in (A.BoolOp, A.Compare) or (type(node) is A.Compare and len(node.ops) < 2):
        return node
    for inner in _rlvr_walk(node, A):
        if type(inner) in (A.NamedExpr, A.Yield, A.YieldFrom, A.Await):
            return node
    at = {"lineno": node.lineno, "col_offset": node.col_offset,
          "end_lineno": node.end_lineno, "end_col_offset": node.end_col_offset}
    no_args = A.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])

    def thunks(values):
        return A.List(elts=[A.Lambda(args=no_args, body=v, **at) for v in values], ctx=A.Load(), **at)

    if type(node) is A.BoolOp:
        func, args = "_rlvr_boolop", [A.Constant(value=type(node.op) is A.And, **at), thunks(node.values)]
    else:
        ops = A.List(elts=[A.Constant(value=type(op).__name__, **at) for op in node.ops], ctx=A.Load(), **at)
        func, args = "_rlvr_chain", [ops, thunks([node.left, *node.comparators])]
    return A.Call(func=A.Name(id=func, ctx=A.Load(), **at), args=args, keywords=[], **at)


def _rlvr_walk(node, A):
    yield node
    for field in node._fields:
        value = getattr(node, field, None)
        for item in value if type(value) is list else [value]:
            if isinstance(item, A.AST):
                yield from _rlvr_walk(item, A)


def _rlvr_evaluated(thunks):
    """Every thunk called, in order: (True, value) or (False, exception) each."""
    out = []
    for thunk in thunks:
        try:
            out.append((True, thunk()))
        except Exception as error:
            out.append((False, error))
    return out


def _rlvr_boolop(is_and, thunks):
    """`v1 and v2 ...` (or `or`) after every operand ran: what the short-circuit gives, its exception included."""
    value = None
    for ok, value in _rlvr_evaluated(thunks):
        if not ok:
            raise value
        if (not value) if is_and else value:
            return value
    return value


def _rlvr_chain(ops, thunks):
    """`a OP1 b OP2 c ...` after every operand ran, compared left to right as Python does (stop at the first false)."""
    import operator
    compare = {"Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
               "GtE": operator.ge, "Is": operator.is_, "IsNot": operator.is_not,
               "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b}
    values = _rlvr_evaluated(thunks)
    result = True
    for i, op in enumerate(ops):
        for ok, value in values[i:i + 2]:
            if not ok:
                raise value
        result = compare[op](values[i][1], values[i + 1][1])
        if not result:
            return result
    return result


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

    observed, gone, kept = [], [], {}

    def observe(notes):
        """The harness's notes, on the verdict channel as they come (a run killed later keeps them): at most 16 of
        each kind (every prefix the harness does not use counts as one kind), so notes the program forges cannot
        crowd out a kind not seen yet."""
        fresh = []
        for item in notes[:64]:
            text = str(item)[:300]
            kind = text.split(":", 1)[0]
            kind = kind if kind in ("read", "channel", "memory", "ctypes", "tamper") else "?"
            if text not in observed and kept.get(kind, 0) < 16:
                kept[kind] = kept.get(kind, 0) + 1
                observed.append(text)
                fresh.append(text)
        if fresh:
            report("OBSERVED", text=_json.dumps(fresh))

    def lost(text):
        gone.append(text)
        return CandidateGone(text)

    def receive():
        """The candidate's next reply; its notes, which may come before any reply, are observed on the way."""
        while True:
            try:
                message = wire_recv(replies)
            except EOFError:
                raise lost("the program's process ended") from None
            except WireError as error:
                raise lost("the program broke the protocol: " + str(error)) from None
            if type(message) is list and len(message) == 2 and message[0] == "notes" and type(message[1]) is list:
                observe(message[1])
                continue
            return message

    def end_of_notes():
        """The candidate's last notes and its end marker, while it still answers; notes only add flags, and
        a marker that does not come (the program ended, or answered something else) is itself a note."""
        if gone:
            return
        try:
            wire_send(requests, ["end"])
            ended = receive() == ["end"]
        except (OSError, CandidateGone):
            ended = False
        if not ended:
            observe(["tamper:no end of notes"])

    def ask(name, request):
        """One live call of `name`, request = [args, kwargs] wire-encoded: the candidate's reply."""
        if gone:
            raise CandidateGone(gone[0])
        try:
            wire_send(requests, ["call", name, *request])
        except OSError:
            raise lost("the program's process ended") from None
        return receive()

    def answer(reply):
        """What the tests' call gives: the reply's value, freshly decoded, or its exception raised."""
        kind = reply[0] if type(reply) is list and reply and type(reply[0]) is str else None
        if kind == "ok" and len(reply) == 2:
            try:
                return wire_decode(reply[1])
            except WireError as error:
                raise lost("the program sent " + str(error)) from None
        if kind == "raise" and len(reply) in (3, 4):
            exc_name, message = str(reply[1])[:100], str(reply[2])[:300]
            bases = reply[3][:20] if len(reply) == 4 and type(reply[3]) is list else []
            error = wire_exception([exc_name, *bases], message)
            raise error if error is not None else CandidateError(exc_name + ": " + message)
        if kind == "bad" and len(reply) == 2 and str(reply[1]).startswith("message of "):  # honest, only too big
            raise ValueError("the candidate's return value is too large to carry (" + str(reply[1])[:200] + ")")
        if kind == "bad" and len(reply) == 2 and str(reply[1]).startswith("unsupported value"):  # honest, no hack
            raise TypeError("the candidate returned a value the wire cannot carry (" + str(reply[1])[:200] + ")")
        if kind == "bad" and len(reply) == 2:
            raise TypeError("the candidate returned a value that is not plain data (" + str(reply[1])[:200] + ")")
        raise lost("the program broke the protocol: unexpected reply")

    def proxy(name, table=None):
        """The candidate as the tests call it. `table` (request text -> the replies to the calls made before the
        test ran, forecast.py) answers a call it holds, each reply once; any other call is made live."""
        def candidate(*args, **kwargs):
            try:
                request = [wire_encode(args), wire_encode(kwargs)]
            except WireError as error:
                raise TypeError("the tests passed a value that cannot cross to the candidate: " + str(error)) from None
            replies = table.get(_json.dumps(request)) if table else None
            return answer(replies.pop(0) if replies else ask(name, request))
        candidate.__name__ = name
        return candidate

    def prefetch(name, calls):
        """Every foreseen call made, in order, before the test runs: the table `proxy` answers from."""
        table = {}
        for request in calls:
            try:
                reply = ask(name, request)
            except CandidateGone:  # the rest, if the test needs them, end the same way when made live
                break
            table.setdefault(_json.dumps(request), []).append(reply)
        return table

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
    if cfg["kind"] == "assert":
        _rlvr_run_asserts(cfg, proxy, prefetch, report, describe)
    else:
        fn = proxy(cfg["fn"])
        for i, case in enumerate(cfg["cases"]):  # every case is called: the host compares afterwards
            try:
                text = _json.dumps(wire_encode(fn(*wire_decode(case["args"]), **wire_decode(case["kwargs"]))))
            except BaseException as error:
                report("ERROR", i, describe(error))
                continue
            report("RESULT", i, text)
    end_of_notes()
    report("DONE")


def _rlvr_run_asserts(cfg, proxy, prefetch, report, describe):
    """`check(candidate)` with its asserts guarded (_rlvr_guard): every assert runs whatever the answers, and
    the verdict is the first one that did not hold (FAIL, or ERROR when evaluating it raised), else how
    `check` ended. The candidate's process ending (CandidateGone) is reported as itself. Before the test runs,
    the calls it will make are foreseen by a dry run and made (forecast.py), so what the candidate is asked
    does not depend on its answers; the test's calls are answered from those replies."""
    problems = []

    def assertion(line, outcome, message):
        if outcome is True:
            return
        if outcome is False:
            try:
                text = "line %d" % line if message is None else str(message)
            except Exception:
                text = "line %d" % line
            problems.append(("FAIL", ("AssertionError: " + text)[:300]))
        else:
            problems.append(("ERROR", describe(outcome)))

    def eager(reduce):
        def decide(iterable):  # every item first: no answer decides whether the next call happens
            return reduce(list(iterable))
        decide.__name__ = reduce.__name__
        return decide

    seed = _os.urandom(16)

    def namespace(noted):
        import random
        random.seed(seed)  # the same draws in the dry run and the real one: a random test's calls are foreseen too
        ns = {"__name__": "tests"}
        try:  # the prompt's helpers (HumanEval's `poly`, imports) for the tests; the record's text, not the model's
            exec(compile(cfg["prefix"], "prompt.py", "exec"), ns)
        except BaseException:
            ns = {"__name__": "tests"}
        ns.update({"all": eager(all), "any": eager(any), "_rlvr_assertion": noted, "_rlvr_boolop": _rlvr_boolop,
                   "_rlvr_chain": _rlvr_chain})
        return ns

    name = cfg["entry_point"]
    try:
        code = _rlvr_guard(cfg["test"])
    except BaseException as error:
        report("ERROR", 0, describe(error))
        return
    table = prefetch(name, rlvr_forecast(code, namespace(lambda *outcome: None), name, wire_encode))
    candidate = proxy(name, table)
    ns = namespace(assertion)
    ns[name] = candidate
    try:
        exec(code, ns)
        check = ns["check"]
    except BaseException as error:
        report("ERROR", 0, describe(error))
        return
    try:
        check(candidate)
    except CandidateGone as error:
        problems.insert(0, ("ERROR", describe(error)))
    except AssertionError as error:
        problems.append(("FAIL", describe(error)))
    except BaseException as error:
        problems.append(("ERROR", describe(error)))
    if problems:
        report(problems[0][0], 0, problems[0][1])
    else:
        report("PASS", 0)


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
    _rlvr_check's observe: every prefix the harness does not use counts as one kind, so forged notes cannot crowd
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
