"""Rollout engine on Hugging Face `generate`: batched sampling, G completions per prompt.

Prompts are left-padded so every row's completion starts at the same column; each
completion is cut after its first EOS (kept: the policy is trained to stop) or after
the first stop string (kept too, as vLLM does with `include_stop_str_in_output`).
The logprobs returned are those of the sampling distribution (after the repetition penalty,
temperature, min-p and top-k/top-p): `SampledLogprobs`, the last of `generate`'s logits processors, takes each step's
processed scores and keeps only the sampled token's log-probability, so memory holds one
[B*G, V] step instead of `output_scores`' [B*G, T, V] stack (20 GB for 64 rows of 512 tokens
over a 151k vocabulary). The same values as `log_softmax(scores)` gathered at the sampled ids.

`rollout.repetition_penalty` and `rollout.min_p` are applied by rlvr's own processors, in vLLM's order (penalty,
temperature, min-p, top-k, top-p: rollout/generation_settings.py), so that hf samples as vllm and servers do. The
penalty is rlvr's `RepetitionPenalty` rather than transformers' processor because that one also penalises the pad
tokens of left-padded rows, which vLLM (no padding) never sees. `rollout.generation_kwargs` go to `generate` as
they are.

`prefill_once` (`rollout.hf.prefill_once`, default on): when sampling G > 1 completions per prompt, each prompt's
KV cache (all but its last token) is computed once and repeated G times, instead of `generate` prefilling
G copies of every prompt. The prefill was about 42% of `generate` on the bench's tiny model (BENCHMARKS.md
"GRPO step time vs TRL"). The numbers move only in their last bits (the prompt runs as 8 rows, not 64):
tests/trainer/rollout/test_rollout_hf.py checks the same seed samples the same completions with logprobs within 1e-5.
"""

from __future__ import annotations

import torch
from transformers import (LogitsProcessor, LogitsProcessorList, MinPLogitsWarper, TemperatureLogitsWarper,
                          TopKLogitsWarper, TopPLogitsWarper)

from rlvr.trainer.rollout.types import Rollout, SamplingParams


