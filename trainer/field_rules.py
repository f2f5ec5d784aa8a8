"""A key's own rule, on its field: `field(default=1, metadata=rule(ge=1))`, checked by one walk, shown by --help.

A single-field rule is a range (`ge`, `gt`, `le`, `lt`) or a set of `choices` (for a list field: `each` item one of
them). It lives in the field's metadata, beside the key's type, default and docstring (trainer/config.py), and:

- `check_fields(cfg, RunConfig)` walks the resolved config against its schema and raises ConfigError naming the
  first key whose value breaks its rule (trainer/validate.py calls it first; what it keeps are the rules that span
  several keys);
- `rlvr train --help` and the configuration reference print `Rule.shows()` beside the key (rlvr/help.py).

A null value passes where the field's type is Optional (the docstring says what null means); elsewhere OmegaConf
has refused it already. Given a plain dataclass instead of a composed config, the walk also checks the scalar types
(bool, int, float, str) that OmegaConf would have enforced: `RewardConfig(rate=True)` is refused, naming the key.

The message is the one users saw when these checks were written out one by one in validate.py, e.g.
`train.steps=0 must be >= 1`, `optim.schedule='cos'; choose one of constant, linear, cosine`; `note` adds what a
special value means (`(0: off)`), and `message` keeps an older wording where it differs (`must be process or
thread`). Like pydantic's `Field(ge=...)` and attrs' validators, but declared as plain data in dataclasses' own
`metadata`, so Hydra's structured configs take the schema unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from rlvr.errors import ConfigError

KEY = "rule"  # the metadata key a Rule is stored under


@dataclass(frozen=True)
class Rule:
    """What one key accepts: bounds, or choices (each item of a list, with `each`)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] | None = None
    each: bool = False  # a list: every item one of `choices`
    note: str = ""  # said in parentheses after the rule, e.g. "0: off"
    message: str = ""  # a str.format template with {key} and {value}, for a wording tests and users rely on

    def __post_init__(self):
        bounded = any(b is not None for b in (self.ge, self.gt, self.le, self.lt))
        if bounded == (self.choices is not None) or (self.each and self.choices is None):
            raise ValueError(f"{self}: give bounds or choices (each: a list's choices), not both or neither")
        if (self.ge is not None and self.gt is not None) or (self.le is not None and self.lt is not None):
            raise ValueError(f"{self}: one lower and one upper bound at most")

    def bounds(self) -> str:
        """'>= 1', '> 0', 'in (0, 1]' ..."""
        low = ("[", self.ge) if self.ge is not None else ("(", self.gt) if self.gt is not None else None
        high = ("]", self.le) if self.le is not None else (")", self.lt) if self.lt is not None else None
        if low and high:
            return f"in {low[0]}{_number(low[1])}, {_number(high[1])}{high[0]}"
        if low:
            return f"{'>=' if low[0] == '[' else '>'} {_number(low[1])}"
        return f"{'<=' if high[0] == ']' else '<'} {_number(high[1])}"

    def shows(self, nullable: bool = False) -> str:
        """The rule as --help prints it: '(>= 1)', '(one of: constant, linear, cosine)', '(> 0, or null)'."""
        text = self.bounds() if self.choices is None else \
            f"{'each ' if self.each else ''}one of: {', '.join(self.choices)}"
        return f"({text}{', or null' if nullable else ''})"

    def check(self, key: str, value: Any) -> None:
        """ConfigError naming `key` when `value` breaks the rule."""
        note = f" ({self.note})" if self.note else ""
        if self.choices is not None:
            items = list(value) if self.each else [value]
            for item in items:
                if item not in self.choices:
                    if self.message:
                        raise ConfigError(self.message.format(key=key, value=value))
                    if self.each:
                        raise ConfigError(f"{key}={items}: unknown {key.rsplit('.', 1)[-1]} {item!r}; choose some of "
                                          f"{', '.join(self.choices)}{note}")
                    raise ConfigError(f"{key}={value!r}; choose one of {', '.join(self.choices)}{note}")
            return
        if not _is_number(value):
            raise ConfigError(f"{key}={value!r} must be a number {self.bounds()}{note}")
        ok = ((self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
              and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt))
        if not ok:
            raise ConfigError(self.message.format(key=key, value=value) if self.message
                              else f"{key}={value} must be {self.bounds()}{note}")


def rule(**kwargs) -> dict:
    """`field(metadata=rule(ge=1))`: the metadata that holds one Rule."""
    return {KEY: Rule(**{k: tuple(v) if k == "choices" else v for k, v in kwargs.items()})}


def rule_of(f) -> Rule | None:
    """A dataclass field's Rule, if it has one."""
    return f.metadata.get(KEY)


def is_optional(f) -> bool:
    """Whether the field's declared type admits null (`Optional[int]`, `int | None`; annotations are strings under
    `from __future__ import annotations`)."""
    kind = f.type if isinstance(f.type, str) else repr(f.type)
    return "Optional" in kind or "None" in kind or kind in ("Any", "typing.Any")


def check_fields(node: Any, schema: type, prefix: str = "") -> None:
    """Every field rule of dataclass `schema` (and of the dataclasses nested in it) against `node`, a composed
    DictConfig or an instance of `schema`; ConfigError naming the first key that breaks its own."""
    from omegaconf import DictConfig, OmegaConf

    composed = isinstance(node, DictConfig)
    if composed:  # `algo`: the chosen family's subclass of the declared schema
        kind = OmegaConf.get_type(node)
        schema = kind if is_dataclass(kind) and issubclass(kind, schema) else schema
    for f in fields(schema):
        key = prefix + f.name
        if composed and f.name not in node:
            continue
        child = f.default_factory if is_dataclass(f.default_factory) else None
        if child is not None:
            check_fields(node[f.name] if composed else getattr(node, f.name), child, key + ".")
            continue
        found = rule_of(f)
        if found is None and composed:
            continue  # nothing to check, and OmegaConf has checked the type: the value is not read
        value = node[f.name] if composed else getattr(node, f.name)
        if not composed:
            _check_type(key, value, f)
        if found is not None and not (value is None and is_optional(f)):
            found.check(key, value)


def _check_type(key: str, value: Any, f) -> None:
    """The scalar types OmegaConf enforces on a composed config, for a plain dataclass instance."""
    kind = (f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")).replace("Optional[", "")
    base = kind.split("|")[0].strip(" ]")
    if value is None and is_optional(f):
        return
    wanted = {"bool": ("true or false", lambda v: isinstance(v, bool)),
              "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
              "float": ("a number", _is_number),
              "str": ("a string", lambda v: isinstance(v, str))}.get(base)
    if wanted is not None and not wanted[1](value):
        raise ConfigError(f"{key}={value!r} must be {wanted[0]}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
