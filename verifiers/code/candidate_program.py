"""The candidate's process of an `assert` or `call` test (harness.py's module docstring says what it may do):
exec the program's code, then answer the checker's calls on fd 3 -> fd 4 until the end of notes.

Standard library only, shipped as text: harness.py sends wire.py's source, then the constant _RLVR_MONITOR
(monitor.py's source), then this file's, as one program run as `python3 -I -B main.py`. So the names below that
are not defined here (_json, _os, MAX_MESSAGE, WireError, wire_recv, wire_encode, wire_decode) are wire.py's, and
this file must never start with a `from __future__` import (it is not the program's first line). Importing it on
the host runs nothing: the process starts at the `__main__` guard at the end."""
# ruff: noqa: F821 - the undefined names are wire.py's and _RLVR_MONITOR, which precede this text in the program

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


if __name__ == "__main__":
    _rlvr_serve()
