"""How much KV cache a vLLM engine gets: `rollout.vllm.kv_cache_bytes` (auto | bytes | null).

vLLM's CPU backend takes its KV cache up front, as one tensor it fills at start-up, so whatever it is
given is resident memory for the whole run. Left to itself it takes `gpu_memory_utilization` of the
machine's RAM (0.3: 38 GB on a 128 GB box); the legacy `VLLM_CPU_KVCACHE_SPACE` gives whole GiB.
A run knows what it can need: at most `sequences` rows at once, each at most `row_tokens` long (its longest
prompt plus `max_new_tokens`, measured by the caller; the model's context when not given), so `auto` sizes the
cache to that (`run_kv_cache_bytes`):

    sequences x ceil(row_tokens / block) blocks x block x layers x kv_heads x head_dim x 2 (K and V) x dtype bytes

plus vLLM's reserved null block, and never less than one row of the model's full context (vLLM refuses to start
below that) nor more than half of the machine's available memory (`memory_cap`: a larger need is a ConfigError
naming the key, not a start that fails or swaps). vLLM hands out blocks as rows grow (paged attention), so rows
shorter than `row_tokens` leave room for more, and the G completions of a prompt share its prefix blocks under
prefix caching. For the 0.84M tiny model (4 layers, 2 KV heads of 32, 256 positions, float32) and 200 rows at its
full context that is 105 MB (401 blocks) instead of 1 GiB. For SmolLM2-135M (30 layers, 3 KV heads of 64, 8,192
positions, 45 KiB a token) sized by its context, 100 rows asked 36 GB and 256 rows 90 GiB; by its rows (about 70
prompt tokens + 48 new) 100 rows take 596 MB (101 blocks) and 32 rows the one-context-row floor, 383 MB.

What vLLM 0.32 does with the number (read from its source): on the CPU, `kv_cache_memory_bytes` is the
cache's size (`CPUWorker.determine_available_memory`), unless `VLLM_CPU_KVCACHE_SPACE` is set, which then
replaces it (`CpuPlatform.check_and_update_config`); on a GPU it replaces `gpu_memory_utilization`'s share.
A cache smaller than one context-length row is refused by vLLM at start-up; here the same check runs
first and names the key (`check_kv_cache_bytes`). A cache that holds one row but fewer than the batch does
not hang: vLLM's scheduler runs fewer rows at once and preempts (recomputes) the rest, so generation is
slower and the samples are the same.

`auto` applies on the CPU only; on a GPU vLLM's own sizing (`rollout.vllm.gpu_memory_utilization`) is kept.
"""

from __future__ import annotations

import math
import os

from rlvr.errors import ConfigError

CPU_BLOCK_TOKENS = 128  # vLLM 0.32's CPU block size for standard attention (CpuPlatform.check_and_update_config)
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}


def kv_bytes_per_token(config, dtype: str) -> int:
    """K and V of one token over every layer, from a Hugging Face model config."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    if dtype not in _DTYPE_BYTES:
        raise ConfigError(f"rollout.vllm.dtype={dtype!r}: the KV cache is sized for {', '.join(_DTYPE_BYTES)}; "
                          "give rollout.vllm.kv_cache_bytes as a number of bytes instead of auto")
    return config.num_hidden_layers * kv_heads * head_dim * 2 * _DTYPE_BYTES[dtype]


def run_kv_cache_bytes(config, *, sequences: int, max_len: int, dtype: str,
                       block_tokens: int = CPU_BLOCK_TOKENS) -> int:
    """`sequences` rows of `max_len` tokens, in whole blocks, plus vLLM's null block (the module docstring)."""
    block_bytes = block_tokens * kv_bytes_per_token(config, dtype)
    return (sequences * math.ceil(max_len / block_tokens) + 1) * block_bytes


def memory_cap() -> int | None:
    """Half of the memory the machine has available now (Linux's MemAvailable), the most `auto` asks for."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        return None
    return None


def resolve_kv_cache_bytes(setting, config, *, sequences: int, max_len: int | None, dtype: str,
                           on_cpu: bool, row_tokens: int | None = None, cap: int | None = None) -> int | None:
    """The `kv_cache_memory_bytes` to give vLLM for `rollout.vllm.kv_cache_bytes=setting` (None: vLLM decides).
    `row_tokens`: the longest row the caller will generate (None: the model's context, `max_len`); `cap`: the
    most `auto` may take (None: `memory_cap()`)."""
    if setting is None:
        return None
    if setting == "auto":
        if not on_cpu or os.environ.get("VLLM_CPU_KVCACHE_SPACE"):  # a GPU, or the user's own GiB
            return None
        if max_len is None:
            raise ConfigError("rollout.vllm.kv_cache_bytes=auto: the model's config has no max_position_embeddings to "
                              "size the KV cache by; give rollout.vllm.kv_cache_bytes in bytes")
        row = max_len if row_tokens is None else min(row_tokens, max_len)
        floor = run_kv_cache_bytes(config, sequences=1, max_len=max_len, dtype=dtype)
        size = max(floor, run_kv_cache_bytes(config, sequences=sequences, max_len=row, dtype=dtype))
        cap = memory_cap() if cap is None else cap
        if cap is not None and size > cap:
            if floor > cap:
                raise ConfigError(f"rollout.vllm.kv_cache_bytes=auto: one row of the model's {max_len} positions needs "
                                  f"{floor / 2**30:.1f} GiB of KV cache, more than half the {2 * cap / 2**30:.1f} GiB "
                                  f"this machine has available; free memory or choose rollout=hf")
            size = cap  # fewer rows at once: vLLM preempts and recomputes the rest (same samples, slower)
        return size
    if isinstance(setting, bool) or not isinstance(setting, int) or setting <= 0:
        raise ConfigError(f"rollout.vllm.kv_cache_bytes={setting!r}: give auto, null (vLLM's own size) or a positive "
                          "number of bytes")
    if on_cpu and os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        raise ConfigError(f"rollout.vllm.kv_cache_bytes={setting} and VLLM_CPU_KVCACHE_SPACE="
                          f"{os.environ['VLLM_CPU_KVCACHE_SPACE']} are both set; vLLM's CPU backend would take the "
                          "environment's GiB: unset one")
    return setting


def check_kv_cache_bytes(size: int, config, *, max_len: int | None, dtype: str,
                         block_tokens: int = CPU_BLOCK_TOKENS) -> None:
    """ConfigError when `size` cannot hold one row of the model's context (vLLM would refuse to start)."""
    if max_len is None or dtype not in _DTYPE_BYTES:
        return
    floor = run_kv_cache_bytes(config, sequences=1, max_len=max_len, dtype=dtype, block_tokens=block_tokens)
    if size < floor:
        raise ConfigError(f"rollout.vllm.kv_cache_bytes={size}: vLLM needs at least {floor} bytes to hold one row of "
                          f"the model's {max_len} positions ({kv_bytes_per_token(config, dtype)} bytes a token, in "
                          f"blocks of {block_tokens}); give more, or auto")
