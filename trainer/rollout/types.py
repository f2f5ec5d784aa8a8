"""What a rollout engine hands the trainer, and the interface every engine implements.

An engine turns prompts (already rendered through the chat template) into G sampled
completions each. It returns token ids, not just text, because the trainer must score
exactly the tokens that were sampled: re-tokenising decoded text can split differently.

`Engine` is the interface: `tokenizer`, `generate`, `sync_weights` and `shutdown`. This file
declares it and imports no engine; the engines (rollout/hf.py, rollout/vllm.py) import this file,
and rollout/factory.py, which chooses one, imports them. Weights reach an engine one way: the
loop calls `sync_weights` with the plain Hugging Face module after each update (rollout/weights.py
says what "plain" is under DDP, FSDP2 and LoRA).

Why these types should carry the next engines without a change to the algorithms:

* The algorithms never see an engine's class. The step calls `generate` once per round through
  trainer/experience/collect.py, and its batch (trainer/experience/batch.py) packs `prompt_ids` +
  `completion_ids` into the trainer's rows and scatters `logprobs` into their layout; the algorithms
  weight tokens by that batch's completion mask, and the step calls `sync_weights(policy)` after
  their update (trainer/step.py).
* A multi-turn agent loop is an engine that wraps another. Its `generate` runs the turns (calling
  the inner engine, appending the environment's observations as token ids) and returns one row per
  trajectory: `prompt_ids` is the first prompt, `completion_ids` every later token in the order it
  was produced, the sampled ones exactly as sampled (never re-tokenised), `logprobs` the sampling
  logprobs per completion token. The observation tokens are not the policy's to learn, so such a row
  needs one more per-token list beside `logprobs`, a 0/1 loss mask, which the packing step turns
  into the completion mask the losses already weight by: the losses and steps stay as they are.
  As built (rollout/agent_loop.py), the loop is a function beside the engines rather than an engine
  wrapping one, because the environment's state is per row and `generate` takes only prompt text; it
  calls the engines' `generate_ids` (token ids in, so nothing sampled is re-tokenised) and returns a
  `Rollout` with `loss_mask` and `trajectories` set.
* An engine behind HTTP implements the same four members. `SamplingParams` is a frozen dataclass
  of plain values and a `Rollout` is lists of ints, strings, floats and bools, so both cross the
  wire as JSON; `sync_weights(model)` ships the state dict (or a checkpoint path the server loads)
  and `shutdown()` closes the connection or stops the server. `tokenizer` stays the trainer's, so
  prompts are rendered and completions decoded alike on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class Rollout:
    """G completions for each of B prompts, flattened prompt-major: row i*G + j is prompt i, sample j."""

    prompt_ids: list[list[int]]  # [B*G][prompt_len_i]
    completion_ids: list[list[int]]  # [B*G][completion_len_i], ends with EOS unless truncated
    texts: list[str]  # [B*G] decoded completions, special tokens removed
    logprobs: list[torch.Tensor]  # [B*G][completion_len_i] the engine's logprobs of the sampled tokens
    truncated: list[bool]  # [B*G] hit max_new_tokens without EOS or a stop string
    # Multi-turn trajectories only (rollout/agent_loop.py); None for one-turn rollouts, which train on every
    # completion token. loss_mask[i][k] is 1 where completion token k was sampled, 0 where the environment wrote it.
    loss_mask: list[list[int]] | None = None
    trajectories: list[dict] | None = None  # [B*G] turns, messages, end reason and tool counts (agent_loop.py)
    # Asynchronous rollouts only (trainer/experience/async_rollouts.py): version[i] is the number of optimizer updates in the
    # weights that sampled row i; None when the engine samples the current policy (the synchronous loop).
    version: list[int] | None = None

    @property
    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completion_ids)


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    greedy: bool = False
    # One seed per prompt: vLLM then samples each prompt's G completions from its own seed, whatever batch
    # it sits in (world size, resume). HF generate draws the batch from torch's RNG and ignores them.
    seeds: tuple[int, ...] | None = None
    # rollout.repetition_penalty, rollout.min_p, rollout.generation_kwargs (rollout/generation_settings.py says how
    # each engine applies them alike): 1.0 and 0.0 are off; the kwargs go to the engine as they are.
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    generation_kwargs: dict = field(default_factory=dict)


@runtime_checkable
class Engine(Protocol):
    """A rollout engine: prompts in, a `Rollout` out; it follows the policy through `sync_weights`.

    `copies_weights` says whether the engine samples from a copy of the weights it loads (vLLM, a
    server: it needs a plain, merged module) or from the module it is handed (HF generate)."""

    tokenizer: Any  # the trainer's tokenizer: prompts are encoded and completions decoded with it
    copies_weights: bool

    def generate(self, prompts: list[str], params: SamplingParams) -> Rollout:
        """`params.n` completions per prompt, prompt-major; `params.greedy` decodes greedily."""
        ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Sample from `model`'s current weights from now on (a plain Hugging Face module)."""
        ...

    def shutdown(self) -> None:
        """Free what the engine holds (processes, memory, temporary files); safe to call twice."""
        ...
