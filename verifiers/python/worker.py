"""The worker side of `verifier=python` (verifiers/python/verifier.py): a reward function found by its
"module:function" path and called the way TRL's `GRPOTrainer` calls `reward_funcs`, in a `TimeLimitPool`
worker process (verifiers/pool.py), which the parent kills when a call overruns.

Only the standard library is imported here; the user's module is imported on a worker's first call and kept.
What comes back is plain data: `{"values": [float | None, ...], "bad": {index: "one line"}}` or
`{"problem": "one line", "raised": bool}`, so the parent can say what went wrong in the user's terms (the function
raised, returned the wrong number of values, takes a column the data does not have) instead of an exception's repr.
A value that is not a number is a problem of its own completion (in `bad`, its slot None), not of the call.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# what TRL passes besides the columns, which rlvr has no value for (rlvr's rewards score text, outside a TRL run)
NOT_PASSED = ("completion_ids", "trainer_state", "log_extra", "log_metric", "environments")
_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def load(path: str) -> Callable[..., Any]:
    """The function at "module:function" (a dotted attribute path after the colon is followed); LookupError
    saying what is missing."""
    if path in _FUNCTIONS:
        return _FUNCTIONS[path]
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.split(".")[0] == error.name.split(".")[0]:
            raise LookupError(f"cannot import module {module_name!r} ({error}); it must be importable from the "
                              f"working directory ({os.getcwd()}) or PYTHONPATH") from None
        raise LookupError(f"importing module {module_name!r} failed: {_one_line(error)}{_where(error)}") from None
    except BaseException as error:  # noqa: BLE001 - the user's module failed as it ran; say where
        raise LookupError(f"importing module {module_name!r} failed: {_one_line(error)}{_where(error)}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                             and getattr(v, "__module__", None) == module.__name__)
            raise LookupError(f"module {module_name!r} has no attribute {attribute!r} (its functions: "
                              f"{', '.join(defined) or 'none'})")
        target = getattr(target, part)
    if not callable(target):
        raise LookupError(f"{path} is a {type(target).__name__}, not a function")
    _FUNCTIONS[path] = target
    return target


def check(path: str) -> str | None:
    """Why `path` cannot serve as a reward function (one line), or None when it can."""
    try:
        fn = load(path)
    except LookupError as error:
        return str(error)
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature: found out on the first call
        return None
    keywords = any(p.kind is p.VAR_KEYWORD for p in parameters)
    named = {p.name: p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if "completions" not in named and not keywords:
        return "it takes no `completions` argument; a reward function is fn(prompts, completions, **columns)"
    for name in NOT_PASSED:
        if name in named and named[name].default is inspect.Parameter.empty:
            return (f"it requires `{name}`, which rlvr does not pass (its rewards score the completion text); "
                    f"give it a default (`{name}=None`)")
    return None


def call(path: str, prompts: list, completions: list, columns: Mapping[str, list]) -> dict:
    """`fn(prompts=..., completions=..., **columns)` (awaited when the function is async, as TRL does) and its
    values checked: one number or None per completion. A function without `**kwargs` gets only the columns it
    names."""
    try:
        fn = load(path)
    except LookupError as error:
        return {"problem": f"could not be loaded: {error}"}
    kwargs = {"prompts": prompts, "completions": completions, **columns}
    problem = _bind(fn, kwargs, columns)
    if problem:
        return {"problem": problem}
    try:
        out = fn(**kwargs)
        if inspect.isawaitable(out):
            out = asyncio.run(out)
    except BaseException as error:  # noqa: BLE001 - the user's code; the parent re-scores the call's completions
        return {"problem": f"raised {_one_line(error)}{_where(error)}", "raised": True}
    return _values(out, len(completions))


def _bind(fn: Callable[..., Any], kwargs: dict, columns: Mapping[str, list]) -> str | None:
    """Drop the keywords a function without `**kwargs` does not take; a parameter without a default that
    nothing fills is named (it is usually a column the data lacks)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        for key in [k for k in kwargs if k not in parameters]:
            del kwargs[key]
    for name, p in parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not inspect.Parameter.empty:
            continue
        if name not in kwargs:
            return (f"takes a parameter {name!r} that is not a column of the data (columns: "
                    f"{', '.join(columns) or 'none'}); add the column, or give the parameter a default")
    return None


def _values(out: Any, n: int) -> dict:
    if isinstance(out, (str, bytes, Mapping)) or not isinstance(out, Sequence) and not hasattr(out, "__len__"):
        return {"problem": f"returned {type(out).__name__}, not a list of {n} numbers (one per completion)"}
    try:
        items = list(out)
    except TypeError:
        return {"problem": f"returned {type(out).__name__}, not a list of {n} numbers (one per completion)"}
    if len(items) != n:
        return {"problem": f"returned {len(items)} value{'' if len(items) == 1 else 's'} for {n} completions; "
                           f"a reward function returns one number (or None) per completion"}
    values: list[float | None] = []
    bad: dict[int, str] = {}
    for i, item in enumerate(items):
        value = None
        if isinstance(item, (str, bytes)):
            bad[i] = f"value {i} is {item!r:.40}, not a number (or None)"
        elif item is not None:
            try:
                value = float(item)  # int, bool, numpy and torch scalars
            except (TypeError, ValueError):
                bad[i] = f"value {i} is {type(item).__name__} {item!r:.40}, not a number (or None)"
            else:
                if math.isnan(value):  # TRL turns None into NaN; both mean "does not apply"
                    value = None
                elif math.isinf(value):
                    value, bad[i] = None, f"value {i} is {value}, not a finite number"
        values.append(value)
    return {"values": values, "bad": bad}


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _where(error: BaseException) -> str:
    """` (at FILE:LINE in NAME)`: the innermost frame of the traceback outside this file and importlib."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f.filename != __file__ and not f.filename.startswith("<frozen")]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
