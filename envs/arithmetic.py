"""Integer arithmetic `a op b` (+, -, *): the procedural task the tiny-model demo learns on CPU.

The problem space is small for few digits (3 x 10^4 at digits=2), so the test split is
enumerated and exactly counted there; larger spaces are sampled. Train and test never share
a problem (stable hash of "a op b", see `split.py`).
"""

from __future__ import annotations

import itertools
import random
from typing import Any, ClassVar

from rlvr.envs.base import INSTRUCT_FORMAT, Env, PromptStyle
from rlvr.envs.registry import register_env
from rlvr.envs.split import check_fraction, draw_test, draw_train, is_test, pick_test
from rlvr.errors import ConfigError

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
ENUMERATE_MAX = 200_000  # problem spaces up to this size are listed exactly for the test split

Problem = tuple[int, str, int]


@register_env("arithmetic")
class ArithmeticEnv(Env):
    """`a op b =` with operands uniform in [0, 10**digits); answer is the integer result."""

    name: ClassVar[str] = "arithmetic"
    # 16 tokens fit "<think></think><answer>N</answer>"; the anchored format gate already gives a cut-off
    # answer nothing (only a complete answer ending exactly at the limit scores), so rewards are kept as scored
    default_max_new_tokens: ClassVar[int] = 16
    truncated_reward: ClassVar[str] = "keep"
    default_reward: ClassVar[list[dict]] = [
        {"verifier": "exact", "weight": 0.9, "gate": "format"},
        {"verifier": "format", "weight": 0.1},
    ]
    difficulty_params: ClassVar[tuple[str, ...]] = ("digits", "ops")
    prompt_styles: ClassVar[dict[str, PromptStyle]] = {
        "base": PromptStyle("{a}{op}{b}=", tuple(default_reward)),
        # The user turn that took SmolLM2-135M-Instruct from 0% (base prompt) to 18% greedy on 2-digit sums; cut
        # completions earn nothing (a ramble cut at the limit may end on the right number by chance)
        "instruct": PromptStyle(
            "What is {a}{op}{b}? Put only the final number inside <answer></answer>.",
            ({"verifier": "exact", "weight": 0.9, "params": {"extract": "answer_tag_or_last_number"}}, INSTRUCT_FORMAT),
            max_new_tokens=48, truncated_reward="zero"),
    }

    def __init__(
        self,
        *,
        digits: int = 2,
        ops: list[str] | tuple[str, ...] = ("+", "-", "*"),
        allow_negative: bool = False,
        test_fraction: float = 0.2,
        prompt: str = "base",
        prompt_template: str | None = None,
        reward: list[dict] | None = None,
        system_prompt: str | None = None,
    ):
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
            raise ConfigError(f"arithmetic: 'digits' must be an int >= 1, got {digits!r}")
        if isinstance(ops, str) or not list(ops):
            raise ConfigError(f"arithmetic: 'ops' must be a non-empty list drawn from + - *, got {ops!r}")
        for op in ops:
            if op not in OPS:
                raise ConfigError(f"arithmetic: 'ops' has unknown op {op!r} (allowed: + - *)")
        if len(set(ops)) != len(list(ops)):
            raise ConfigError(f"arithmetic: 'ops' lists an op twice: {list(ops)!r}")
        prompt_template, reward = self.styled_prompt(prompt, prompt_template, reward, a=1, op="+", b=2)
        self.digits = digits
        self.ops = tuple(ops)
        self.allow_negative = bool(allow_negative)
        self.test_fraction = check_fraction(test_fraction, "arithmetic")
        self.prompt_template = prompt_template
        super().__init__(reward=reward, system_prompt=system_prompt)

    def difficulty_ladder(self) -> list[dict]:
        """1 digit up to this configuration's, then one digit more: at digits=2, digits 1, 2, 3."""
        return [{"digits": d} for d in range(1, self.digits + 2)]

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        if split == "train":
            problems = draw_train(self._draw, _key, self.test_fraction, n, seed)
        elif len(self.ops) * 10 ** (2 * self.digits) <= ENUMERATE_MAX:
            problems = pick_test(self._all_test(), n, seed)
        else:
            problems = draw_test(self._draw, _key, self.test_fraction, n, seed)
        return [self._row(p) for p in problems]

    def _canonical(self, a: int, op: str, b: int) -> Problem:
        if op == "-" and not self.allow_negative and a < b:
            a, b = b, a  # larger operand first keeps results non-negative
        return a, op, b

    def _draw(self, rng: random.Random) -> Problem:
        op = rng.choice(self.ops)
        size = 10 ** self.digits
        return self._canonical(rng.randrange(size), op, rng.randrange(size))

    def _all_test(self) -> list[Problem]:
        size = 10 ** self.digits
        problems = {self._canonical(a, op, b) for op in self.ops for a, b in itertools.product(range(size), repeat=2)}
        return sorted(p for p in problems if is_test(_key(p), self.test_fraction))

    def _row(self, p: Problem) -> dict[str, Any]:
        a, op, b = p
        result = OPS[op](a, b)
        return {
            "id": f"arithmetic/{_key(p)}",
            "messages": [{"role": "user", "content": self.prompt_template.format(a=a, op=op, b=b)}],
            "answer": str(result),
            "reference": f"<think></think><answer>{result}</answer>",
            "a": a, "b": b, "op": op,
        }


def _key(p: Problem) -> str:
    a, op, b = p
    return f"{a}{op}{b}"
