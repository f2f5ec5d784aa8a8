"""Typed schema of `rlvr eval`'s config, so a misspelt key fails at start, naming the key.

Lists, the Hydra way: `models=[A,B]` (a checkpoint directory, a Hub name, or a run directory,
which stands for its base model at step 0 plus every `checkpoints/step_N`) and
`envs=[arithmetic,humaneval]` (names, or mappings such as `{name:countdown,num_numbers:4}`).
For one of each, `model.name_or_path=A` and `env=NAME env.KEY=V` read as in `rlvr train`.

`endpoint=http://HOST:PORT/v1` samples from an OpenAI-compatible server (a `vllm serve` of the checkpoint)
instead of loading the model here (rollout/server.py); `model.name_or_path` then only gives the tokenizer
(prompts are sent as its token ids) and names the model in the reports, and `served_model` is the name the
server knows it by (default: the first model its GET /models lists).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from rlvr.sandboxes.hosts import SandboxConfig
from rlvr.trainer.config import RolloutConfig


@dataclass
class EvalModelConfig:
    name_or_path: Optional[str] = None
    """One checkpoint, run directory or Hub name; models=[...] for several."""
    kind: str = "base"
    """base | instruct: which prompt the built-in environments give the models.

    `env.prompt` follows it unless set (envs/base.py PromptStyle); instruct for a chat model such as smollm2."""
    prompt_format: str = "chat"
    """chat | plain: prompts through the tokenizer's chat template, or as plain text (rlvr train's key)."""


@dataclass
class EvalConfig:
    env: Any = field(default_factory=lambda: {"name": "arithmetic", "split": "test"})
    """The environment (env=NAME); its keys are its own: `rlvr envs`."""
    envs: list = field(default_factory=list)
    """Several environments, names or {name:N,KEY:V}; replaces env if set."""
    model: EvalModelConfig = field(default_factory=EvalModelConfig)
    models: list = field(default_factory=list)
    """Several checkpoints; a run directory stands for every step of it."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    n_samples: int = 1
    """Completions per prompt; pass@k and maj@k for every k <= n_samples."""
    temperature: float = 0.0
    """0: greedy decoding (then n_samples must be 1); > 0 samples."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the top-p probability mass; 1: off."""
    top_k: int = 0
    """Sample among the k likeliest tokens; 0: off."""
    n_prompts: Optional[int] = 200
    """Prompts per env, capped at a finite env's size; null: every row."""
    batch_prompts: int = 256
    """Prompts per generate call (the trainer's held-out eval uses 256 too)."""
    seed: int = 0
    """Seeds the prompts drawn and the sampling."""
    output_dir: str = "outputs/eval/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    """results.json, results.md, completions.jsonl; an existing one resumes."""
    plots: bool = True
    """Write plots/*.png of each metric against the training step."""
    threads: int = 0
    """Torch CPU threads; 0: torch's default (all cores)."""
    endpoint: Optional[str] = None
    """An OpenAI-compatible server (http://HOST:PORT/v1); null: load here."""
    served_model: Optional[str] = None
    """With endpoint: the served model's name; null: its first in GET /models."""
    request_timeout_s: float = 300.0
    """With endpoint: the longest one request may take."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # Docker engines for code (rlvr.sandboxes.hosts)


def register_eval_schema() -> None:
    from rlvr.trainer.config import register_resolvers

    register_resolvers()
    ConfigStore.instance().store(name="eval_schema", node=EvalConfig)


def compose_eval_config(overrides: list[str]):
    """`rlvr eval`'s config as the command composes it, for running `run_eval` from Python."""
    from hydra import compose, initialize_config_module

    register_eval_schema()
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        return compose(config_name="eval", overrides=overrides)
