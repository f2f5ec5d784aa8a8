"""A Python value written as a Hydra command-line override's value (`key=VALUE`), so that Hydra reads back the
same value: what `rlvr.train(...)`'s keywords and a translated TRL config (trl_keys.py) pass to the composer."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from rlvr.errors import ConfigError

_PLAIN = re.compile(r"^[A-Za-z_/.][\w./:@+-]*$")  # a string Hydra reads back as that string, unquoted
_KEYWORDS = ("true", "false", "null", "nan", "inf")


def override_value(value: Any) -> str:
    """`value` in Hydra's override grammar: a string as it is when Hydra reads it back unchanged, else quoted;
    lists and mappings as Hydra writes them; a function as its "module:function" path."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if _PLAIN.match(text) and text.lower() not in _KEYWORDS:  # as typed on a command line: data.jsonl, m:fn
            return text
        # Hydra's quoted string: a backslash escapes only backslashes and the quote that follow it
        return "'" + re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text).replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if callable(value):
        return override_value(function_path(value))
    raise TypeError(f"cannot pass {type(value).__name__} {value!r:.80} as a config value")


def function_path(fn: Callable | str) -> str:
    """"module:function" for a function the reward's worker processes can import by name."""
    if isinstance(fn, str):
        return fn
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not name or "<" in name:
        raise ConfigError(f"reward function {fn!r} cannot be imported by name (a lambda, a nested function or a "
                          f"callable object); define it at the top level of a module")
    if module == "__main__":
        raise ConfigError(f"reward function {name!r} is defined in __main__ (a notebook or the script that runs), "
                          f"which the reward's worker processes cannot import; move it into a module (my_rewards.py) "
                          f"and import it from there")
    return f"{module}:{name}"
