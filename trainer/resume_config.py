"""The config of `rlvr train resume=DIR`: the run's own `config.yaml` with the command line's overrides on top.

As with TRL's and verl's resume, a bare `resume=DIR` continues the saved run: its steps, `save_every`,
algorithm, environment and model, not the defaults of `conf/train.yaml`. An override on the command
line replaces the saved value of its key (`train.steps=300` trains the run further); a group override
(`algo=ppo`, `env=gsm8k`) replaces that whole section with the group's, then its key overrides apply.
The run directory stays DIR whatever `output_dir` the saved config holds (the run may have moved).
Whether the checkpoint can continue under the result is checked by the trainer (checkpoint.py).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlvr.trainer.config import RENAMED_KEYS, RunConfig
from rlvr.errors import ConfigError

GROUPS = ("algo", "env", "model", "rollout")
KEY_PRESETS = ("train",)  # groups that set a few keys of a section (conf/train/fast.yaml), not the whole of it


def resumed_config(composed: DictConfig, overrides: list[str]) -> DictConfig:
    """`composed` is what Hydra built from the defaults and `overrides` (with `resume=DIR` among them);
    returns DIR/config.yaml with the keys `overrides` name taken from `composed`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    run_dir = Path(composed.resume)
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        raise ConfigError(f"resume={composed.resume}: no config.yaml there, so it is not a run directory of "
                          f"`rlvr train` (or it was removed); give the directory a run was trained into")
    try:
        saved = OmegaConf.load(saved_path)
        cfg = OmegaConf.merge(_schema_for(saved), saved)
    except OmegaConfBaseException as error:
        raise ConfigError(f"resume={composed.resume}: {saved_path} does not fit this rlvr's config "
                          f"({type(error).__name__}: {error}); start a new run") from None
    OmegaConf.set_struct(cfg, True)
    parsed = OverridesParser.create().parse_overrides(overrides)
    # as Hydra does: `algo=ppo` (the whole section) and `train=fast` (a few keys) first, then the keys given
    first = [o for o in parsed if o.key_or_group in GROUPS + KEY_PRESETS]
    for override in first + [o for o in parsed if o.key_or_group not in GROUPS + KEY_PRESETS]:
        key = override.key_or_group
        if override.is_delete():
            raise ConfigError(f"~{key}: deleting a key is not supported with resume=; set it to a value instead")
        if key in GROUPS:  # the section as composed, typed; its interpolations resolve in the resumed config
            cfg[key] = composed[key]
            continue
        if key in KEY_PRESETS:  # `train=fast`: the preset's own keys, no others
            for name, value in _preset_keys(key, override.value()).items():
                OmegaConf.update(cfg, f"{key}.{name}", value, merge=False)
            continue
        value = OmegaConf.select(composed, key, throw_on_missing=True)
        if isinstance(value, DictConfig) or OmegaConf.is_list(value):
            value = OmegaConf.to_container(value, resolve=True)
        OmegaConf.update(cfg, key, value, merge=False, force_add=override.is_add() or override.is_force_add())
    cfg.resume = composed.resume
    cfg.output_dir = composed.resume
    return cfg


def resumed_algo_override(overrides: list[str]) -> tuple[list[str], str | None]:
    """`resume=DIR` without `algo=`: Hydra composes the `algo` section with the saved run's preset, so that
    the run's family schema takes its `algo.KEY=` overrides (the resumed config keeps the saved values;
    this added override is not passed on to `resumed_config`). Returns the overrides and the one added."""
    resume = next((o.split("=", 1)[1] for o in overrides if o.startswith("resume=")), None)
    if not resume or any(o.split("=", 1)[0].lstrip("+~") == "algo" for o in overrides):
        return overrides, None
    saved = Path(resume) / "config.yaml"
    name = OmegaConf.select(OmegaConf.load(saved), "algo.name") if saved.is_file() else None
    if name is None:
        return overrides, None
    return [*overrides, f"algo={name}"], f"algo={name}"


def _schema_for(saved: DictConfig) -> DictConfig:
    """RunConfig with the saved algorithm's family schema as `algo` (trainer/algo_keys.py). A run saved
    before the schemas were split holds every family's keys; those of other families, which its algorithm
    never read (validation refused them away from their defaults), are dropped from `saved`, and a key
    saved under its old name (config.RENAMED_KEYS) moves to its new one."""
    from rlvr.trainer.algo_keys import schema_of

    for old, new in RENAMED_KEYS.items():  # a run saved before the rename: its value (null too) under the new name
        section, old_key = old.rsplit(".", 1)
        parent = OmegaConf.select(saved, section, default=None)
        if isinstance(parent, DictConfig) and old_key in parent:
            value = OmegaConf.to_container(parent, resolve=False)[old_key]
            del parent[old_key]
            OmegaConf.update(saved, new, value)
    schema = OmegaConf.structured(RunConfig)
    name = OmegaConf.select(saved, "algo.name")
    if name is None:
        return schema
    family = schema_of(str(name))
    schema.algo = OmegaConf.structured(family)
    for key in [k for k in saved.algo if k not in schema.algo]:
        del saved.algo[key]
    return schema


def _preset_keys(group: str, option) -> dict:
    """The keys conf/GROUP/OPTION.yaml sets (Hydra composed the same file, so it exists)."""
    from importlib.resources import files

    return OmegaConf.to_container(OmegaConf.load(str(files("rlvr.conf") / group / f"{option}.yaml")))
