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


def add_adapters(model, lora_cfg):
    """The policy wrapped with fresh LoRA adapters (only they require grad)."""
    peft = _peft()
    targets = list(lora_cfg.target_modules)
    config = peft.LoraConfig(r=lora_cfg.r, lora_alpha=lora_cfg.alpha, lora_dropout=lora_cfg.dropout,
                             target_modules=targets[0] if targets == ["all-linear"] else targets,
                             task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


def load_adapters(model, adapter_dir):
    """The policy with the adapters a checkpoint saved, trainable (resume)."""
    return _peft().PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=True)


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
