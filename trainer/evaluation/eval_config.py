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
    name_or_path: Optional[str] = None  # one checkpoint; `models=[...]` for several
    # base | instruct: which prompt the built-in environments give the models (`env.prompt` follows it unless set;
    # envs/base.py PromptStyle); instruct for a chat model such as smollm2
    kind: str = "base"


@dataclass
class EvalConfig:
    env: Any = field(default_factory=lambda: {"name": "arithmetic", "split": "test"})
    envs: list = field(default_factory=list)  # several environments; replaces `env` when not empty
    model: EvalModelConfig = field(default_factory=EvalModelConfig)
    models: list = field(default_factory=list)  # several checkpoints; added after model.name_or_path
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    n_samples: int = 1  # completions per prompt; pass@k and maj@k for every k <= n_samples
    temperature: float = 0.0  # 0 = greedy decoding (then n_samples must be 1)
    top_p: float = 1.0
    top_k: int = 0
    n_prompts: Optional[int] = 200  # per env; capped at a finite env's size; null = every row of a finite env
    batch_prompts: int = 256  # prompts per generate call (the trainer's held-out eval uses 256 too)
    seed: int = 0
    output_dir: str = "outputs/eval/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    plots: bool = True
    threads: int = 0  # torch CPU threads; 0 leaves torch's default
    endpoint: Optional[str] = None  # an OpenAI-compatible server's base URL (http://HOST:PORT/v1); null: load the model
    served_model: Optional[str] = None  # with endpoint: the server's model name; null: the first of its GET /models
    request_timeout_s: float = 300.0  # with endpoint: the longest one request may take
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
