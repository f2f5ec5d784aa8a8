"""TRL's `GRPOConfig` in rlvr's keys: the map a `GRPOTrainer` script ports by, and the translation
`rlvr.train(trl_config=...)` runs (docs/training/from-trl.md renders its table from `ROWS` and `REFUSED`).

Written against TRL 1.16's `trl.GRPOConfig` (trl/trainer/grpo_config.py; its field docs give the semantics used
here). Only the fields a user set are translated: a dict or YAML gives them by name; a `GRPOConfig` object, by each
field that differs from a `GRPOConfig` built with the same `output_dir` and `use_cpu` (so what TRL's
`__post_init__` derives, bf16 or `generation_batch_size`, is not mistaken for a choice). A field left at TRL's
default takes rlvr's default, which differs for some (docs/training/from-trl.md lists them). A set field rlvr cannot
honour is refused: one ConfigError names every such field and why.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.errors import ConfigError
from rlvr.trainer.override_text import override_value


@dataclass(frozen=True)
class Row:
    """One line of the map: TRL fields, the rlvr keys they become, and how."""

    trl: tuple[str, ...]
    rlvr: str
    how: str


# TRL's batch fields, in completions: a generation batch is per_device_train_batch_size x processes x
# steps_per_generation completions (steps_per_generation defaults to gradient_accumulation_steps), i.e.
# generation_batch_size / num_generations prompts, and it makes one optimizer step when steps_per_generation equals
# gradient_accumulation_steps (grpo_config.py __post_init__). rlvr counts prompts per optimizer step.
_BATCH = ("num_generations", "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
          "generation_batch_size")
_LOSS_TYPES = {"grpo": "seq_mean_token_mean", "dapo": "token_mean", "bnpo": "token_mean",
               "dr_grpo": "seq_mean_token_sum_norm"}
_SCALE_REWARDS = {"group": True, True: True, "none": False, False: False}
_SCHEDULES = ("constant", "linear", "cosine")

ROWS: tuple[Row, ...] = (
    Row(_BATCH, "train.completions_per_prompt, train.prompts_per_step, train.micro_batch_size",
        "completions_per_prompt = num_generations; prompts_per_step = per_device_train_batch_size x "
        "gradient_accumulation_steps / num_generations (one process); micro_batch_size = "
        "per_device_train_batch_size. steps_per_generation (or generation_batch_size) other than "
        "gradient_accumulation_steps is refused: rlvr takes one optimizer step per generation batch"),
    Row(("max_completion_length",), "rollout.max_new_tokens", "as is"),
    Row(("beta",), "algo.beta", "as is (0 loads no reference model, as in TRL)"),
    Row(("epsilon", "epsilon_high"), "algo.clip_eps_low, algo.clip_eps_high",
        "clip_eps_low = epsilon; clip_eps_high = epsilon_high, or epsilon when that is None"),
    Row(("loss_type",), "algo.aggregation",
        "grpo: seq_mean_token_mean; dapo, bnpo: token_mean (the same at one process); dr_grpo: "
        "seq_mean_token_sum_norm; cispo, sapo, luspo, vespo are refused"),
    Row(("scale_rewards",), "algo.scale_advantages_by_std", "group or True: true; none or False: false; "
        "batch is refused (rlvr scales by each group's std)"),
    Row(("num_iterations",), "algo.mu", "as is (updates per generation batch)"),
    Row(("importance_sampling_level",), "algo.importance_level", "token | sequence (GSPO)"),
    Row(("temperature",), "rollout.temperature", "as is"),
    Row(("top_p",), "rollout.top_p", "as is"),
    Row(("top_k",), "rollout.top_k", "as is (0: off in both)"),
    Row(("min_p",), "rollout.min_p", "as is (None: 0, off)"),
    Row(("repetition_penalty",), "rollout.repetition_penalty", "as is (1: off in both)"),
    Row(("generation_kwargs",), "rollout.generation_kwargs",
        "as is: the engine's own keys (GenerationConfig's with rollout=hf, SamplingParams' with vllm); a key rlvr "
        "sets itself (temperature, top_p, max_tokens, ...) is refused at start: TRL lets it override those"),
    Row(("use_vllm", "vllm_mode"), "rollout",
        "use_vllm with vllm_mode colocate: rollout=vllm; with server: rollout=server (rlvr starts `vllm serve`); "
        "vllm_mode alone changes nothing, as in TRL"),
    Row(("vllm_gpu_memory_utilization",), "rollout.vllm.gpu_memory_utilization", "as is, with use_vllm"),
    Row(("vllm_tensor_parallel_size",), "rollout.vllm.tensor_parallel_size", "as is, with use_vllm"),
    Row(("vllm_enable_sleep_mode",), "rollout.vllm.enable_sleep_mode", "as is, with use_vllm"),
    Row(("vllm_importance_sampling_correction",), "rollout.importance_cap", "False: null (no correction)"),
    Row(("reward_weights",), "rlvr.train(reward_weights=...)", "the weights of reward_funcs, as in TRL"),
    Row(("learning_rate",), "optim.lr", "as is"),
    Row(("weight_decay",), "optim.weight_decay", "as is"),
    Row(("adam_beta1", "adam_beta2"), "optim.betas", "[adam_beta1, adam_beta2]"),
    Row(("max_grad_norm",), "optim.max_grad_norm", "as is"),
    Row(("warmup_steps",), "optim.warmup_steps", "whole steps; a ratio (a number below 1) is refused"),
    Row(("lr_scheduler_type",), "optim.schedule", "constant | linear | cosine; others refused"),
    Row(("max_steps",), "train.steps", "as is (above 0)"),
    Row(("save_steps",), "train.save_every", "whole steps; a ratio is refused"),
    Row(("eval_steps",), "train.eval_every", "whole steps; a ratio is refused"),
    Row(("seed",), "seed", "as is"),
    Row(("output_dir",), "output_dir", "as is"),
    Row(("use_cpu",), "train.device", "True: cpu"),
    Row(("gradient_checkpointing",), "model.gradient_checkpointing", "as is"),
    Row(("bf16",), "model.autocast", "True: bf16; False: none (weights stay float32 in rlvr)"),
    Row(("push_to_hub",), "train.push_to_hub",
        "as is: each checkpoint uploaded (TRL's default hub_strategy every_save), without trainer_state.pt"),
    Row(("hub_model_id",), "train.hub_model_id", "as is (None: the output directory's name, as in TRL)"),
    Row(("hub_private_repo",), "train.hub_private_repo", "as is"),
    Row(("hub_strategy",), "(none)", "every_save: rlvr's only strategy (no effect); others are refused"),
    Row(("logging_steps", "disable_tqdm", "log_completions"), "(none)",
        "accepted, no effect: rlvr logs every step to metrics.jsonl and samples to samples.jsonl"),
)

_GENERIC = "a Trainer or GRPOTrainer setting rlvr has no equivalent of"
# Why, for the fields a TRL user is most likely to set; every other set field gets _GENERIC.
REFUSED: dict[str, str] = {
    "mask_truncated_completions": "rlvr keeps a truncated completion in the loss and scores it by "
                                  "rollout.truncated_reward (zero: no positive reward)",
    "num_train_epochs": "rlvr counts optimizer steps: set max_steps",
    "fp16": "rlvr's autocast is bf16 or none (bf16=True)",
    "vllm_server_base_url": "rlvr's server engine speaks vLLM's OpenAI API, not `trl vllm-serve`: start "
                            "`vllm serve` and pass rollout.server.endpoints (docs/engines/server.md)",
    "vllm_server_host": "as vllm_server_base_url: pass rollout.server.endpoints",
    "vllm_server_port": "as vllm_server_base_url: pass rollout.server.endpoints",
    "model_init_kwargs": "rlvr loads the model itself (model.name_or_path, model.autocast)",
    "hub_token": "a token in the config would be written into config.yaml and every checkpoint: set HF_TOKEN "
                 "or run `hf auth login`",
    "report_to": "rlvr logs to metrics.jsonl, and to TensorBoard or W&B by its own logger keys",
    "eval_strategy": "rlvr evaluates every train.eval_every steps (eval_steps)",
    "save_strategy": "rlvr saves every train.save_every steps (save_steps)",
    "steps_per_generation": "rlvr takes one optimizer step per generation batch; num_iterations repeats updates",
    "generation_batch_size": "rlvr takes one optimizer step per generation batch; num_iterations repeats updates",
}


@dataclass(frozen=True)
class Translation:
    """What a GRPOConfig becomes: Hydra overrides, and `reward_weights` for rlvr.train (None: not set)."""

    overrides: list[str]
    reward_weights: list[float] | None


def _trl_fields() -> dict[str, dataclasses.Field]:
    """GRPOConfig's fields: their names check a dict's keys, their defaults fill what a dict leaves out."""
    try:
        from trl import GRPOConfig
    except ImportError:
        raise ConfigError("trl_config: reading a GRPOConfig needs TRL (pip install 'trl>=1.16,<1.17')") from None
    return {f.name: f for f in dataclasses.fields(GRPOConfig)}


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def set_fields(trl_config: Any) -> dict[str, Any]:
    """The fields a user set in a GRPOConfig, a dict of its fields, or a YAML file of them."""
    fields = _trl_fields()
    if isinstance(trl_config, (str, os.PathLike)):
        import yaml

        path = Path(trl_config)
        if not path.is_file():
            raise ConfigError(f"trl_config: no file {path}")
        trl_config = yaml.safe_load(path.read_text()) or {}
        if not isinstance(trl_config, Mapping):
            raise ConfigError(f"trl_config: {path} holds no mapping of GRPOConfig fields")
    if isinstance(trl_config, Mapping):
        unknown = sorted(k for k in trl_config if k not in fields)
        if unknown:
            raise ConfigError(f"trl_config: not GRPOConfig fields: {', '.join(unknown)}")
        return dict(trl_config)
    if not dataclasses.is_dataclass(trl_config) or not all(
            hasattr(trl_config, name) for name in fields):
        raise ConfigError(f"trl_config: a trl.GRPOConfig, a dict of its fields or a YAML path, "
                          f"got {type(trl_config).__name__}")
    try:  # the same __post_init__ with nothing else set: what it derives reads as unset
        reference = type(trl_config)(output_dir=trl_config.output_dir, use_cpu=trl_config.use_cpu)
        base = {name: getattr(reference, name) for name in fields}
    except Exception:  # noqa: BLE001 - a config TRL cannot build bare here: compare with the declared defaults
        base = {name: _default(f) for name, f in fields.items()}
    for name in ("output_dir", "use_cpu"):  # the reference shares them: read them against the declared default
        base[name] = _default(fields[name])
    return {name: getattr(trl_config, name) for name in fields if getattr(trl_config, name) != base[name]}


def translate(trl_config: Any) -> Translation:
    """The overrides for the fields set in `trl_config`; one ConfigError naming every field it refuses and why."""
    given = set_fields(trl_config)
    fields = _trl_fields()
    value = lambda name: given[name] if name in given else _default(fields[name])  # noqa: E731
    out: dict[str, Any] = {}
    refused: dict[str, str] = {}
    weights = None
    for name in given:
        if name not in _HANDLERS and name not in _BATCH and name not in _COMPANIONS:
            refused[name] = REFUSED.get(name, _GENERIC)
    if any(name in given for name in _BATCH):
        _batch(value, out, refused)
    for name, handler in _HANDLERS.items():
        if name in given or any(_COMPANIONS.get(field) == name for field in given):
            result = handler(value)
            if isinstance(result, str):
                refused[name] = result
            elif name == "reward_weights":
                weights = [float(w) for w in result]
            else:
                out.update(result)
    if refused:
        raise ConfigError("trl_config: rlvr cannot honour " + "; ".join(
            f"{name}={given.get(name)!r} ({why})" for name, why in sorted(refused.items())))
    overrides = [f"{key}={override_value(v)}" for key, v in out.items()]
    return Translation(sorted(overrides, key=lambda o: "." in o.split("=")[0]), weights)  # groups first


def _batch(value: Callable[[str], Any], out: dict, refused: dict) -> None:
    g, per_device, accumulation = (value("num_generations"), value("per_device_train_batch_size"),
                                   value("gradient_accumulation_steps"))
    per_generation, batch = value("steps_per_generation"), value("generation_batch_size")
    if per_generation is None:
        per_generation = batch // per_device if batch is not None else accumulation
    batch = per_device * per_generation if batch is None else batch
    if per_generation != accumulation:
        refused["steps_per_generation"] = REFUSED["steps_per_generation"]
    elif batch % g:
        refused["num_generations"] = f"the batch of {batch} completions is no whole number of groups of {g}"
    else:
        out.update({"train.completions_per_prompt": g, "train.prompts_per_step": batch // g,
                    "train.micro_batch_size": per_device})


def _whole(key: str, name: str) -> Callable:
    def handler(value):
        v = value(name)
        if isinstance(v, float) and 0 < v < 1:
            return "a ratio of the run: give whole steps"
        return {key: int(v)}
    return handler


def _vllm(value) -> dict | str:
    if not value("use_vllm"):
        return {}
    mode = value("vllm_mode")
    if mode not in ("colocate", "server"):
        return f"vllm_mode {mode!r} is not colocate or server"
    return {"rollout": "vllm" if mode == "colocate" else "server"}


def _only_with_vllm(key: str, name: str) -> Callable:
    return lambda value: {key: value(name)} if value("use_vllm") else {}


def _as_is(key: str, name: str) -> Callable:
    return lambda value: {key: value(name)}


_HANDLERS: dict[str, Callable[[Callable[[str], Any]], dict | str | list]] = {
    "max_completion_length": _as_is("rollout.max_new_tokens", "max_completion_length"),
    "beta": _as_is("algo.beta", "beta"),
    "epsilon": lambda v: {"algo.clip_eps_low": v("epsilon"),
                          "algo.clip_eps_high": v("epsilon") if v("epsilon_high") is None else v("epsilon_high")},
    "loss_type": lambda v: ({"algo.aggregation": _LOSS_TYPES[v("loss_type")]} if v("loss_type") in _LOSS_TYPES
                            else "rlvr aggregates as grpo, dapo, bnpo or dr_grpo"),
    "scale_rewards": lambda v: ({"algo.scale_advantages_by_std": _SCALE_REWARDS[v("scale_rewards")]}
                                if v("scale_rewards") in _SCALE_REWARDS else "rlvr scales by each group's std"),
    "num_iterations": _as_is("algo.mu", "num_iterations"),
    "importance_sampling_level": _as_is("algo.importance_level", "importance_sampling_level"),
    "temperature": _as_is("rollout.temperature", "temperature"),
    "top_p": _as_is("rollout.top_p", "top_p"),
    "top_k": lambda v: {"rollout.top_k": v("top_k") or 0},
    "min_p": lambda v: {"rollout.min_p": v("min_p") or 0.0},
    "repetition_penalty": _as_is("rollout.repetition_penalty", "repetition_penalty"),
    "generation_kwargs": lambda v: {"rollout.generation_kwargs": dict(v("generation_kwargs") or {})},
    "use_vllm": _vllm,
    "vllm_gpu_memory_utilization": _only_with_vllm("rollout.vllm.gpu_memory_utilization",
                                                   "vllm_gpu_memory_utilization"),
    "vllm_tensor_parallel_size": _only_with_vllm("rollout.vllm.tensor_parallel_size", "vllm_tensor_parallel_size"),
    "vllm_enable_sleep_mode": _only_with_vllm("rollout.vllm.enable_sleep_mode", "vllm_enable_sleep_mode"),
    "vllm_importance_sampling_correction": lambda v: {} if v("vllm_importance_sampling_correction")
                                           else {"rollout.importance_cap": None},
    "reward_weights": lambda v: list(v("reward_weights")),
    "learning_rate": _as_is("optim.lr", "learning_rate"),
    "weight_decay": _as_is("optim.weight_decay", "weight_decay"),
    "adam_beta1": lambda v: {"optim.betas": [v("adam_beta1"), v("adam_beta2")]},
    "max_grad_norm": _as_is("optim.max_grad_norm", "max_grad_norm"),
    "warmup_steps": _whole("optim.warmup_steps", "warmup_steps"),
    "lr_scheduler_type": lambda v: ({"optim.schedule": str(v("lr_scheduler_type")).split(".")[-1].lower()}
                                    if str(v("lr_scheduler_type")).split(".")[-1].lower() in _SCHEDULES
                                    else "rlvr's schedules are constant, linear, cosine"),
    "max_steps": lambda v: {"train.steps": v("max_steps")} if v("max_steps") > 0 else {},
    "save_steps": _whole("train.save_every", "save_steps"),
    "eval_steps": lambda v: {} if v("eval_steps") is None else _whole("train.eval_every", "eval_steps")(v),
    "seed": _as_is("seed", "seed"),
    "output_dir": lambda v: {} if v("output_dir") is None else {"output_dir": str(v("output_dir"))},
    "use_cpu": lambda v: {"train.device": "cpu"} if v("use_cpu") else {},
    "gradient_checkpointing": _as_is("model.gradient_checkpointing", "gradient_checkpointing"),
    "bf16": lambda v: {} if v("bf16") is None else {"model.autocast": "bf16" if v("bf16") else "none"},
    "push_to_hub": _as_is("train.push_to_hub", "push_to_hub"),
    "hub_model_id": lambda v: {} if v("hub_model_id") is None else {"train.hub_model_id": v("hub_model_id")},
    "hub_private_repo": lambda v: {} if v("hub_private_repo") is None else {"train.hub_private_repo":
                                                                            v("hub_private_repo")},
    "hub_strategy": lambda v: ({} if str(v("hub_strategy")).split(".")[-1].lower() == "every_save"
                               else "rlvr uploads at every save (every_save)"),
    "logging_steps": lambda v: {},
    "disable_tqdm": lambda v: {},
    "log_completions": lambda v: {},
}
# A field that only completes its row's first one (epsilon_high beside epsilon, adam_beta2, vllm_mode): setting it
# runs that field's handler, which reads both.
_COMPANIONS = {field: row.trl[0] for row in ROWS if row.trl[0] in _HANDLERS
               for field in row.trl[1:] if field not in _HANDLERS}


def markdown_table() -> str:
    """The map as docs/training/from-trl.md shows it: the translated fields, then the refusals with their reasons."""
    lines = ["| GRPOConfig | rlvr | how |", "|---|---|---|"]
    lines += [f"| {', '.join(f'`{n}`' for n in row.trl)} | `{row.rlvr}` | {row.how} |" for row in ROWS]
    lines += ["", "| refused GRPOConfig field | why |", "|---|---|"]
    lines += [f"| `{name}` | {why} |" for name, why in sorted(REFUSED.items())]
    lines += [f"| any other field, set | {_GENERIC} |"]
    return "\n".join(lines) + "\n"
