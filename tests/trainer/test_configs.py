"""Every YAML under conf/ composes with the typed schema, validates, and builds its environment;
a misspelt key in a group file stops composition."""

from importlib.resources import files
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
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
    if (group, option) == ("algo", "distill"):
        overrides.append(f"algo.teacher={tmp_path}")  # required (algo_keys.py); loaded only by `rlvr train`
    cfg = compose_train(overrides)
    validate_train_config(cfg)
    assert cfg[group].name == option if "name" in cfg[group] else cfg[group].engine == option
    if (group, option) == ("env", "vf"):  # names no taskset package of its own (tests/envs/vf/test_vf_env.py installs one)
        with pytest.raises(ConfigError, match="env=vf:NAME"):
            build_env(cfg.env)
        return
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
    (["algo=npg", "algo.line_search_steps=3"], "algo.line_search_steps=3 is read by algo=trpo, not by algo=npg"),
    (["algo=reinforce", "algo.mu=4"], "algo.mu=4 is read by algo=grpo|dr_grpo|dapo|gspo, not by algo=reinforce"),
    (["algo=grpo", "algo.baseline=mean"], "algo.baseline='mean' is read by algo=reinforce, not by algo=grpo"),
    (["model.name_or_path=./no/such/model"], "no such directory"),
])
def test_a_key_nothing_reads_is_refused(compose_train, overrides, named):
    with pytest.raises(ConfigError) as info:
        validate_train_config(compose_train(overrides))
    assert named in str(info.value)


@pytest.mark.parametrize("algo", sorted({o for g, o in OPTIONS if g == "algo"}))
def test_every_preset_sets_only_keys_its_algorithm_reads(compose_train, algo):
    validate_train_config(compose_train([f"algo={algo}"]))


@pytest.mark.parametrize("overrides,named", [
    (["algo=ppo", "algo.loss_type=ipo"], "algo.loss_type is not a key of algo=ppo (family ppo, trainer/config.py "
                                         "PPOConfig); it is read by algo=dpo"),
    (["algo=grpo", "algo.loss_type=ipo"], "algo.loss_type is not a key of algo=grpo (family policy_gradient"),
    (["algo.loss_type=ipo"], "not a key of algo=grpo"),  # the default algorithm's family
    (["algo=dpo", "algo.clip_eps_high=0.5"], "it is read by algo=grpo|dr_grpo|dapo|gspo|reinforce and algo=ppo"),
    (["algo=ppo", "algo.overlong_buffer=2"], "algo.overlong_buffer is not a key of algo=ppo"),  # GRPO's shaping
    (["algo=trpo", "+algo.beta=0.04"], "algo.beta is not a key of algo=trpo (family natural_gradient"),  # no KL term
    (["algo=ppo", "algo.name=dpo"], "algo.name=dpo is not of algo=ppo's family (ppo): choose it with algo=dpo"),
])
def test_another_familys_key_fails_composition_in_one_line(compose_train, overrides, named):
    """Each family's schema lacks the other families' keys: Hydra refuses them, and `rlvr train` says so in
    one line, naming the key and the family, before Hydra's message of several."""
    from rlvr.cli import main
    from rlvr.trainer.algo_keys import refuse_foreign_overrides

    with pytest.raises(ConfigError) as info:
        refuse_foreign_overrides(overrides)
    assert named in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *overrides])
    assert str(exit_info.value) == f"rlvr train: {info.value}"
    if "algo.name=dpo" in overrides:  # a name of another family composes; validation refuses it (below)
        return
    if any(o.startswith("+") for o in overrides):  # Hydra adds the key; validation refuses what nothing reads
        with pytest.raises(ConfigError, match="is not a key of rlvr train's config"):
            validate_train_config(compose_train(overrides))
    else:
        with pytest.raises(ConfigCompositionException):
            compose_train(overrides)


def test_each_familys_beta_means_its_own_thing(compose_train):
    from rlvr.trainer.algos.table import ALGORITHMS
    from rlvr.trainer.config import ALGO_SCHEMAS

    presets = {path.stem for path in (Path(__file__).resolve().parents[2] / "conf" / "algo").glob("*.yaml")}
    assert presets == set(ALGORITHMS), "every conf/algo preset has its row in the algorithm table, and back"
    kinds = {name: OmegaConf.get_type(compose_train([f"algo={name}"]).algo).__name__ for name in ALGORITHMS}
    for name, algorithm in ALGORITHMS.items():  # the family the row names is the schema its YAML composes
        assert kinds[name] == ALGO_SCHEMAS[algorithm.family].__name__, name
    assert kinds["grpo"] == kinds["reinforce"] == "PolicyGradientConfig" and kinds["ppo"] == "PPOConfig"
    assert kinds["trpo"] == kinds["npg"] == "NaturalGradientConfig" and kinds["dpo"] == "DPOConfig"
    assert "beta" not in compose_train(["algo=trpo"]).algo  # no KL term
    assert compose_train(["algo=dpo"]).algo.beta == 0.1  # DPO's temperature
    with pytest.raises(ConfigError, match="algo.name=dpo takes the DPOConfig schema"):
        validate_train_config(compose_train(["algo=ppo", "algo.name=dpo"]))


def test_the_old_name_of_a_renamed_key_is_refused_naming_the_new_one():
    from rlvr.cli import main

    with pytest.raises(SystemExit) as info:
        main(["train", "train.samples_per_step=3"])
    assert str(info.value) == ("rlvr train: train.samples_per_step is now train.logged_prompts_per_step (the same "
                               "setting, named for what it counts): pass train.logged_prompts_per_step=3")


