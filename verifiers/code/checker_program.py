"""The checker of an `assert` or `call` test (harness.py's module docstring says what it guarantees): it holds
the tests, calls the candidate through a proxy over fd 4 -> fd 3, and writes its verdict lines to fd 5.

Standard library only, shipped as text: harness.py sends wire.py's source, then forecast.py's, then this file's,
as the trusted checker program (base.Checker, run as __main__ under its own user). So the names below that are
not defined here (_json, _os, WireError, wire_recv, wire_send, wire_encode, wire_decode, wire_exception,
rlvr_forecast) are theirs, and this file must never start with a `from __future__` import. Importing it on the
host runs nothing (it neither reads stdin nor extends sys.path): the process starts at the `__main__` guard at
the end, which first puts the interpreter's site-packages on the path (_rlvr_site), as the first thing it does."""
# ruff: noqa: F821 - the undefined names are wire.py's and forecast.py's, which precede this text in the program

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


if __name__ == "__main__":
    _rlvr_site()
    _rlvr_check()
