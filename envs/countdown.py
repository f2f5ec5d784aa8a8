"""Countdown (TinyZero): combine the given numbers with + - * / to reach the target.

Problems are generated backwards: random numbers in [1, max_number], then a random expression
tree over all of them (+, -, *, and / only where it divides exactly); its value is the target,
kept when it is an integer in [1, 1000]. That tree, parenthesised, is the row's reference
solution, so every problem is solvable. `ops` limits the operators the tree is built with (the
solver may still use all four): with `["+"]` the target is the sum of the numbers. `max_number`,
`num_numbers` and `ops` are the difficulty parameters a curriculum may move; the default ladder moves
`max_number` (`difficulty_ladder`). A problem is identified by (sorted numbers, target);
train and test never share one (stable hash, see `split.py`).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from rlvr.envs.base import INSTRUCT_FORMAT, Env, PromptStyle
from rlvr.envs.registry import register_env
from rlvr.envs.split import check_fraction, draw_test, draw_train
from rlvr.errors import ConfigError

MAX_TARGET = 1000
OPS = ("+", "-", "*", "/")
MAX_GENERATION_TRIES = 10_000

Problem = tuple[tuple[int, ...], int, str]  # numbers in prompt order, target, reference expression


@register_env("countdown")
class CountdownEnv(Env):
    """Reach `target` using each of `numbers` exactly once with + - * /."""

    name: ClassVar[str] = "countdown"
    # 16 tokens fit the tiny model's short answers; the anchored format gate already gives a cut-off
    # answer nothing (only a complete answer ending exactly at the limit scores), so rewards are kept as scored
    default_max_new_tokens: ClassVar[int] = 16
    truncated_reward: ClassVar[str] = "keep"
    default_reward: ClassVar[list[dict]] = [
        {"verifier": "countdown", "weight": 0.9, "gate": "format"},
        {"verifier": "format", "weight": 0.1},
    ]
    difficulty_params: ClassVar[tuple[str, ...]] = ("num_numbers", "max_number", "ops")
    prompt_styles: ClassVar[dict[str, PromptStyle]] = {
        "base": PromptStyle("Use {numbers} to make {target}. Each number once, + - * /.", tuple(default_reward)),
        # TinyZero's countdown question as a chat turn, the format shown by an example; scored on the last <answer>
        "instruct": PromptStyle(
            "Using the numbers {numbers}, create an equation that equals {target}. Use each number exactly once, "
            "with + - * / and parentheses. Put only the expression inside <answer></answer>, for example "
            "<answer>(1 + 2) * 3</answer>.",
            ({"verifier": "countdown", "weight": 0.9}, INSTRUCT_FORMAT), max_new_tokens=64, truncated_reward="zero"),
    }

    def __init__(
        self,
        *,
        num_numbers: int = 3,
        max_number: int = 20,
        ops: list[str] | tuple[str, ...] = OPS,
        test_fraction: float = 0.2,
        prompt: str = "base",
        prompt_template: str | None = None,
        reward: list[dict] | None = None,
        system_prompt: str | None = None,
    ):
        if isinstance(num_numbers, bool) or not isinstance(num_numbers, int) or not 2 <= num_numbers <= 6:
            raise ConfigError(f"countdown: 'num_numbers' must be an int in 2..6, got {num_numbers!r}")
        if isinstance(max_number, bool) or not isinstance(max_number, int) or not 1 <= max_number <= MAX_TARGET:
            raise ConfigError(f"countdown: 'max_number' must be an int in 1..{MAX_TARGET}, got {max_number!r}")
        if isinstance(ops, str) or not list(ops) or any(op not in OPS for op in ops) or len(set(ops)) != len(list(ops)) \
                or set(ops) == {"/"}:
            raise ConfigError(f"countdown: 'ops' must list distinct operators from + - * / (not / alone), got {ops!r}")
        prompt_template, reward = self.styled_prompt(prompt, prompt_template, reward, numbers="1, 2", target=3)
        self.num_numbers = num_numbers
        self.max_number = max_number
        self.ops = tuple(op for op in OPS if op in ops)  # in OPS's order: the default draws as before ops existed
        self.test_fraction = check_fraction(test_fraction, "countdown")
        self.prompt_template = prompt_template
        super().__init__(reward=reward, system_prompt=system_prompt)

    def difficulty_ladder(self) -> list[dict]:
        """Smaller numbers first: this configuration's count and operators with numbers up to 2/3 and 5/6 of
        `max_number`, then the configured task, then one number more (when allowed). At 3 numbers of 1..30:
        1..20, 1..25, 1..30 (the configured task, where a run starts), 4 numbers of 1..30; at the default 1..20:
        1..13, 1..17, 1..20, 4 numbers. Every level below the target is a problem of the target's shape, with all
        its operators, only smaller numbers.

        Not the operators: a ladder of targets built from +; + -; + - *; all four (this method's first version)
        lowered held-out accuracy against fixed difficulty at both 1..20 and 1..30 from the tiny warm start (a
        model trained on sums learns to add); at 1..30 smaller numbers were 3.1 points above it and level with fixed
        difficulty (+0.3 ± 1.0 points, 12 seeds). Neither ladder helped at 1..20, the warm start's own range
        (docs/training/curricula.md)."""
        maxima = sorted({max(1, round(self.max_number * f)) for f in (2 / 3, 5 / 6)} - {self.max_number})
        ladder = [{"max_number": m} for m in maxima] + [{"max_number": self.max_number}]
        if self.num_numbers < 6:
            ladder.append({"num_numbers": self.num_numbers + 1, "max_number": self.max_number})
        return ladder

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        draw = draw_train if split == "train" else draw_test
        return [self._row(p) for p in draw(self._draw, _key, self.test_fraction, n, seed)]

    def _draw(self, rng: random.Random) -> Problem:
        for _ in range(MAX_GENERATION_TRIES):
            numbers = tuple(rng.randint(1, self.max_number) for _ in range(self.num_numbers))
            target, expr = random_expression(numbers, rng, self.ops)
            if 0 < target <= MAX_TARGET:
                return numbers, target, expr
        raise RuntimeError(f"countdown: no target in 1..{MAX_TARGET} after {MAX_GENERATION_TRIES} tries")

    def _row(self, p: Problem) -> dict[str, Any]:
        numbers, target, expr = p
        prompt = self.prompt_template.format(numbers=", ".join(map(str, numbers)), target=target)
        return {
            "id": f"countdown/{_key(p)}",
            "messages": [{"role": "user", "content": prompt}],
            "answer": str(target),
            "reference": f"<think></think><answer>{expr}</answer>",
            "numbers": list(numbers),
            "target": target,
        }


def random_expression(numbers: tuple[int, ...], rng: random.Random, ops: tuple[str, ...] = ("+", "-", "*", "/")
                      ) -> tuple[int, str]:
    """(value, text) of a random expression using every number once, with `ops`; / only where it divides exactly."""
    pool = [(n, str(n)) for n in numbers]
    while len(pool) > 1:
        i, j = rng.sample(range(len(pool)), 2)
        (x, ex), (y, ey) = pool[i], pool[j]
        op = rng.choice([o for o in ops if o != "/" or (y != 0 and x % y == 0)])
        value = {"+": x + y, "-": x - y, "*": x * y, "/": x // y if y else 0}[op]
        pool = [p for k, p in enumerate(pool) if k not in (i, j)] + [(value, f"({ex}{op}{ey})")]
    value, text = pool[0]
    return value, text[1:-1]  # the outermost parentheses are redundant


def _key(p: Problem) -> str:
    numbers, target, _ = p
    return f"{','.join(map(str, sorted(numbers)))}->{target}"
