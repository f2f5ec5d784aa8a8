"""Loading the policy (full or LoRA; gradient checkpointing, bf16 autocast), its tokenizer and the frozen reference."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from rlvr.errors import ConfigError

hf_logging.disable_progress_bar()  # one bar per run is ours; per-file loading bars are noise


def resolve_model_path(cfg, env, log=print) -> str:
    """`model.name_or_path` when given (a local HF directory or a Hub name; a `.gguf` file or a packaged model
    such as `smollm2`, converted once into the cache), else the built tiny model."""
    if cfg.model.name_or_path:
        from rlvr.trainer.models.gguf_import import resolve_gguf

        return resolve_gguf(str(cfg.model.name_or_path), log=log)
    if cfg.model.name != "tiny":
        raise ConfigError(f"model.name_or_path is required for model={cfg.model.name!r} (a local directory or Hub name)")
    from rlvr.trainer.models.tiny_model import build_tiny

    env_config = OmegaConf.to_container(cfg.env, resolve=True)
    arch = OmegaConf.to_container(cfg.model.arch, resolve=True)
    warm = OmegaConf.to_container(cfg.model.warm_start, resolve=True)
    return str(build_tiny(env, env_config, arch, warm, seed=cfg.seed, log=log))


def resumed_base_path(cfg, env, recorded: str | None, log=print) -> str:
    """The base model of a resumed run (LoRA's base weights, the reference): the one its checkpoint recorded
    while that still exists, so a tiny model or GGUF conversion cached by older code stays the run's base; else
    resolved again, which rebuilds a cached model that is gone."""
    if recorded and Path(recorded).is_dir():
        return recorded
    path = resolve_model_path(cfg, env, log=log)
    if recorded and path != recorded:  # another cache key: the code or libraries that build it changed
        log(f"the run's base model {recorded} is gone; using {path} in its place, built by this rlvr, whose weights "
            f"may differ from the run's start (LoRA's base weights and the KL reference come from it)")
    return path


# model.prompt_format=plain: each message's content, then a blank line; generation continues from there
PLAIN_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n\n{% endfor %}"


def load_tokenizer(path: str, chat: bool = False, prompt_format: str = "chat"):
    """The tokenizer at `path` (a pad token set); `chat=True` also requires a chat template (rlvr train's prompts)
    unless `prompt_format="plain"`, which sets `PLAIN_TEMPLATE` in its place (saved with each checkpoint).
    A path that does not load is a one-line ConfigError naming `model.name_or_path`."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as error:  # no such directory / not a repo id / no tokenizer files
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"model.name_or_path={path}: cannot load a tokenizer ({reason}); give a local Hugging "
                          f"Face model directory or a Hub name") from None
    if chat and prompt_format == "plain":
        tokenizer.chat_template = PLAIN_TEMPLATE
    elif chat and tokenizer.chat_template is None:
        raise ConfigError(f"model.name_or_path={path}: its tokenizer has no chat template, and rlvr renders each "
                          f"prompt as chat messages; for a base model pass model.prompt_format=plain (prompts as "
                          f"plain text), or use an instruct/chat model")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(path: str):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train()
    return model


def build_policy(model_cfg, base_path: str | None, checkpoint=None, seed: int = 0):
    """The policy to train: the checkpoint's weights (resume; `base_path` may then be None) or the base model's;
    with `model.lora.r > 0` the base model plus LoRA adapters, fresh (initialised from `seed`) or the
    checkpoint's `adapter/`."""
    from rlvr.trainer.models.lora import lora_on

    lora = lora_on(model_cfg.lora)
    model = load_policy(base_path if lora or not checkpoint else str(checkpoint))
    if model_cfg.gradient_checkpointing:  # on the base model, before peft wraps it
        _checkpoint_activations(model)
    if model_cfg.autocast == "bf16":
        autocast_forward(model)
    if not lora:
        return model
    from rlvr.trainer.models.lora import ADAPTER_DIR, add_adapters, load_adapters

    if checkpoint:
        return load_adapters(model, checkpoint / ADAPTER_DIR)
    with torch.random.fork_rng():  # A's random init, reproducible and without moving the run's RNG
        torch.manual_seed(seed)
        return add_adapters(model, model_cfg.lora)


def _checkpoint_activations(model) -> None:
    """Non-reentrant checkpointing (torch's recommended mode; the reentrant one needs inputs that require grad)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def build_reference(policy, base_path: str):
    """The frozen reference: with LoRA the policy with adapters disabled (no copy), else a copy of the base model."""
    from rlvr.trainer.models.lora import AdaptersOff, is_lora

    if is_lora(policy):
        return AdaptersOff(policy)
    reference = load_reference(base_path)
    if hasattr(policy, "_autocast_device"):  # model.autocast: the reference computes as the policy does
        autocast_forward(reference)
    return reference


def load_reference(path: str):
    """A frozen copy of the starting policy for the KL term (never trained, never saved)."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    model.requires_grad_(False)
    return model


def autocast_forward(model) -> None:
    """Every forward of `model` (training, logprobs, HF generate) under torch.autocast(bfloat16) on the
    device its weights live on; weights, gradients and AdamW state stay float32 (mixed precision).
    Hooks rather than a wrapped `forward`, so copies (FSDP2's generation copy, LoRA's merge) carry their own."""
    model._autocast_device = next(model.parameters()).device.type
    model._autocast_stack = []
    model.register_forward_pre_hook(_enter_autocast)
    model.register_forward_hook(_exit_autocast, always_call=True)


@contextlib.contextmanager
def autocast_paused(model):
    """Inside the block, `model`'s forwards run in float32 as its saved weights do (`rlvr eval` of the checkpoint),
    bf16 autocast hooks or not; a no-op for a model without them. LoRA's wrapper holds the hooked model inside."""
    hooked = {module: getattr(module, "_autocast_paused", False) for module in model.modules()
              if hasattr(module, "_autocast_stack")}
    for module in hooked:
        module._autocast_paused = True
    try:
        yield
    finally:  # as it was before the block, so a block inside another one leaves the outer pause on
        for module, paused in hooked.items():
            module._autocast_paused = paused


def _enter_autocast(module, args):
    module._autocast_device = next(module.parameters()).device.type  # train.device may have moved it since
    context = torch.autocast(module._autocast_device, dtype=torch.bfloat16,
                             enabled=not getattr(module, "_autocast_paused", False))
    context.__enter__()
    module._autocast_stack.append(context)


def _exit_autocast(module, args, output):
    module._autocast_stack.pop().__exit__(None, None, None)
