"""Environment lookup by name: built-ins registered with `@register_env`, plugins via entry points `rlvr.envs`."""

from __future__ import annotations

from typing import Any

from rlvr.envs.base import Env
from rlvr.registry import Registry

env_registry = Registry("env", "rlvr.envs", ("rlvr.envs.arithmetic", "rlvr.envs.countdown", "rlvr.envs.humaneval", "rlvr.envs.gsm8k",
                                             "rlvr.envs.math_env", "rlvr.envs.code_stdio", "rlvr.envs.reasoning_gym_env",
                                             "rlvr.envs.guess_number", "rlvr.envs.tool_multiply", "rlvr.envs.code_feedback",
                                             "rlvr.envs.canary", "rlvr.envs.vf.env",
                                             "rlvr.envs.dataset"))
register_env = env_registry.register


def load_env(name: str, **config: Any) -> Env:
    """An environment by name, its config checked against the factory's parameters first."""
    env = env_registry.build(name, **config)
    if not isinstance(env, Env):
        raise TypeError(f"env {name!r} factory returned {type(env).__name__}, not an rlvr.envs.Env")
    return env
