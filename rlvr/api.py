"""`rlvr.train(...)` and `rlvr.evaluate(...)`: the commands `rlvr train` and `rlvr eval` as Python functions, for
notebooks and scripts.

    import rlvr
    from my_rewards import accuracy       # def accuracy(completions, solution, **kwargs) -> list[float]

    run = rlvr.train("env=dataset", "env.train_file=data.jsonl", reward_funcs=[accuracy], train={"steps": 50})
    rlvr.evaluate("env=dataset", "env.train_file=data.jsonl", model=run, reward_funcs=[accuracy])

Arguments, in the command's terms (the same config, checks and one-line errors):
- positional: Hydra overrides as on the command line (`"env=dataset"`, `"train.steps=2"`), or lists of them;
- keywords: config keys as Python values. A mapping is spread over its keys (`train={"steps": 2}` is
  `train.steps=2`; `env={"columns": {"answer": "solution"}}` is `env.columns.answer=solution`); a config group
  (train: algo, env, model, rollout, reward; eval: env, rollout) takes its option as a string (`env="dataset"`) or
  as the mapping's `name` (`env={"name": "dataset", "train_file": "data.jsonl"}`); lists, strings and numbers are
  set as they are. A function anywhere in a value stands for its "module:function" path.
- `reward_funcs`: TRL's argument: functions (or "module:function" strings) with TRL's reward signature, the
  environment's reward in place of its default (`env.reward=[{verifier: python, params: {function: ...}}, ...]`,
  verifiers/python/verifier.py), weighted by `reward_weights` (default 1 each). They run in worker processes, which
  import them by name, so each must live in an importable module, not in the notebook or the `__main__` script.
- `peft_config` (train): TRL's GRPOTrainer argument: a `peft.LoraConfig` (or a dict of its fields), passed to peft
  as it is (DoRA, modules_to_save, ...) as `model.lora.peft` (trainer/models/lora.py: its fields that differ from
  `LoraConfig()`'s; a field also set by a short `model.lora.*` key is refused naming both).
- `trl_config` (train): a `trl.GRPOConfig`, a dict of its fields or a YAML file of them, each field set translated
  into rlvr's keys and every one it cannot honour refused by name (trainer/trl_keys.py, docs/training/from-trl.md).

`train` returns a `TrainResult` (the run directory, its last checkpoint, summary.json, metrics.jsonl);
`evaluate` returns what `rlvr eval` writes to results.json (per model and environment: pass@k, maj@k, mean
reward, status counts). A bad config raises `rlvr.errors.ConfigError` with the command's one-line message.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.errors import ConfigError
from rlvr.trainer.override_text import function_path, override_value  # noqa: F401 - api's own names

TRAIN_GROUPS = ("algo", "env", "model", "rollout", "reward", "train")  # train="fast": conf/train/fast.yaml
EVAL_GROUPS = ("env", "rollout")


@dataclass(frozen=True)
class TrainResult:
    """What a training run left: `run_dir`; `checkpoint`, its last checkpoints/step_N (a Hugging Face model
    directory, None when none was saved); `summary` (summary.json: held-out accuracy and reward before and
    after); `metrics` (metrics.jsonl, one dict per logged step)."""

    run_dir: Path
    checkpoint: Path | None
    summary: dict
    metrics: list[dict]


def train(*overrides: str | Sequence[str], reward_funcs: Sequence[Callable | str] | None = None,
          reward_weights: Sequence[float] | None = None, log: Callable[..., None] | None = None,
          callbacks: Sequence[Any] | None = None, train_dataset: Any = None, eval_dataset: Any = None,
          trl_config: Any = None, peft_config: Any = None, **config: Any) -> TrainResult:
    """`rlvr train` with these overrides (see the module docstring); `log` receives the run's log lines
    (default: printed, and appended to RUN_DIR/train.log as the command does); `callbacks`: objects with
    `on_step`, `on_eval` and/or `on_end` methods, called by the loop, any of the first two able to stop the run
    by returning True (trainer/callbacks.py); `train_dataset` / `eval_dataset`: rows in memory (a
    `datasets.Dataset` or a list of dicts) for env=dataset, saved into the run directory (trainer/data_args.py)."""
    from rlvr.trainer.data_args import InMemoryData
    from rlvr.trainer.checkpoint import latest_checkpoint
    from rlvr.trainer.run import train as run_training
    from rlvr.trainer.run_dir import log_stop, stop_line, tee_log

    # trl_config: a trl.GRPOConfig, a dict of its fields or a YAML of them (trainer/trl_keys.py,
    # docs/training/from-trl.md); the overrides and keywords given here win over what it translates
    args = to_overrides(overrides, config, TRAIN_GROUPS)
    if trl_config is not None:
        from rlvr.trainer.trl_keys import translate

        translated = translate(trl_config)
        given = {o.lstrip("+~").split("=", 1)[0] for o in args}
        args = [o for o in translated.overrides if o.split("=", 1)[0] not in given] + args
        if reward_weights is None:  # the config's weights weigh reward_funcs (refused without them)
            reward_weights = translated.reward_weights
    args += reward_override(reward_funcs, reward_weights)
    args += peft_override(peft_config, args)
    data = InMemoryData(train_dataset, eval_dataset)
    if data.rows:  # the rows become the env's data files in the run directory
        args = data.env_override(args) + args
        args += data.overrides(train_config(args))
    cfg = train_config(args)
    if data.rows:
        data.check_and_save(cfg)
    run_dir = Path(cfg.resume or cfg.output_dir).resolve()  # absolute: a notebook may change directory later
    try:
        summary = run_training(cfg, log=log or tee_log(run_dir / "train.log"), callbacks=callbacks)
    except (Exception, KeyboardInterrupt) as error:
        if log is None:  # the run's train.log ends with why it stopped, as the command's does
            log_stop(run_dir / "train.log", stop_line(cfg, error, error.__traceback__))
        raise
    metrics_path = run_dir / "metrics.jsonl"
    metrics = [json.loads(line) for line in metrics_path.read_text().splitlines()] if metrics_path.exists() else []
    return TrainResult(run_dir, latest_checkpoint(run_dir), summary, metrics)


def evaluate(*overrides: str | Sequence[str], model: str | os.PathLike | TrainResult | Mapping | None = None,
             reward_funcs: Sequence[Callable | str] | None = None, reward_weights: Sequence[float] | None = None,
             log: Callable[..., None] = print, **config: Any) -> dict:
    """`rlvr eval` with these overrides (see the module docstring); `model` is a checkpoint directory or Hub name,
    or a `TrainResult` (its last checkpoint). Returns the content of results.json."""
    from rlvr.cli import _check_overrides
    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry
    from rlvr.envs.vf.env import expand_override
    from rlvr.trainer.evaluation.eval_config import compose_eval_config, register_eval_schema
    from rlvr.trainer.evaluation.eval_run import run_eval

    if isinstance(model, TrainResult):
        if model.checkpoint is None:
            raise ConfigError(f"model: the run {model.run_dir} saved no checkpoint to evaluate")
        model = model.checkpoint
    if isinstance(model, (str, os.PathLike)):
        config["model"] = {"name_or_path": os.fspath(model)}
    elif model is not None:
        config["model"] = model
    args = to_overrides(overrides, config, EVAL_GROUPS) + reward_override(reward_funcs, reward_weights)
    register_eval_schema()
    from hydra.core.config_store import ConfigStore

    offer_plugin_envs(ConfigStore.instance(), env_registry)
    args = expand_override(args)
    with command_errors("eval"):
        _check_overrides("eval", _task(args))
    cfg = compose_eval_config(_task(args))
    cfg.output_dir = str(cfg.output_dir)  # ${now:...} read once
    return run_eval(cfg, log=log, overrides=_task(args))


def train_config(args: list[str]):
    """The config `rlvr train ARGS` runs, with the command's checks (a ConfigError for what it refuses)."""
    from hydra import compose, initialize_config_module
    from hydra.core.config_store import ConfigStore

    from rlvr.cli import _check_overrides
    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry
    from rlvr.envs.vf.env import expand_override
    from rlvr.trainer.algo_keys import refuse_foreign_overrides
    from rlvr.trainer.config import refuse_renamed_keys, register_schemas
    from rlvr.trainer.resume_config import resumed_algo_override, resumed_config
    from rlvr.trainer.run_dir import settle_run_dir

    register_schemas()
    offer_plugin_envs(ConfigStore.instance(), env_registry)
    args = expand_override(args)  # env=vf:NAME
    with command_errors("train"):
        args = settle_run_dir(args)  # resume=DIR trains there; an output_dir holding a run is refused
        args, resumed_algo = resumed_algo_override(args)
        refuse_renamed_keys(args)
        refuse_foreign_overrides(args)
        _check_overrides("train", _task(args))
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        cfg = compose(config_name="train", overrides=_task(args))
    cfg.output_dir = str(cfg.output_dir)  # ${now:...} read once: the run directory does not move during the run
    if cfg.resume:
        cfg = resumed_config(cfg, [o for o in _task(args) if o != resumed_algo])
    return cfg


