"""`rollout.repetition_penalty`, `rollout.min_p` and `rollout.generation_kwargs`: checked once, at start, per engine.

The two named settings sample alike on every engine (hf, vllm, server), because rlvr applies them in vLLM's order on
HF generate (rollout/hf.py): the repetition penalty on the raw logits, over every token of the prompt and of the
completion so far (positive logits divided by it, negative ones multiplied), then temperature, min-p (drop tokens whose
probability is below min_p times the top token's), then top-k and top-p. vLLM's sampler (vllm/v1/sample/sampler.py:
penalties in `apply_logits_processors`, then `sample`: temperature, the argmax-invariant min-p, top-k/top-p) and HF's
`RepetitionPenaltyLogitsProcessor` / `MinPLogitsWarper` define these; tests/trainer/rollout/test_generation_settings.py checks that
HF and vLLM decode the same greedy tokens under a penalty. Greedy decoding keeps the penalty (it moves the argmax);
min-p cannot change an argmax.

`generation_kwargs` is passed as it is to the engine, as TRL's `GRPOConfig.generation_kwargs` is: to
`model.generate` (rollout=hf: keys of transformers' `GenerationConfig`) or into `vllm.SamplingParams` (rollout=vllm)
or the body of each `/v1/completions` request (rollout=server: fields of vLLM's `CompletionRequest`). Its keys are
the engine's own names (HF's `no_repeat_ngram_size`, vLLM's `presence_penalty`), so a key is refused at start, by
name, when the chosen engine does not know it, when rlvr sets it itself (it has its own `rollout.*` key, or rlvr's
rollout depends on its value), or when it would break what the engine hands the trainer (beam search, another output
format, an HF warper that would run after the logprob recorder). An unknown key would otherwise be dropped: vLLM's
server ignores fields it does not know, with a log line on the server's side only.

Where this departs from the policy: like top-k and top-p, these settings sample from a distribution other than the
policy's softmax(logits / T), so the engine's logprobs (of the distribution sampled) differ from the trainer's; the
truncated importance weight (`rollout.importance_cap`) corrects for the difference, as for top-p.
"""

from __future__ import annotations

from rlvr.errors import ConfigError

OFF = {"repetition_penalty": 1.0, "min_p": 0.0, "generation_kwargs": {}}  # each setting's value that changes nothing

# Keys rlvr sets on every engine from its own config, or whose value the rollout relies on: key -> what to set instead.
RLVR_SETS = {
    "temperature": "rollout.temperature", "top_p": "rollout.top_p", "top_k": "rollout.top_k",
    "min_p": "rollout.min_p", "repetition_penalty": "rollout.repetition_penalty",
    "max_new_tokens": "rollout.max_new_tokens", "max_tokens": "rollout.max_new_tokens",
    "max_length": "rollout.max_new_tokens", "stop": "rollout.stop", "stop_strings": "rollout.stop",
    "n": "train.completions_per_prompt", "num_return_sequences": "train.completions_per_prompt",
    "seed": "seed (and rollout.seed_per_prompt)", "do_sample": "rollout.temperature (greedy is rlvr's choice)",
    "eos_token_id": "the tokenizer's EOS", "stop_token_ids": "the tokenizer's EOS", "pad_token_id": "the tokenizer",
    "logprobs": "rlvr (the sampled tokens' logprobs)", "prompt": "rlvr (the prompts' token ids)",
    "model": "rlvr (the served model)", "return_token_ids": "rlvr (token ids in, token ids out)",
    "include_stop_str_in_output": "rlvr (the stop string stays in the text)",
    "skip_special_tokens": "rlvr (texts are decoded without special tokens)",
}

# Keys the engine knows that would break the rollout's contract (one sampled row per completion, with its logprobs).
ENGINE_REFUSES = {
    "hf": {
        **dict.fromkeys(("num_beams", "num_beam_groups", "diversity_penalty", "length_penalty", "early_stopping",
                         "constraints", "force_words_ids", "penalty_alpha", "dola_layers"),
                        "beam search and contrastive or DoLa decoding are not sampling"),
        **dict.fromkeys(("output_scores", "output_logits", "return_dict_in_generate", "output_attentions",
                         "output_hidden_states"), "rlvr reads generate's sequences, not a dict of extras"),
        # HF adds these warpers after the logits processors it is given, i.e. after rlvr's logprob recorder
        **dict.fromkeys(("typical_p", "epsilon_cutoff", "eta_cutoff", "top_h"),
                        "HF applies it after rlvr's logprob recorder, so the logprobs would not be of the "
                        "distribution sampled"),
        **dict.fromkeys(("prompt_lookup_num_tokens", "assistant_confidence_threshold", "num_assistant_tokens",
                         "assistant_early_exit", "guidance_scale", "watermarking_config", "speculation_type"),
                        "assisted, guided or watermarked generation changes what is sampled from"),
    },
    "vllm": {
        **dict.fromkeys(("output_kind", "detokenize", "prompt_logprobs", "logprob_token_ids", "flat_logprobs",
                         "prompt_logprob_token_ids", "extra_args"),
                        "rlvr reads vLLM's final outputs with the sampled tokens' logprobs"),
    },
}
ENGINE_REFUSES["server"] = {**ENGINE_REFUSES["vllm"],
                            **dict.fromkeys(("stream", "stream_options", "echo", "suffix", "best_of", "user",
                                             "prompt_embeds", "return_tokens_as_token_ids", "request_id",
                                             "priority", "kv_transfer_params", "ec_transfer_params", "vllm_xargs",
                                             "cache_salt", "return_token_offsets", "return_mm_kwargs", "mm_payload",
                                             "session_id"),
                                            "rlvr reads one whole reply of token ids and logprobs per request"),
                            "use_beam_search": "beam search is not sampling",
                            **dict.fromkeys(("add_special_tokens", "truncate_prompt_tokens", "truncation_side"),
                                            "the prompt is sent as the trainer's token ids, which the trainer "
                                            "scores as they are")}


