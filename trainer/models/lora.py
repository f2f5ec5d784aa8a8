"""LoRA (Hu et al., 2021) through peft: `model.lora.r > 0` trains low-rank adapters, the base stays frozen.

    W x  ->  W x + (alpha / r) B A x,   A [r, in], B [out, r], B = 0 at start (so step 0 is the base model)

  * The reference for the KL term is the same model with its adapters disabled
    (`AdaptersOff`, peft's `disable_adapter()` context): the frozen base, with no second copy in memory.
  * Checkpoints hold the MERGED model (W + (alpha / r) B A) in plain Hugging Face format, so
    `rlvr eval` and vLLM load them as any other model, plus the adapter in peft's format under
    `adapter/`, which a resumed run loads onto the base model (`model.name_or_path` or the tiny
    model): merging on a copy keeps the training model's base weights exact.
  * An engine that copies weights (vLLM) starts from, and is synced with, the merged model
    (`for_engine`, applied by trainer/rollout/weights.py); Hugging Face generate samples from the
    adapter model directly. With `rollout.vllm.lora_sync=adapter` vLLM is handed the adapter model
    itself: it keeps the frozen base weights it started from and loads only the adapter at each
    sync (rollout/vllm.py; vLLM's LoRA support). Merged stays the default: BENCHMARKS.md
    ("LoRA sync") measures both.
  * Defaults: r = 0 (LoRA off; `model.lora.r=16` is a usual start), alpha = 32 (alpha / r = 2 at
    r = 16, as in common QLoRA / TRL recipes; the LoRA paper sets alpha to the first r it tries
    and does not tune it), dropout 0 (the paper uses
    none for GPT-3; dropout would make the trainer's logprobs disagree with the sampler's), and
    every linear projection of attention and MLP (peft's "all-linear": all but the output head;
    the paper adapted only W_q and W_v, QLoRA found all linear layers necessary to match full fine-tuning).
  * trainer.strategy=fsdp2 with LoRA is refused (trainer/validate.py); none and ddp work.
  * `model.lora.peft` (rlvr.train's `peft_config`, TRL's GRPOTrainer argument) passes a `peft.LoraConfig`'s fields
    to peft as they are (DoRA, modules_to_save, rank_pattern, ...): `peft_fields` says how it sits beside the short
    keys. The merged checkpoint, the adapter and merged sync are peft's own for any of them (DoRA merges into W;
    a modules_to_save copy replaces its module); vLLM's adapter loading serves neither, so lora_sync=adapter
    refuses them (`adapter_sync_refusal`).
"""

from __future__ import annotations

import copy

import torch

from rlvr.errors import ConfigError

ADAPTER_DIR = "adapter"


def _peft():
    try:
        import peft
    except ImportError:
        raise ConfigError("model.lora.r > 0 needs peft, which is not installed: pip install 'rlvr[lora]'") from None
    return peft


# model.lora's short keys -> the peft.LoraConfig field each sets, with the short key's default (trainer/config.py)
SHORT_KEYS = {"r": ("r", 0), "alpha": ("lora_alpha", 32.0), "dropout": ("lora_dropout", 0.0),
              "target_modules": ("target_modules", ["all-linear"])}
# what vLLM's LoRA loading cannot serve (rollout.vllm.lora_sync=adapter): its LoRA layers have no magnitude
# vector (DoRA) and take no full modules beside the adapters
_NOT_VLLM_ADAPTER = ("use_dora", "modules_to_save")


def lora_on(lora_cfg) -> bool:
    """LoRA trains: `model.lora.r > 0`, or a peft config passed through (`model.lora.peft`)."""
    return lora_cfg.r > 0 or bool(lora_cfg.get("peft"))


def peft_fields(lora_cfg) -> dict:
    """The `peft.LoraConfig` keyword arguments of `model.lora`. Without `model.lora.peft`: the short keys (with
    rlvr's defaults, module docstring). With it: its fields as they are (peft's defaults for the rest, as TRL's
    `peft_config`), plus each short key set off its default; a field set both ways is a ConfigError naming both.
    task_type is CAUSAL_LM unless given (rlvr trains causal LMs; peft then wraps the model for generation)."""
    given = lora_cfg.get("peft")
    if not given:
        fields = {field: _plain(lora_cfg[key]) for key, (field, _) in SHORT_KEYS.items()}
    else:
        from omegaconf import DictConfig, OmegaConf

        if not isinstance(given, (dict, DictConfig)):
            raise ConfigError(f"model.lora.peft: a mapping of peft.LoraConfig fields, got {given!r}")
        fields = OmegaConf.to_container(given, resolve=True) if isinstance(given, DictConfig) else dict(given)
        for key, (field, default) in SHORT_KEYS.items():
            value = _plain(lora_cfg[key])
            if value == default:
                continue
            if field in fields:
                raise ConfigError(f"model.lora.{key}={value!r} and model.lora.peft.{field}={fields[field]!r} set "
                                  f"the same peft field: keep one")
            fields[field] = value
    if fields.get("target_modules") == ["all-linear"]:  # peft takes the shorthand as a string only
        fields["target_modules"] = "all-linear"
    fields.setdefault("task_type", "CAUSAL_LM")
    return fields