@contextmanager
def command_errors(command: str) -> Iterator[None]:
    """The command's one-line refusals (SystemExit("rlvr COMMAND: ...")) as ConfigError, for a Python caller."""
    try:
        yield
    except SystemExit as error:
        message = str(error.code) if error.code is not None else f"rlvr {command} stopped"
        raise ConfigError(message.removeprefix(f"rlvr {command}: ")) from None


def _task(args: list[str]) -> list[str]:
    """The overrides of the config itself (the command line's `hydra.*` ones set Hydra's run directory)."""
    return [o for o in args if not o.lstrip("+~").startswith("hydra")]


def to_overrides(positional: Sequence[str | Sequence[str]], config: Mapping[str, Any],
                 groups: Sequence[str]) -> list[str]:
    """Hydra override strings from positional overrides and keyword config (see the module docstring)."""
    out: list[str] = []
    for arg in positional:
        items = [arg] if isinstance(arg, str) else list(arg) if isinstance(arg, (list, tuple)) else None
        if items is None or not all(isinstance(o, str) for o in items):
            raise TypeError(f"overrides are strings such as 'train.steps=2' (or lists of them), got {arg!r}; "
                            f"give config values as keywords: train={{'steps': 2}}")
        out += items
    for key, value in config.items():
        if key in groups and isinstance(value, str):
            out.append(f"{key}={value}")
            continue
        if key in groups and isinstance(value, Mapping) and "name" in value:
            out.append(f"{key}={value['name']}")
            value = {k: v for k, v in value.items() if k != "name"}
        out += _flatten(key, value)
    return out


