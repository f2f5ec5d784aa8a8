"""An environment from its config node (`env=NAME env.KEY=V`): what `rlvr train` and `rlvr eval` both build.

Here rather than in run.py so that `rlvr eval` (trainer/evaluation/) builds environments without
importing the training loop."""

from __future__ import annotations

from omegaconf import OmegaConf

from rlvr.envs import load_env
from rlvr.errors import ConfigError


def build_env(env_cfg):
    params = OmegaConf.to_container(env_cfg, resolve=True)
    name = params.pop("name", None)
    if not name:
        raise ConfigError("env.name is missing: choose an environment with env=NAME (see `rlvr envs`)")
    return load_env(name, **params)