class HFEngine:
    """An `Engine` (rollout/types.py) that samples from the module it is handed, adapters and all."""

    copies_weights = False

    def __init__(self, model, tokenizer, prefill_once: bool = True):
        self.model = model  # the policy itself: no weight sync needed
        self.tokenizer = tokenizer
        self.prefill_once = prefill_once

    def sync_weights(self, model) -> None:
        self.model = model

    @property
    def context_length(self) -> int | None:
        """The model's trained positions (the multi-turn agent loop ends a trajectory before it outgrows them)."""
        return getattr(self.model.config, "max_position_embeddings", None)

    def shutdown(self) -> None:
        """Nothing to stop: generation runs in this process on the policy's own module."""

    def generate(self, prompts: list[str], params: SamplingParams) -> Rollout:
        encoded = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]  # one batched call into the Rust tokenizer
        return self.generate_ids(encoded, params)

    @torch.no_grad()
    def generate_ids(self, encoded: list[list[int]], params: SamplingParams) -> Rollout:
        """`generate` on prompts already tokenised (the multi-turn agent loop's trajectories, rollout/agent_loop.py)."""
        tok = self.tokenizer
        n = params.n
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), tok.pad_token_id, dtype=torch.long)  # [B, P]
        attention_mask = torch.zeros_like(input_ids)  # [B, P]
        for i, ids in enumerate(encoded):
            input_ids[i, width - len(ids) :] = torch.tensor(ids)
            attention_mask[i, width - len(ids) :] = 1

        was_training = self.model.training
        self.model.eval()
        device = next(self.model.parameters()).device  # train.device (trainer/device.py)
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        returns = 1 if params.greedy else n
        prompt_cache = None
        if self.prefill_once and returns > 1 and width > 1:
            prompt_cache = self._prompt_cache(input_ids, attention_mask, n)
        if prompt_cache is not None or (params.greedy and n > 1):  # greedy: generate refuses several returns
            input_ids, attention_mask = input_ids.repeat_interleave(n, 0), attention_mask.repeat_interleave(n, 0)
            returns = 1
        recorder = SampledLogprobs()
        penalty = ([RepetitionPenalty(params.repetition_penalty, [width - len(ids) for ids in encoded])]
                   if params.repetition_penalty != 1.0 else [])
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            **({} if prompt_cache is None else {"past_key_values": prompt_cache}),
            max_new_tokens=_room_left(self.model, width, params.max_new_tokens),
            num_return_sequences=returns,
            do_sample=not params.greedy,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            stop_strings=list(params.stop) or None,
            tokenizer=tok if params.stop else None,
            logits_processor=LogitsProcessorList([*penalty, *_warpers(params), recorder]),
            repetition_penalty=1.0,  # a checkpoint's own is not applied (vLLM ignores it too); `penalty` is rlvr's
            **({} if params.greedy else _NO_WARPERS),
            **params.generation_kwargs,
        )
        self.model.train(was_training)

        sequences = out[:, width:].cpu()  # [B*G, T]
        token_logprobs = recorder.logprobs(out).cpu()  # [B*G, T]

        eos = tok.eos_token_id  # a property lookup on HF tokenizers: read once, not per row
        completion_ids, logprobs, truncated = [], [], []
        for row, ids in enumerate(sequences.tolist()):
            length, stopped = _completion_length(ids, tok, params.stop, eos=eos)
            completion_ids.append(ids[:length])
            logprobs.append(token_logprobs[row, :length].clone())
            truncated.append(not stopped)
        texts = tok.batch_decode(completion_ids, skip_special_tokens=True)
        prompt_ids = [encoded[i // n] for i in range(len(encoded) * n)]
        return Rollout(prompt_ids, completion_ids, texts, logprobs, truncated)

    def _prompt_cache(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, n: int):
        """The KV cache of every prompt but its last token, computed once per prompt and repeated `n` times, row
        i's copies at rows i*n..i*n+n-1 (the order `num_return_sequences` expands to); None for a model whose
        forward returns no cache. Positions as `generate` numbers left-padded rows: from 0 at the first real
        token."""
        positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)  # [B, P]
        cache = self.model(input_ids=input_ids[:, :-1], attention_mask=attention_mask[:, :-1],
                           position_ids=positions[:, :-1], use_cache=True).past_key_values
        if cache is None or not hasattr(cache, "batch_repeat_interleave"):
            return None
        cache.batch_repeat_interleave(n)
        return cache


# Explicit values override whatever the checkpoint's generation_config prefers, so that when sampling `generate`
# adds no warper of its own (it would run after the recorder); `_warpers` are rlvr's, for the params. A checkpoint's
# min_p, repetition_penalty, typical_p or cutoffs are not applied, as vLLM ignores them too (rollout.min_p and
# rollout.repetition_penalty are, by rlvr's processors). Greedy decoding
# adds no warpers (and a sampling flag there only draws transformers' "not valid" warning).
_NO_WARPERS = dict(temperature=1.0, top_p=1.0, top_k=0, min_p=None, top_h=None, typical_p=1.0, epsilon_cutoff=0.0,
                   eta_cutoff=0.0)


class RepetitionPenalty(LogitsProcessor):
    """The repetition penalty (Keskar et al. 2019, CTRL) as vLLM applies it: each token already in the row's prompt
    or completion has its logit divided by `penalty` when positive, multiplied when not (vLLM
    `apply_repetition_penalties`, transformers `RepetitionPenaltyLogitsProcessor`). Unlike transformers' processor,
    the left padding of each row (its first `pad_widths[i]` columns) is not counted as seen tokens."""

    def __init__(self, penalty: float, pad_widths: list[int]):
        self.penalty = penalty
        self.pad_widths = torch.tensor(pad_widths)  # [B] one per prompt, before generate repeats the rows

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows, length = input_ids.shape  # rows = B * copies, prompt-major (generate's repeat_interleave)
        pads = self.pad_widths.to(input_ids.device).repeat_interleave(rows // len(self.pad_widths))  # [rows]
        real = torch.arange(length, device=input_ids.device) >= pads[:, None]  # [rows, L]
        vocab = scores.shape[-1]
        ids = input_ids.masked_fill(~real, vocab)  # [rows, L] padding points at an extra column, dropped below
        seen = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=scores.device)
        seen.scatter_(1, ids, True)  # [rows, V + 1]
        penalised = torch.where(scores > 0, scores / self.penalty, scores * self.penalty)  # [rows, V]
        return torch.where(seen[:, :vocab], penalised, scores)  # [rows, V]


class SampledLogprobs(LogitsProcessor):
    """Passes scores through unchanged; keeps log p(sampled token) under each step's processed scores.

    Placed last, it sees the scores `generate` samples from. The token sampled from step t's scores is the last
    column of the ids step t + 1 is called with, so each step is gathered one call later, and the final step
    from the returned sequences (`logprobs`). log p(x) = score(x) - logsumexp(scores), as `log_softmax` gives.
    """

    def __init__(self):
        self._pending: torch.Tensor | None = None  # [B*G, V] the last step's scores, its token not yet known
        self._picked: list[torch.Tensor] = []  # T-1 (then T) tensors [B*G]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self._pending is not None:
            self._take(input_ids[:, -1])
        self._pending = scores
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        scores, self._pending = self._pending.float(), None  # [B*G, V]
        picked = scores.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # [B*G]
        self._picked.append(picked - scores.logsumexp(-1))  # [B*G]

    def logprobs(self, sequences: torch.Tensor) -> torch.Tensor:
        """[B*G, T]: the sampled tokens' logprobs, given `generate`'s returned [B*G, P + T] sequences."""
        if self._pending is not None:
            self._take(sequences[:, -1])
        if not self._picked:
            return torch.zeros(sequences.shape[0], 0)
        return torch.stack(self._picked, dim=1)  # [B*G, T]


def _warpers(params: SamplingParams) -> list:
    """The sampling warpers for temperature, min-p, top-k and top-p, in vLLM's order (its sampler applies min-p
    between temperature and top-k/top-p; transformers puts min-p after top-p, which keeps a different set when both
    are on); none when greedy (argmax is the same under any of them)."""
    if params.greedy:
        return []
    warpers = [TemperatureLogitsWarper(params.temperature)] if params.temperature != 1.0 else []
    if params.min_p > 0:
        warpers.append(MinPLogitsWarper(min_p=params.min_p, min_tokens_to_keep=1))
    if params.top_k:
        warpers.append(TopKLogitsWarper(top_k=params.top_k, min_tokens_to_keep=1))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=params.top_p, min_tokens_to_keep=1))
    return warpers


