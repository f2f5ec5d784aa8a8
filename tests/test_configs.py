"""Every YAML under conf/ composes with the typed schema, validates, and builds its environment;
a misspelt key in a group file stops composition."""

from importlib.resources import files

import pytest
from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError

from rlvr.envs.base import Env
from rlvr.trainer.env_config import build_env
from rlvr.trainer.validate import validate_train_config
from rlvr.errors import ConfigError

GROUPS = ("algo", "env", "model", "rollout")
OPTIONS = [(group, path.name.removesuffix(".yaml"))
           for group in GROUPS
           for path in sorted(files("rlvr.conf").joinpath(group).iterdir(), key=lambda p: p.name)
           if path.name.endswith(".yaml")]


def test_every_group_has_options():
    assert {group for group, _ in OPTIONS} == set(GROUPS)
    assert ("env", "arithmetic") in OPTIONS and ("rollout", "hf") in OPTIONS and ("model", "tiny") in OPTIONS


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_composes_validates_and_builds_its_env(compose_train, group, option, tmp_path, env_data):
    # the data-backed envs (gsm8k, math, code_stdio) read small local files: nothing downloads
    overrides = [f"{group}={option}", *(env_data.data_overrides(option, tmp_path) if group == "env" else [])]
    if (group, option) == ("model", "hf"):
        overrides.append(f"model.name_or_path={tmp_path}")  # a local path must exist (validate.py)
    cfg = compose_train(overrides)
    validate_train_config(cfg)
    assert cfg[group].name == option if "name" in cfg[group] else cfg[group].engine == option
    env = build_env(cfg.env)
    assert isinstance(env, Env) and env.name == cfg.env.name
    assert env.rows("train", 2, seed=0)


def test_model_hf_without_a_path_is_refused_by_validation(compose_train):
    cfg = compose_train(["model=hf"])
    assert cfg.model.name == "hf"
    with pytest.raises(ConfigError, match="model.name_or_path"):
        validate_train_config(cfg)


def test_defaults_are_the_documented_demo(compose_train):
    cfg = compose_train([])
    assert (cfg.algo.name, cfg.env.name, cfg.model.name, cfg.rollout.engine) == ("grpo", "arithmetic", "tiny", "auto")
    assert cfg.model.name_or_path is None


def test_typo_key_in_a_group_file_fails_composition(compose_train, tmp_path):
    (tmp_path / "algo").mkdir()
    (tmp_path / "algo" / "typo.yaml").write_text("name: grpo\nbetaa: 0.04\n")
    with pytest.raises(ConfigCompositionException) as info:
        compose_train([f"hydra.searchpath=[file://{tmp_path}]", "algo=typo"])
    assert "betaa" in str(info.value) + str(info.value.__cause__)


def test_typo_key_in_a_stored_group_node_fails_composition(compose_train):
    ConfigStore.instance().store(group="rollout", name="typo_test", node={"engine": "hf", "temprature": 0.5})
    with pytest.raises((ConfigCompositionException, ConfigKeyError)) as info:
        compose_train(["rollout=typo_test"])
    assert "temprature" in str(info.value) + str(info.value.__cause__)


@pytest.mark.parametrize("override,key", [("train.stepz=3", "stepz"), ("algo.betaa=0.1", "betaa"),
                                          ("rollout.temprature=0.5", "temprature")])
def test_typo_override_fails_composition(compose_train, override, key):
    with pytest.raises(ConfigCompositionException) as info:
        compose_train([override])
    assert key in str(info.value) + str(info.value.__cause__)


def test_every_env_parameter_is_a_key_of_its_yaml():
    """`env.KEY=VALUE` needs no `+` and `rlvr train --help` shows every parameter an environment takes."""
    import inspect

    import yaml

    from rlvr.envs.registry import env_registry

    env_registry.names()
    for group, option in OPTIONS:
        if group != "env":
            continue
        keys = set(yaml.safe_load(files("rlvr.conf").joinpath("env", f"{option}.yaml").read_text()))
        params = inspect.signature(env_registry._factories[option]).parameters
        assert set(params) <= keys, f"conf/env/{option}.yaml lacks {sorted(set(params) - keys)}"


def test_env_yaml_defaults_build_the_same_env_as_the_factory_defaults(compose_train):
    """The keys the env YAMLs list change nothing: arithmetic built from its YAML equals the plain factory's."""
    from rlvr.envs import load_env

    from_yaml = build_env(compose_train([]).env)
    plain = load_env("arithmetic", digits=2, ops=["+"])
    assert from_yaml.rows("train", 50, seed=0) == plain.rows("train", 50, seed=0)
    assert from_yaml.rows("test", 50, seed=0) == plain.rows("test", 50, seed=0)
    row = plain.rows("train", 1, seed=0)[0]
    assert from_yaml.messages(row) == plain.messages(row)


@pytest.mark.parametrize("overrides,named", [
    (["+train.stepz=3"], "did you mean train.steps?"),  # the fix Hydra's own message suggests for train.stepz
    (["+wandb.projekt=x"], "wandb.projekt"),
    (["algo=grpo", "algo.loss_type=ipo"], "algo.loss_type='ipo' is read by algo=dpo, not by algo=grpo"),
    (["algo=dpo", "algo.clip_eps_high=0.5"], "not by algo=dpo"),
    (["algo=trpo", "algo.beta=0.04"], "algo.beta=0.04 is read by"),  # trpo has no KL term
    (["algo=npg", "algo.line_search_steps=3"], "not by algo=npg"),
    (["model.name_or_path=./no/such/model"], "no such directory"),
])
def test_a_key_nothing_reads_is_refused(compose_train, overrides, named):
    with pytest.raises(ConfigError) as info:
        validate_train_config(compose_train(overrides))
    assert named in str(info.value)


@pytest.mark.parametrize("algo", sorted({o for g, o in OPTIONS if g == "algo"}))
def test_every_preset_sets_only_keys_its_algorithm_reads(compose_train, algo):
    validate_train_config(compose_train([f"algo={algo}"]))
