"""What a rollout engine hands the trainer, and how an engine is chosen.

An engine turns prompts (already rendered through the chat template) into G sampled
completions each. It returns token ids, not just text, because the trainer must score
exactly the tokens that were sampled: re-tokenising decoded text can split differently.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Rollout:
    """G completions for each of B prompts, flattened prompt-major: row i*G + j is prompt i, sample j."""

    prompt_ids: list[list[int]]  # [B*G][prompt_len_i]
    completion_ids: list[list[int]]  # [B*G][completion_len_i], ends with EOS unless truncated
    texts: list[str]  # [B*G] decoded completions, special tokens removed
    logprobs: list[torch.Tensor]  # [B*G][completion_len_i] the engine's logprobs of the sampled tokens
    truncated: list[bool]  # [B*G] hit max_new_tokens without EOS or a stop string

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


def build_engine(kind: str, model, tokenizer):
    """`rollout=hf` (Hugging Face generate). `auto` picks vLLM when it imports (once that engine lands)."""
    if kind in ("hf", "auto"):
        from rlvr.trainer.rollout_hf import HFEngine

        return HFEngine(model, tokenizer)
    raise ValueError(f"rollout.engine={kind!r} is not available; choose one of: hf, auto")