def engine_keys(kind: str) -> frozenset[str]:
    """The keys engine `kind` accepts in `generation_kwargs`, before rlvr's refusals."""
    if kind == "hf":
        from transformers import GenerationConfig

        return frozenset(key for key in GenerationConfig().to_dict() if not key.startswith("_"))
    if kind == "vllm":
        import vllm

        return frozenset(key for key in vllm.SamplingParams.__struct_fields__ if not key.startswith("_"))
    if kind == "server":
        try:
            from vllm.entrypoints.openai.completion.protocol import CompletionRequest
        except ImportError:
            raise ConfigError("rollout.generation_kwargs with rollout=server is checked against vLLM's "
                              "CompletionRequest, and vLLM is not installed here: install it (the server's version), "
                              "or leave rollout.generation_kwargs empty") from None
        return frozenset(CompletionRequest.model_fields)
    raise ConfigError(f"rollout.engine={kind!r}: no generation settings known for it")


def check_ranges(repetition_penalty: float, min_p: float, generation_kwargs) -> None:
    """The engine-independent rules: ranges, a mapping of string keys, and no key rlvr sets itself."""
    if not repetition_penalty > 0:
        raise ConfigError(f"rollout.repetition_penalty={repetition_penalty} must be > 0 (1: off; > 1 penalises "
                          "tokens already in the prompt or completion)")
    if not 0 <= min_p <= 1:
        raise ConfigError(f"rollout.min_p={min_p} must be in [0, 1] (0: off)")
    if not hasattr(generation_kwargs, "items"):
        raise ConfigError(f"rollout.generation_kwargs={generation_kwargs!r} must be a mapping of the engine's "
                          "generation keys to values, e.g. rollout.generation_kwargs={no_repeat_ngram_size:3}")
    for key in generation_kwargs:
        if key in RLVR_SETS:
            raise ConfigError(f"rollout.generation_kwargs.{key}: rlvr sets {key} itself; use {RLVR_SETS[key]}")


def check_generation_settings(kind: str, rollout) -> None:
    """Refuse, naming the key and the engine, a generation setting engine `kind` (hf, vllm, server) cannot honour.
    `rollout` is the rollout config (or a mapping like it)."""
    kwargs = _get(rollout, "generation_kwargs") or {}
    check_ranges(float(_get(rollout, "repetition_penalty", 1.0)), float(_get(rollout, "min_p", 0.0)), kwargs)
    if not kwargs or kind == "auto":  # auto: checked again once resolved (rollout/factory.py build_engine)
        return
    known = engine_keys(kind)
    for key in kwargs:
        if key not in known:
            close = sorted(k for k in known if key in k or k in key)[:3]
            raise ConfigError(f"rollout.generation_kwargs.{key}: rollout={kind} does not know {key!r}"
                              + (f" (did you mean {', '.join(close)}?)" if close else "")
                              + f"; its keys are {_where(kind)}")
        if key in ENGINE_REFUSES.get(kind, {}):
            raise ConfigError(f"rollout.generation_kwargs.{key}: rollout={kind} cannot take it here: "
                              f"{ENGINE_REFUSES[kind][key]}")


def generation_settings(rollout) -> dict:
    """The `SamplingParams` keywords (rollout/types.py) of these settings, from the rollout config: every sampling
    of a run passes them (its rollouts and its held-out greedy eval, `rlvr eval` too)."""
    kwargs = _get(rollout, "generation_kwargs") or {}
    if hasattr(kwargs, "_content"):  # an OmegaConf node: plain values for the engine (and a picklable pipe)
        from omegaconf import OmegaConf

        kwargs = OmegaConf.to_container(kwargs, resolve=True)
    return {"repetition_penalty": float(_get(rollout, "repetition_penalty", 1.0)),
            "min_p": float(_get(rollout, "min_p", 0.0)), "generation_kwargs": dict(kwargs)}


def _where(kind: str) -> str:
    return {"hf": "transformers' GenerationConfig fields", "vllm": "vllm.SamplingParams fields",
            "server": "the fields of vLLM's CompletionRequest (/v1/completions)"}[kind]


def _get(options, key: str, default=None):
    if options is None:
        return default
    value = options.get(key) if hasattr(options, "get") else getattr(options, key, None)
    return default if value is None else value
