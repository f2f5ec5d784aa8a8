"""Any reasoning-gym task (106 procedural generators in 0.1.25) as an rlvr environment.

`task` names the generator, `config` its parameters (reasoning-gym's own config dataclass checks
them). Problems are entries `dataset[i]` of a dataset of `pool_size` items built with
`config_seed`; train and test never share a question (stable hash of the question text, see
`split.py`). Scoring is the task's own `score_answer` through the `reasoning_gym` verifier, with
the substring partial-credit leak guarded (see verifiers/reasoning_gym.py) and, optionally,
the math verifier as a cross-check for numeric answers.

`task=composite` mixes several tasks with weights (reasoning-gym's CompositeDataset):
`config={"datasets": [{"name": "leg_counting", "weight": 2, "config": {...}}, ...]}`. Each row then
names the task it came from, with that task's config, so the verifier scores it with that task's scorer.

Difficulty (`curriculum.enabled=true`, trainer/curriculum.py): a level sets `config`. The default ladder
is reasoning-gym's own curriculum for the task (`reasoning_gym.create_curriculum`): level i puts every
attribute of the curriculum at its level i (the last one past its end), with ranges from its first level up
(reasoning-gym's "inclusive" mode); for a composite, every component that has a curriculum moves together.
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
    difficulty_params: ClassVar[tuple[str, ...]] = ("config",)

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
            self.dataset = reasoning_gym.create_dataset(task, size=pool_size, seed=int(config_seed),
                                                        **_dataset_kwargs(task, self.config))
        except (TypeError, ValueError, AssertionError) as error:
            raise ConfigError(f"reasoning_gym: task {task!r} refused 'config' {self.config!r}: {error}") from error
        self.pool_size = pool_size
        self.test_fraction = check_fraction(test_fraction, "reasoning_gym")
        self.prompt_template = prompt_template
        if reward is None:
            reward = [{"verifier": "reasoning_gym", "params": {"partial_credit": partial_credit, "cross_check": cross_check}}]
        super().__init__(reward=reward, system_prompt=system_prompt)

    def difficulty_ladder(self) -> list[dict]:
        """Levels {"config": ...} from reasoning-gym's curriculum of the task (of each component of a composite);
        none when no task here has one."""
        if self.task != "composite":
            return [{"config": c} for c in curriculum_configs(self.task, self.config)]
        specs = [dict(spec) for spec in self.config["datasets"]]
        ladders = [curriculum_configs(spec["name"], dict(spec.get("config") or {})) for spec in specs]
        depth = max(map(len, ladders))
        return [{"config": {**self.config, "datasets": [
                    {**spec, "config": ladder[min(i, len(ladder) - 1)] if ladder else dict(spec.get("config") or {})}
                    for spec, ladder in zip(specs, ladders)]}}
                for i in range(depth)]

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        draw = draw_train if split == "train" else draw_test
        return [self._row(e) for e in draw(self._draw, _key, self.test_fraction, n, seed)]

    def _draw(self, rng: random.Random) -> dict[str, Any]:
        return self.dataset[rng.randrange(self.pool_size)]

    def _row(self, entry: dict[str, Any]) -> dict[str, Any]:
        task, config = self.task, dict(self.config)
        if task == "composite":  # the component it came from scores it
            task = entry["metadata"]["source_dataset"]
            config = next(dict(s.get("config") or {}) for s in self.config["datasets"] if s["name"] == task)
        return {
            "id": f"reasoning_gym/{task}/{hashlib.sha256(_key(entry).encode()).hexdigest()[:12]}",
            "messages": [{"role": "user", "content": self.prompt_template.format(question=entry["question"])}],
            "answer": str(entry["answer"]),
            "reference": f"<think></think><answer>{entry['answer']}</answer>",
            "rg_task": task,
            "rg_config": config,
            "rg_entry": {"question": entry["question"], "answer": entry["answer"], "metadata": entry.get("metadata", {})},
        }


def _key(entry: dict[str, Any]) -> str:
    return str(entry["question"])


def _dataset_kwargs(task: str, config: dict[str, Any]) -> dict[str, Any]:
    """`config` as `create_dataset` takes it: a composite's `datasets` become reasoning-gym DatasetSpecs,
    each checked here so that an error names its place."""
    if task != "composite":
        return config
    from reasoning_gym.composite import DatasetSpec
    from reasoning_gym.factory import DATASETS

    specs = config.get("datasets")
    if not isinstance(specs, list) or not specs:
        raise ConfigError("reasoning_gym: task=composite needs config.datasets, a non-empty list of "
                          "{name, weight, config}")
    for i, spec in enumerate(specs):
        where = f"reasoning_gym: config.datasets[{i}]"
        if not isinstance(spec, Mapping) or set(spec) - {"name", "weight", "config"} or "name" not in spec:
            raise ConfigError(f"{where} must be a mapping with name, weight and (optional) config, got {spec!r}")
        if spec["name"] not in DATASETS or spec["name"] == "composite":
            raise ConfigError(f"{where}: unknown task {spec['name']!r}; available: {', '.join(sorted(DATASETS))}")
        weight = spec.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise ConfigError(f"{where}: 'weight' must be a number > 0, got {weight!r}")
        if not isinstance(spec.get("config") or {}, Mapping):
            raise ConfigError(f"{where}: 'config' must be a mapping of {spec['name']}'s parameters, got {spec['config']!r}")
    names = [spec["name"] for spec in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"reasoning_gym: config.datasets names a task twice: {names}")
    return {**config, "datasets": [DatasetSpec(name=s["name"], weight=float(s.get("weight", 1.0)),
                                               config=dict(s.get("config") or {})) for s in specs]}


def curriculum_configs(task: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    """`config` with the fields of reasoning-gym's curriculum for `task` at each of its levels, easiest first
    (consecutive equal ones once); [] when the task has no curriculum."""
    from reasoning_gym.coaching import RangeAttributeDefinition
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if not has_curriculum(task):
        return []
    curriculum = create_curriculum(task)
    attributes = curriculum.attributes
    fields = [f for a in attributes.values() for f in
              ((a.lower_field_name, a.upper_field_name) if isinstance(a, RangeAttributeDefinition) else (a.field_name,))]
    ladder: list[dict[str, Any]] = []
    for i in range(max(len(a.levels) for a in attributes.values())):
        for name, attribute in attributes.items():
            curriculum.set_attr_level(name, min(i, len(attribute.levels) - 1))
        generated = curriculum.generate_configuration(defaults=dict(config))
        level = {**config, **{f: getattr(generated, f) for f in fields}}
        if not ladder or level != ladder[-1]:
            ladder.append(level)
    return ladder
