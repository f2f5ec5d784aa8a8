"""`env=vf:NAME`: an installed `verifiers` taskset package (PyPI `verifiers` 0.4.x) as an rlvr environment.

`NAME` is the package's import name (what verifiers' own `vf-eval NAME` takes); `env.taskset_args` is its
`TasksetConfig` (e.g. `{num_tasks: 50}`). The first `pool_size` tasks are loaded when the environment is built;
a task is test iff the stable hash of its key falls in `test_fraction` (envs/split.py), so train and test never
share one. The prompt is the task's (system prompt, then its prompt string or messages); the reward is the
task's own reward functions, run by the `vf` verifier in worker processes under a time limit
(verifiers/vf/verifier.py, verifiers/vf/worker.py has what is used of the verifiers API and why).

A package that exports only a taskset is single-turn (`VerifiersTasksetEnv`): rlvr samples one reply and
verifiers scores it. A package that also exports a verifiers `Env` is multi-turn (envs/vf/multi_turn.py); the
factory `load_verifiers_env`, registered as `vf`, picks one, and the single-turn one refuses the multi-turn keys by
name. A task that needs a container, or a prompt holding tool messages, is refused by name. verifiers tasks carry no reference solution; `reference` (a format
string over the task's data fields, e.g. "<answer>{answer}</answer>") gives one for the tiny model's warm
start, and without it rows' `reference` is empty, so `model=tiny` warm-starts on nothing: use a checkpoint
(`model.name_or_path=`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rlvr.envs.base import Env
from rlvr.envs.registry import register_env
from rlvr.envs.vf.tasks import VerifiersTasks
from rlvr.errors import ConfigError

PREFIX = "vf:"


class VerifiersTasksetEnv(VerifiersTasks, Env):
    """A single-turn `verifiers` taskset's tasks and reward functions; see the module docstring."""

    name: ClassVar[str] = "vf"
    procedural: ClassVar[bool] = False
    default_reward: ClassVar[list[dict]] = [{"verifier": "vf"}]

    def __init__(self, *, taskset: str = "", taskset_args: Mapping[str, Any] | None = None, pool_size: int = 10_000,
                 test_fraction: float = 0.2, reference: str | None = None, score_timeout: float = 30.0,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        self.load_tasks(taskset, taskset_args, pool_size, test_fraction, reference)
        if reward is None:
            reward = [{"verifier": "vf", "params": {"timeout": score_timeout}}]
        super().__init__(reward=reward, system_prompt=system_prompt)


@register_env("vf")
def load_verifiers_env(*, taskset: str = "", taskset_args: Mapping[str, Any] | None = None,
                       env_args: Mapping[str, Any] | None = None, pool_size: int = 10_000, test_fraction: float = 0.2,
                       reference: str | None = None, score_timeout: float = 30.0, step_timeout: float | None = None,
                       max_turns: int | None = None, max_total_tokens: int | None = None,
                       reward: list[dict] | None = None, system_prompt: str | None = None) -> Env:
    """The package's environment: multi-turn (envs/vf/multi_turn.py) when it exports an `Env` subclass, else the
    single-turn `VerifiersTasksetEnv`, which refuses the multi-turn keys by name."""
    multi = _exports_env(taskset)
    if multi:
        from rlvr.envs.vf.multi_turn import VerifiersEpisodeEnv

        return VerifiersEpisodeEnv(taskset=taskset, taskset_args=taskset_args, env_args=env_args, pool_size=pool_size,
                                   test_fraction=test_fraction, reference=reference, score_timeout=score_timeout,
                                   step_timeout=30.0 if step_timeout is None else step_timeout, max_turns=max_turns,
                                   max_total_tokens=max_total_tokens, reward=reward, system_prompt=system_prompt)
    given = [k for k, v in (("env_args", env_args or None), ("step_timeout", step_timeout), ("max_turns", max_turns),
                            ("max_total_tokens", max_total_tokens)) if v is not None]
    if given:
        raise ConfigError(f"vf: {', '.join(given)} apply to a multi-turn verifiers environment (a package exporting an "
                          f"Env subclass); taskset {taskset!r} is single-turn")
    return VerifiersTasksetEnv(taskset=taskset, taskset_args=taskset_args, pool_size=pool_size,
                               test_fraction=test_fraction, reference=reference, score_timeout=score_timeout,
                               reward=reward, system_prompt=system_prompt)


def _exports_env(taskset: str) -> bool:
    """Whether the installed package `taskset` exports a verifiers `Env` subclass (False where it cannot be
    imported: the single-turn environment then names the problem)."""
    if not isinstance(taskset, str) or not taskset.strip():
        return False
    try:
        from rlvr.verifiers.vf.episode import env_class

        return env_class(taskset) is not None
    except (ImportError, TypeError, AttributeError):
        return False
    except ValueError as error:  # two Env subclasses exported: verifiers' own message
        raise ConfigError(f"vf: taskset {taskset!r}: {error}") from error


def expand_override(overrides: list[str]) -> list[str]:
    """`env=vf:NAME` -> `env=vf env.taskset=NAME` (Hydra picks a config group by file name; `vf:NAME` is not one)."""
    out = []
    for override in overrides:
        if override.startswith("env=" + PREFIX):
            name = override[len("env=" + PREFIX):]
            out += ["env=vf", f"env.taskset={name}"]
        else:
            out.append(override)
    return out