@pytest.mark.parametrize("command", ["train", "eval"])
def test_an_engine_key_by_its_old_flat_name_is_refused_naming_its_group(command):
    from rlvr.cli import main

    with pytest.raises(SystemExit) as info:
        main([command, "rollout=vllm", "rollout.kv_cache_bytes=1024"])
    assert str(info.value) == (f"rlvr {command}: rollout.kv_cache_bytes is now rollout.vllm.kv_cache_bytes (the same "
                               "setting, in its engine's group): pass rollout.vllm.kv_cache_bytes=1024")


@pytest.mark.parametrize("engine, key, reads", [("hf", "rollout.vllm.dtype=bfloat16", "rollout.hf.*"),
                                                ("vllm", "rollout.server.num_servers=2", "rollout.vllm.*"),
                                                ("server", "rollout.hf.prefill_once=false",
                                                 "rollout.server.* and rollout.vllm.*")])
def test_an_engine_group_the_chosen_engine_does_not_read_is_refused(compose_train, engine, key, reads):
    group = key.split(".")[1]
    with pytest.raises(ConfigError) as info:
        validate_train_config(compose_train([f"rollout={engine}", key]))
    assert str(info.value) == (f"{key.replace('false', 'False')}: rollout={engine} does not read rollout.{group}.* "
                               f"(it reads {reads}); choose rollout={group} or leave rollout.{group} at its defaults")
    validate_train_config(compose_train([f"rollout={group}", key]))  # its own engine reads it
    validate_train_config(compose_train(["rollout=server", "rollout.vllm.dtype=bfloat16"]))  # the servers' vLLM


def test_every_engine_has_a_rollout_group_and_every_choice_names_the_groups_it_reads():
    from dataclasses import fields, is_dataclass

    from rlvr.trainer.config import RolloutConfig
    from rlvr.trainer.rollout.factory import CHOICES, ENGINES, GROUPS

    groups = {f.name for f in fields(RolloutConfig) if is_dataclass(f.default_factory)}
    assert groups == set(ENGINES) and set(GROUPS) == set(CHOICES)
    assert all(kind in GROUPS[kind] for kind in ENGINES) and set().union(*GROUPS.values()) == groups


def test_resume_moves_a_saved_runs_flat_engine_keys_into_their_groups(compose_train, tmp_path):
    """A config.yaml written before rollout's engine groups holds their keys flat in `rollout`, nulls included:
    each resumes under its group, the rest of the group at its default."""
    from rlvr.trainer.resume_config import resumed_config

    saved = OmegaConf.to_container(compose_train(["rollout=vllm"]), resolve=False)
    flat = saved["rollout"]
    flat.update(flat.pop("vllm"), **flat.pop("hf"), **flat.pop("server"))
    flat.update(dtype="bfloat16", kv_cache_bytes=None, prefill_once=False, server_start_timeout_s=7.0)
    del flat["start_timeout_s"], flat["threads"]
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "config.yaml")
    cfg = resumed_config(compose_train([f"resume={tmp_path}"]), [f"resume={tmp_path}"])
    assert (cfg.rollout.vllm.dtype, cfg.rollout.vllm.kv_cache_bytes) == ("bfloat16", None)
    assert (cfg.rollout.hf.prefill_once, cfg.rollout.server.start_timeout_s) == (False, 7.0)
    assert cfg.rollout.engine == "vllm" and cfg.rollout.server.threads == 1
    assert not {"dtype", "kv_cache_bytes", "prefill_once", "server_start_timeout_s"} & set(cfg.rollout)


def test_resume_reads_a_run_saved_with_the_one_algo_union(compose_train, tmp_path):
    """A config.yaml written before the per-family schemas holds every family's algo keys and the old
    train.samples_per_step: it resumes with its algorithm's family and the key under its new name."""
    from rlvr.trainer.resume_config import resumed_config

    saved = OmegaConf.to_container(compose_train(["algo=dapo"]), resolve=False)
    saved["algo"].update(loss_type="sigmoid", critic="head", max_kl=0.01, pairs_per_step=64)  # others' defaults
    saved["train"]["samples_per_step"] = 3
    del saved["train"]["logged_prompts_per_step"]
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "config.yaml")
    cfg = resumed_config(compose_train([f"resume={tmp_path}", "algo.overlong_buffer=4"]),
                         [f"resume={tmp_path}", "algo.overlong_buffer=4"])
    assert OmegaConf.get_type(cfg.algo).__name__ == "PolicyGradientConfig" and cfg.algo.name == "dapo"
    assert "loss_type" not in cfg.algo and cfg.algo.overlong_buffer == 4
    assert cfg.train.logged_prompts_per_step == 3 and "samples_per_step" not in cfg.train
    validate_train_config(cfg)


def test_resume_composes_the_saved_runs_family(compose_train, tmp_path):
    """`rlvr train resume=DIR algo.vf_coef=0.2` on a PPO run: Hydra composes algo=ppo's schema (the default
    algorithm's would refuse vf_coef), and the resumed config keeps the run's values with the override on top."""
    from rlvr.trainer.algo_keys import refuse_foreign_overrides
    from rlvr.trainer.resume_config import resumed_algo_override, resumed_config

    saved = OmegaConf.to_container(compose_train(["algo=ppo", "algo.mu=2"]), resolve=False)
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "config.yaml")
    given = [f"resume={tmp_path}", "algo.vf_coef=0.2"]
    overrides, added = resumed_algo_override(given)
    assert added == "algo=ppo" and overrides == [*given, added]
    refuse_foreign_overrides(overrides)
    cfg = resumed_config(compose_train(overrides), given)
    assert (cfg.algo.name, cfg.algo.mu, cfg.algo.vf_coef) == ("ppo", 2, 0.2)  # mu: the run's, not the preset's 4
    assert resumed_algo_override([*given, "algo=grpo"]) == ([*given, "algo=grpo"], None)  # an explicit choice stands
