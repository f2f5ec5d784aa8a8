"""Where `rlvr train` computes (`train.device`): the policy, reference and critic live there, and so do their
optimizer state and every forward's inputs.

    auto     the local rank's CUDA device when CUDA is available (under torchrun: cuda:LOCAL_RANK), else the CPU
    cpu      the CPU, even where a GPU is present
    cuda     the local rank's CUDA device (refused when CUDA is not available)
    cuda:N   GPU N (one process; under torchrun each rank wants its own: use cuda or auto)

The batches are built on the CPU (tokenising, packing, rewards, advantages) and the model's inputs move to
its device at the forward (models/logprobs.py `to_model`); what the losses read comes back as the per-token
[rows, tokens] tensors, never the [tokens, vocabulary] logits, which stay on the device.
"""

from __future__ import annotations

import os

import torch

from rlvr.errors import ConfigError


def resolve_device(spec: str, local_rank: int | None = None) -> torch.device:
    """`train.device`'s value -> the torch device of this process; a value that names no usable device is a
    ConfigError naming the field."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0")) if local_rank is None else local_rank
    spec = str(spec).strip().lower()
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "auto":
        return torch.device("cuda", local_rank) if _cuda_count() > local_rank else torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        index_text = spec.partition(":")[2]
        if index_text and not index_text.isdigit():
            raise ConfigError(f"train.device={spec!r}: the GPU index must be a number (cuda:0, cuda:1, ...)")
        index = int(index_text) if index_text else local_rank
        count = _cuda_count()
        if count == 0:
            raise ConfigError(f"train.device={spec!r}: CUDA is not available here (torch {torch.__version__}); "
                              f"use train.device=cpu or auto")
        if index >= count:
            raise ConfigError(f"train.device={spec!r}: this machine has {count} CUDA device(s) (0..{count - 1})")
        return torch.device("cuda", index)
    raise ConfigError(f"train.device={spec!r}; choose auto, cpu, cuda or cuda:N")


def _cuda_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def use_device(device: torch.device) -> None:
    """Make `device` the current CUDA device (NCCL and `torch.cuda` calls without an index use it)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)


def has_bf16_units(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 in hardware: a CUDA GPU that says so (Ampere on), or a CPU with
    AVX512-BF16 or AMX (Intel Xeon from Sapphire Rapids, AMD from Zen 4). Elsewhere torch emulates bf16, slower
    than float32 (the AMD EPYC of docs/benchmarks/grpo-trl.md)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu's (private) CPUID probes
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def resolve_autocast(model_cfg, device: torch.device) -> str | None:
    """`model.autocast=auto` becomes bf16 where `device` has bf16 units, else none (in place); the line that says
    which, for the start log. None when the setting was not auto."""
    if model_cfg.autocast != "auto":
        return None
    model_cfg.autocast = "bf16" if has_bf16_units(device) else "none"
    units = "has" if model_cfg.autocast == "bf16" else "lacks"
    return f"model.autocast=auto -> {model_cfg.autocast} ({device.type} {units} bf16 units)"


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of `model`'s first parameter (or buffer); else its `device` attribute (LoRA's AdaptersOff
    holds the policy outside its submodules); else the CPU."""
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    device = getattr(model, "device", None)
    return device if isinstance(device, torch.device) else torch.device("cpu")