def _flatten(key: str, value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [o for k, v in value.items() for o in _flatten(f"{key}.{k}", v)]
    return [f"{key}={override_value(value)}"]


def peft_override(peft_config: Any, args: list[str]) -> list[str]:
    """`model.lora.peft={...}` for rlvr.train's `peft_config`; refused beside a `model.lora.peft` override."""
    if peft_config is None:
        return []
    from rlvr.trainer.models.lora import from_peft_config

    if any(o.lstrip("+~").split("=", 1)[0].startswith("model.lora.peft") for o in args):
        raise ConfigError("peft_config and model.lora.peft both given: keep one")
    return [f"model.lora.peft={override_value(from_peft_config(peft_config))}"]


def reward_override(reward_funcs: Sequence[Callable | str] | None, reward_weights: Sequence[float] | None) -> list[str]:
    """`env.reward=[...]`: each function as a `python` reward component (TRL's `reward_funcs`, `reward_weights`)."""
    if reward_funcs is None:
        if reward_weights is not None:
            raise ConfigError("reward_weights without reward_funcs: give the functions they weigh")
        return []
    if callable(reward_funcs) or isinstance(reward_funcs, str):
        reward_funcs = [reward_funcs]
    if not reward_funcs:
        raise ConfigError("reward_funcs is empty: give at least one function, or leave it out for the env's reward")
    weights = [1.0] * len(reward_funcs) if reward_weights is None else list(reward_weights)
    if len(weights) != len(reward_funcs):
        raise ConfigError(f"reward_weights has {len(weights)} weights for {len(reward_funcs)} reward_funcs")
    spec = [{"verifier": "python", "weight": w, "params": {"function": function_path(f)}}
            for f, w in zip(reward_funcs, weights)]
    return [f"env.reward={override_value(spec)}"]
