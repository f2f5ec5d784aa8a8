"""Any reasoning-gym task (106 procedural generators in 0.1.25) as an rlvr environment.

`task` names the generator, `config` its parameters (reasoning-gym's own config dataclass checks
them). Problems are entries `dataset[i]` of a dataset of `pool_size` items built with
`config_seed`; train and test never share a question (stable hash of the question text, see
`split.py`). Scoring is the task's own `score_answer` through the `reasoning_gym` verifier, with
the substring partial-credit leak guarded (see verifiers/reasoning_gym.py) and, optionally,
the math verifier as a cross-check for numeric answers.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any, ClassVar

from rlvr.envs.base import Env
from rlvr.envs.registry import register_env
from rlvr.envs.split import check_fraction, draw_test, draw_train
from rlvr.errors import ConfigError

DEFAULT_TEMPLATE = "{question}\nGive only the final answer in <answer></answer>."


@register_env("reasoning_gym")
class ReasoningGymEnv(Env):
    """One reasoning-gym task; reward = its `score_answer`, leak-guarded."""

    name: ClassVar[str] = "reasoning_gym"

    def __init__(self, *, task: str = "leg_counting", config: Mapping[str, Any] | None = None,
                 pool_size: int = 10_000, config_seed: int = 0, test_fraction: float = 0.2,
                 partial_credit: bool = False, cross_check: bool = False,
                 prompt_template: str = DEFAULT_TEMPLATE, reward: list[dict] | None = None,
                 system_prompt: str | None = None):
        try:
            import reasoning_gym
            from reasoning_gym.factory import DATASETS
        except ModuleNotFoundError as error:
            raise ConfigError("reasoning_gym: the `reasoning-gym` package is not installed; pip install reasoning-gym") from error
        if task not in DATASETS:
            raise ConfigError(f"reasoning_gym: unknown 'task' {task!r}; available: {', '.join(sorted(DATASETS))}")
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"reasoning_gym: 'config' must be a mapping of {task}'s parameters, got {config!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"reasoning_gym: 'pool_size' must be an int >= 1, got {pool_size!r}")
        try:
            prompt_template.format(question="?")
        except (KeyError, IndexError, ValueError) as error:
            raise ConfigError(f"reasoning_gym: 'prompt_template' {prompt_template!r} does not format with question: {error!r}") from error
        self.task, self.config = task, dict(config or {})
        try:
            self.dataset = reasoning_gym.create_dataset(task, size=pool_size, seed=int(config_seed), **self.config)
        except (TypeError, ValueError, AssertionError) as error:
            raise ConfigError(f"reasoning_gym: task {task!r} refused 'config' {self.config!r}: {error}") from error
        self.pool_size = pool_size
        self.test_fraction = check_fraction(test_fraction, "reasoning_gym")
        self.prompt_template = prompt_template
        if reward is None:
            reward = [{"verifier": "reasoning_gym", "params": {"partial_credit": partial_credit, "cross_check": cross_check}}]
        super().__init__(reward=reward, system_prompt=system_prompt)

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        draw = draw_train if split == "train" else draw_test
        return [self._row(e) for e in draw(self._draw, _key, self.test_fraction, n, seed)]

    def _draw(self, rng: random.Random) -> dict[str, Any]:
        return self.dataset[rng.randrange(self.pool_size)]

    def _row(self, entry: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"reasoning_gym/{self.task}/{hashlib.sha256(_key(entry).encode()).hexdigest()[:12]}",
            "messages": [{"role": "user", "content": self.prompt_template.format(question=entry["question"])}],
            "answer": str(entry["answer"]),
            "reference": f"<think></think><answer>{entry['answer']}</answer>",
            "rg_task": self.task,
            "rg_config": dict(self.config),
            "rg_entry": {"question": entry["question"], "answer": entry["answer"], "metadata": entry.get("metadata", {})},
        }


def _key(entry: dict[str, Any]) -> str:
    return str(entry["question"])
