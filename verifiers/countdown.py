"""Countdown reward (TinyZero): the answer is an expression that uses the given numbers and hits the target.

The expression in the last `<answer>` block is evaluated by `safe_arith` (never eval). Every number
in `record["numbers"]` must appear exactly once (`use_all=False`: at most once), and the exact value
must equal `record["target"]`. A refused or unparsable expression is UNPARSABLE; a valid one with
wrong numbers or a wrong value is INCORRECT, with the reason in details.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rlvr.verifiers.extract import extract_answer_tag
from rlvr.errors import ConfigError
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult
from rlvr.verifiers.safe_arith import MAX_CHARS, MAX_NODES, SafeArithError, evaluate


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def record_problem(record: Mapping[str, Any]) -> str | None:
    """Why `record` is not a countdown problem (numbers: list of ints, target: int); None if it is."""
    if "numbers" not in record:
        return "record has no 'numbers' field"
    if "target" not in record:
        return "record has no 'target' field"
    numbers = record["numbers"]
    if not isinstance(numbers, (list, tuple)) or not all(_is_int(n) for n in numbers):
        return f"record 'numbers' must be a list of ints, got {numbers!r}"
    if not _is_int(record["target"]):
        return f"record 'target' must be an int, got {record['target']!r}"
    return None


def numbers_problem(used: tuple[int, ...], numbers: list[int], use_all: bool) -> str | None:
    """Why the literals `used` break the rule (each given number exactly / at most once); None if they follow it."""
    have, given = Counter(used), Counter(numbers)
    extra = sorted((have - given).elements())
    if extra:
        return f"uses numbers not given (or reused): {extra}"
    missing = sorted((given - have).elements())
    if use_all and missing:
        return f"does not use: {missing}"
    return None


@register_verifier("countdown")
class CountdownVerifier:
    """Reward 1.0 when the answer expression uses the numbers correctly and equals the target."""

    name = "countdown"

    def __init__(self, use_all: bool = True, max_chars: int = MAX_CHARS, max_nodes: int = MAX_NODES):
        for field, value in (("max_chars", max_chars), ("max_nodes", max_nodes)):
            if not _is_int(value) or value < 1:
                raise ConfigError(f"countdown verifier: {field!r} must be a positive int, got {value!r}")
        self.use_all = bool(use_all)
        self.max_chars = max_chars
        self.max_nodes = max_nodes

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        bad_record = record_problem(record)
        if bad_record:
            return VerifyResult(0.0, Status.ERROR, {"error": bad_record})
        numbers, target = list(record["numbers"]), record["target"]
        expr = extract_answer_tag(completion)
        details: dict[str, Any] = {"expression": expr, "numbers": numbers, "target": target}
        if not expr:
            return VerifyResult(0.0, Status.UNPARSABLE, {**details, "reason": "no <answer> expression"})
        try:
            result = evaluate(expr, self.max_chars, self.max_nodes)
        except SafeArithError as e:
            return VerifyResult(0.0, Status.UNPARSABLE, {**details, "reason": str(e)})
        details.update(value=str(result.value), used=list(result.literals))
        wrong_numbers = numbers_problem(result.literals, numbers, self.use_all)
        if wrong_numbers:
            return VerifyResult(0.0, Status.INCORRECT, {**details, "reason": wrong_numbers})
        if result.value != target:
            return VerifyResult(0.0, Status.INCORRECT, {**details, "reason": f"value {result.value} != target {target}"})
        return VerifyResult(1.0, Status.CORRECT, details)
