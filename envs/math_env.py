"""MATH (Hendrycks et al., 2021): competition problems whose solutions end in `\\boxed{answer}`.

Data: local JSONL/Parquet files with MATH's fields `problem` and `solution`, plus `level`
("Level 3" or 3) and `type` (the subject; `subject` is accepted too, as in MATH-500) when
filtering; or a Hub dataset name when online (none by default: the original was withdrawn, and
mirrors differ in layout). The gold answer is the content of the solution's LAST `\\boxed{}`
(a solution may box intermediate results). Filters: `levels` (e.g. [4, 5]) and `subjects`
(e.g. ["Algebra", "Number Theory"], case-insensitive); a row without the field a filter needs is
an error naming it.

Reward: the `math` verifier (SymPy equivalence) without the last-number fallback, which would
match stray numbers in LaTeX answers, and with its default bare-answer fallback (`lenient`: a
completion with no box, marker or math span is read by its last expression, as math-verify
does); pass `reward: [{verifier: math, params: {lenient: false}}]` to require a marked answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from rlvr.envs.data import DataEnv, RowError, check_template, stable_id
from rlvr.envs.registry import register_env
from rlvr.verifiers.math.extract import _boxes
from rlvr.errors import ConfigError

DEFAULT_TEMPLATE = "{problem}\nPut the final answer in \\boxed{{}}."
_LEVEL = re.compile(r"^\s*(?:level\s*)?(\d+)\s*$", re.IGNORECASE)


def last_boxed(solution: str) -> str | None:
    """The content of the last complete `\\boxed{...}` (or `\\fbox{...}`), or None."""
    boxes = _boxes(solution)
    return boxes[-1][2] if boxes and boxes[-1][2] else None


def parse_level(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _LEVEL.match(str(value))
    return int(m.group(1)) if m else None


@register_env("math")
class MathEnv(DataEnv):
    """Competition math; reward = the final answer is mathematically equal to the last boxed one."""

    name: ClassVar[str] = "math"
    # competition solutions run longer than GSM8K's
    default_max_new_tokens: ClassVar[int] = 1024
    truncated_reward: ClassVar[str] = "zero"
    required_fields: ClassVar[tuple[str, ...]] = ("problem", "solution")
    default_reward: ClassVar[list[dict]] = [{"verifier": "math"}]

    def __init__(self, *, train_file: str | None = None, test_file: str | None = None, hub: str | None = None,
                 hub_config: str | None = None, levels: Sequence[int] | None = None,
                 subjects: Sequence[str] | None = None, prompt_template: str = DEFAULT_TEMPLATE,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        self.prompt_template = check_template("math", prompt_template, problem="1+1?")
        if levels is not None and (isinstance(levels, (str, int)) or
                                   not all(isinstance(x, int) and not isinstance(x, bool) for x in levels)):
            raise ConfigError(f"math: 'levels' must be a list of ints (e.g. [4, 5]) or null, got {levels!r}")
        if subjects is not None and (isinstance(subjects, str) or not all(isinstance(x, str) for x in subjects)):
            raise ConfigError(f"math: 'subjects' must be a list of strings or null, got {subjects!r}")
        self.levels = None if levels is None else set(levels)
        self.subjects = None if subjects is None else {s.casefold() for s in subjects}
        super().__init__(train_file=train_file, test_file=test_file, hub=hub, hub_config=hub_config,
                         reward=reward, system_prompt=system_prompt)

    def _keep(self, raw: dict[str, Any]) -> bool:
        if self.levels is not None:
            if raw.get("level") is None:
                raise RowError("has no field 'level', which the 'levels' filter needs")
            level = parse_level(raw["level"])
            if level is None:
                raise RowError(f"'level' {raw['level']!r} is not a level (e.g. 'Level 3' or 3)")
            if level not in self.levels:
                return False
        if self.subjects is not None:
            subject = raw.get("type", raw.get("subject"))
            if subject is None:
                raise RowError("has no field 'type' (or 'subject'), which the 'subjects' filter needs")
            if str(subject).casefold() not in self.subjects:
                return False
        return True

    def _row(self, raw: dict[str, Any]) -> dict[str, Any]:
        solution = str(raw["solution"])
        gold = last_boxed(solution)
        if gold is None:
            raise RowError(f"'solution' has no \\boxed{{}} answer: {solution[-80:]!r}")
        return {
            "id": stable_id("math", str(raw["problem"])),
            "messages": [{"role": "user", "content": self.prompt_template.format(problem=raw["problem"])}],
            "answer": gold,
            "reference": solution,
            "level": parse_level(raw.get("level")) if raw.get("level") is not None else None,
            "subject": raw.get("type", raw.get("subject")),
        }
