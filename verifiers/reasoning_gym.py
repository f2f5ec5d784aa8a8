"""`verifier=reasoning_gym`: a reasoning-gym task's own `score_answer`, with its substring leak closed.

The answer is the last `<answer>...</answer>` of the completion (what reasoning-gym's `extract_answer` gives, found
by `last_tagged`'s linear scan: its pattern `<answer>\\s?(.*?)\\s?</answer>` retried the rest of the text from every
opening tag, so 100 kB of `<answer>` cost the host 41 s); none is `unparsable`. The task's scorer is built from
the record's `rg_task` and `rg_config` (the environment puts them there, with the generated entry in `rg_entry`)
and cached.

The leak (read in reasoning-gym 0.1.25, `ProceduralDataset.score_answer` in dataset.py): the
default scorer, used as is by 33 of its 106 tasks and copied into several overrides
(leg_counting, basic_arithmetic, gcd, products, ...), returns 1.0 for an exact match and
otherwise `len(oracle) / len(answer)` whenever the oracle is a SUBSTRING of the answer. So for
oracle "292", the wrong answer "2920" earns 0.75 and "0 1 2 ... 300" earns a little; a policy
learns to pad or enumerate. Probing every task with `oracle + " 9"` gave partial credit on 63
tasks. The guard: a score below 1 for an answer that differs from the oracle yet contains it
is set to 0 (details say so). Scores of 1 are kept: tasks that parse answers (e.g. sokoban,
knights_knaves) legitimately accept surrounding text. `partial_credit=false` (the default)
further rounds every score below 1 down to 0; `true` keeps the task's other partial scores.

`cross_check=true` adds the `math` verifier as a second opinion for numeric oracles
(integers, decimals, fractions): a completion reasoning-gym calls correct but the math verifier
calls incorrect is scored 0; the opposite case keeps reasoning-gym's verdict. Both verdicts go
in `details`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rlvr.errors import ConfigError
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

_NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?(?:\s*/\s*\d+)?\s*$")


def last_tagged(text: str, tag: str) -> str | None:
    """The stripped content of the last `<tag>...</tag>` pair as reasoning-gym's extract_answer pairs them (each
    opening tag with the first closing tag after it, the next pair searched after that), or None; linear time."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    found, pos = None, 0
    while (start := text.find(opening, pos)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:  # no later opening tag can close either
            break
        found, pos = text[start + len(opening): end], end + len(closing)
    return None if found is None else found.strip()


def guard_substring(score: float, answer: str, oracle: str) -> tuple[float, bool]:
    """(score, guarded): a partial score for an answer that merely contains the oracle becomes 0."""
    oracle, stripped = oracle.strip(), answer.strip()
    if score < 1.0 and oracle and stripped != oracle and oracle in stripped:
        return 0.0, True
    return score, False


@register_verifier("reasoning_gym")
class ReasoningGymVerifier:
    """Scores `<answer>` with the record's reasoning-gym task scorer; see the module docstring."""

    name = "reasoning_gym"

    def __init__(self, partial_credit: bool = False, cross_check: bool = False, tag: str = "answer"):
        if not isinstance(tag, str) or not re.fullmatch(r"\w+", tag):
            raise ConfigError(f"reasoning_gym verifier: 'tag' must be a tag name like 'answer', got {tag!r}")
        self.partial_credit, self.cross_check, self.tag = bool(partial_credit), bool(cross_check), tag
        self._scorers: dict[str, Any] = {}
        self._math = None

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        try:
            import reasoning_gym  # noqa: F401  (installed: the scorer is built from it)
        except ModuleNotFoundError:
            return VerifyResult(0.0, Status.ERROR, {"error": "reasoning-gym is not installed; pip install reasoning-gym"})
        entry = record.get("rg_entry") if isinstance(record, Mapping) else None
        if not isinstance(entry, Mapping) or "answer" not in entry or not isinstance(record.get("rg_task"), str):
            return VerifyResult(0.0, Status.ERROR, {"error": "record needs 'rg_task' and 'rg_entry' (made by env=reasoning_gym)"})
        if not isinstance(completion, str):
            return VerifyResult(0.0, Status.ERROR, {"error": f"completion must be a string, got {type(completion).__name__}"})
        answer = last_tagged(completion, self.tag)
        oracle = str(entry["answer"])
        if answer is None:
            return VerifyResult(0.0, Status.UNPARSABLE, {"reason": f"no <{self.tag}> block", "oracle": oracle})
        try:
            raw = float(self._scorer(record["rg_task"], record.get("rg_config") or {})(answer, dict(entry)))
        except Exception as error:  # the task's scorer failed: reported, not hidden
            return VerifyResult(0.0, Status.ERROR, {"error": f"score_answer raised {type(error).__name__}: {error}",
                                                    "answer": answer[:200]})
        score, guarded = guard_substring(raw, answer, oracle)
        details: dict[str, Any] = {"answer": answer[:200], "oracle": oracle[:200], "rg_score": raw}
        if guarded:
            details["guard"] = "partial credit for an answer containing the oracle refused"
        correct = score >= 1.0
        if self.cross_check and _NUMBER.match(oracle):
            math = self._math_verifier()(f"<answer>{answer}</answer>", {"answer": oracle})
            details["math"] = math.status.value
            if correct and math.status is not Status.CORRECT:
                correct, score = False, 0.0
                details["cross_check"] = "reasoning-gym said correct, the math verifier did not"
        reward = score if self.partial_credit else (1.0 if correct else 0.0)
        return VerifyResult(float(min(max(reward, 0.0), 1.0)), Status.CORRECT if correct else Status.INCORRECT, details)

    def _scorer(self, task: str, config: Mapping[str, Any]):
        key = f"{task}:{json.dumps(dict(config), sort_keys=True, default=str)}"
        if key not in self._scorers:
            import reasoning_gym

            self._scorers[key] = reasoning_gym.create_dataset(task, size=1, seed=0, **dict(config)).score_answer
        return self._scorers[key]

    def _math_verifier(self):
        if self._math is None:
            from rlvr.verifiers.math.verifier import MathVerifier

            self._math = MathVerifier(workers=1)
        return self._math

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_scorers": {}, "_math": None}