def _plain(value):
    from omegaconf import ListConfig

    return list(value) if isinstance(value, (list, ListConfig)) else value


def peft_config(lora_cfg):
    """The `peft.LoraConfig` `model.lora` asks for; a field peft does not know, or a value it refuses, is a
    ConfigError naming model.lora.peft and peft's reason."""
    peft, fields = _peft(), peft_fields(lora_cfg)
    try:
        return peft.LoraConfig(**fields)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"model.lora.peft: peft.LoraConfig refuses {fields}: {error}") from None


def adapter_sync_refusal(lora_cfg) -> str | None:
    """Why rollout.vllm.lora_sync=adapter cannot serve this adapter (None: it can)."""
    fields = peft_fields(lora_cfg)
    used = [name for name in _NOT_VLLM_ADAPTER if fields.get(name)]
    return (f"rollout.vllm.lora_sync=adapter: vLLM loads plain LoRA adapters, not model.lora.peft's "
            f"{', '.join(used)}; use lora_sync=merged") if used else None


def from_peft_config(config) -> dict:
    """A `peft.LoraConfig` (rlvr.train's `peft_config`, as TRL's GRPOTrainer takes it) as `model.lora.peft`'s
    mapping: the fields that differ from `LoraConfig()`'s, in plain values (an enum by its value, a set sorted)."""
    import dataclasses
    import enum

    if isinstance(config, dict):
        return dict(config)
    peft = _peft()
    if not isinstance(config, peft.LoraConfig):
        raise ConfigError(f"peft_config: a peft.LoraConfig or a dict of its fields, got {type(config).__name__}")

    def plain(value):
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, (set, frozenset)):
            return sorted(value)
        if dataclasses.is_dataclass(value):
            return dataclasses.asdict(value)
        return value

    default = type(config)()
    return {f.name: plain(getattr(config, f.name)) for f in dataclasses.fields(config)
            if f.init and plain(getattr(config, f.name)) != plain(getattr(default, f.name))}


def add_adapters(model, lora_cfg):
    """The policy wrapped with fresh LoRA adapters (only they require grad, with modules_to_save's copies)."""
    return _peft().get_peft_model(model, peft_config(lora_cfg))


def load_adapters(model, adapter_dir):
    """The policy with the adapters a checkpoint saved, trainable (resume)."""
    policy = _peft().PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=True)
    for config in policy.peft_config.values():  # the checkpoint wrote its base as a token (trainer/share_paths.py)
        config.base_model_name_or_path = model.name_or_path  # this machine's, which peft's save reads again
    return policy


def is_lora(model) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "merge_and_unload")


def merged_copy(model) -> torch.nn.Module:
    """A plain Hugging Face model with W + (alpha / r) B A, built on a copy (the policy keeps its adapters)."""
    return copy.deepcopy(model).merge_and_unload()


class AdaptersOff(torch.nn.Module):
    """The reference model: the policy's forward with adapters disabled (the base weights, shared, not copied)."""

    def __init__(self, policy):
        super().__init__()
        self._policy = [policy]  # a list, so the policy is not a submodule: its parameters stay the policy's

    @property
    def device(self) -> torch.device:
        return next(self._policy[0].parameters()).device

    def forward(self, *args, **kwargs):
        policy = self._policy[0]
        with policy.disable_adapter():
            return policy(*args, **kwargs)


def engine_weights(unwrap, copies_weights: bool, adapter_sync: bool, policy):
    """What the engine's `sync_weights` is handed for the trained `policy` (setup.py binds the first three with
    functools.partial): its plain HF module (`unwrap`: DDP's or FSDP2's wrapper off), through `for_engine`."""
    return for_engine(unwrap(policy), copies_weights, adapter_sync)


def for_engine(model, copies_weights: bool, adapter_sync: bool = False):
    """The module an engine is handed: for an adapter model and an engine that copies weights (vLLM),
    the merged model, built on a copy, or with `adapter_sync` (rollout.vllm.lora_sync=adapter) the adapter
    model itself, whose adapter the engine loads; else `model` itself (HF generate samples from the
    adapter model)."""
    if not (copies_weights and is_lora(model)):
        return model
    return model if adapter_sync else merged_copy(model)