def _room_left(model, prompt_width: int, max_new_tokens: int) -> int:
    """`max_new_tokens`, cut to what the model's context leaves after the (left-padded) prompts, as vLLM stops a
    request at `max_model_len`: past its trained positions a model's output is noise, not a longer answer. A
    completion stopped here has no EOS, so it counts as truncated like one cut at `max_new_tokens`."""
    context = getattr(model.config, "max_position_embeddings", None)
    return max_new_tokens if context is None else max(1, min(max_new_tokens, context - prompt_width))


def _completion_length(ids: list[int], tok, stop: tuple[str, ...], eos: int | None = None) -> tuple[int, bool]:
    """Tokens up to and including the first EOS or the token that completes a stop string.

    A pad token inside a row is not taken as a stop: when pad differs from EOS the model may
    sample it like any other token, and `generate` only pads rows that already stopped.
    `eos` defaults to `tok.eos_token_id` (pass it when calling once per row: the lookup is slow).
    """
    eos = tok.eos_token_id if eos is None else eos
    if eos in ids:
        return ids.index(eos) + 1, True
    if stop and any(s in tok.decode(ids) for s in stop):
        for t in range(1, len(ids) + 1):
            if any(s in tok.decode(ids[:t]) for s in stop):
                return t, True
    return len(ids), False
