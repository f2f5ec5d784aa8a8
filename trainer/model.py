"""Loading the policy, its tokenizer and the frozen reference model."""

from __future__ import annotations

import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from rlvr.verifiers.registry import ConfigError

hf_logging.disable_progress_bar()  # one bar per run is ours; per-file loading bars are noise


def resolve_model_path(cfg, env, log=print) -> str:
    """`model.name_or_path` when given (a local HF directory or a Hub name), else the built tiny model."""
    if cfg.model.name_or_path:
        return str(cfg.model.name_or_path)
    if cfg.model.name != "tiny":
        raise ConfigError(f"model.name_or_path is required for model={cfg.model.name!r} (a local directory or Hub name)")
    from rlvr.trainer.tiny_model import build_tiny

    env_config = OmegaConf.to_container(cfg.env, resolve=True)
    arch = OmegaConf.to_container(cfg.model.arch, resolve=True)
    warm = OmegaConf.to_container(cfg.model.warm_start, resolve=True)
    return str(build_tiny(env, env_config, arch, warm, seed=cfg.seed, log=log))


def load_tokenizer(path: str):
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(path: str):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train()
    return model


def load_reference(path: str):
    """A frozen copy of the starting policy for the KL term (never trained, never saved)."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    model.requires_grad_(False)
    return model
