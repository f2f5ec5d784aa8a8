"""The one way the policy's weights reach the rollout engine during training.

The step (trainer/step.py) calls `ctx.engine.sync_weights(ctx.model)` after each update, with the module the
algorithms train: wrapped by DDP or sharded by FSDP2 (trainer/distributed.py), perhaps carrying LoRA adapters
(trainer/models/lora.py). An engine takes a plain Hugging Face module (rollout/types.py). The loop
builds one function for the run, `weights(policy)`, and `PolicyEngine` applies it at every sync:

    weights(policy) = for_engine(parallel.plain(policy))
      parallel.plain   the HF module with the full weights (DDP unwrapped, FSDP2 gathered)
      for_engine       the merged model W + (alpha / r) B A, on a copy, when adapters meet an
                       engine that copies weights (vLLM); with rollout.vllm.lora_sync=adapter the
                       adapter model itself, whose adapter alone vLLM loads; else the module itself

The engine is built from the same `for_engine(plain)` at start, so start-up and sync agree.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.trainer.rollout.types import Engine, Rollout, SamplingParams


class PolicyEngine:
    """An `Engine` whose `sync_weights(policy)` hands the engine inside it `weights(policy)`."""

    def __init__(self, engine: Engine, weights: Callable[[torch.nn.Module], torch.nn.Module]):
        self.engine, self.weights = engine, weights
        self.tokenizer = engine.tokenizer

    @property
    def copies_weights(self) -> bool:
        return self.engine.copies_weights

    def generate(self, prompts: list[str], params: SamplingParams) -> Rollout:
        return self.engine.generate(prompts, params)

    @property
    def context_length(self) -> int | None:
        return getattr(self.engine, "context_length", None)

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollout:
        """Token ids in (the multi-turn agent loop); only engines that offer it (hf, vllm) are asked."""
        return self.engine.generate_ids(prompt_ids, params)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.engine.sync_weights(self.weights(model))

    def shutdown(self) -> None:
        self.engine.shutdown()
