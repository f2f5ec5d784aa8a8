"""Rollout engine on Hugging Face `generate`: batched sampling, G completions per prompt.

Prompts are left-padded so every row's completion starts at the same column; each
completion is cut after its first EOS (kept: the policy is trained to stop) or after
the first stop string (kept too, as vLLM does with `include_stop_str_in_output`).
The logprobs returned are those of the sampling distribution (after temperature and
top-k/top-p), taken from `generate`'s processed scores.
"""

from __future__ import annotations

import torch

from rlvr.trainer.rollout.types import Rollout, SamplingParams


class HFEngine:
    """An `Engine` (rollout/types.py) that samples from the module it is handed, adapters and all."""

    copies_weights = False

    def __init__(self, model, tokenizer):
        self.model = model  # the policy itself: no weight sync needed
        self.tokenizer = tokenizer

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
        # Explicit values override whatever the checkpoint's generation_config prefers (top_k=0: off).
        sampling = {} if params.greedy else dict(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k)
        if params.greedy and n > 1:  # generate refuses several greedy returns; they would be identical anyway
            input_ids, attention_mask = input_ids.repeat_interleave(n, 0), attention_mask.repeat_interleave(n, 0)
        device = next(self.model.parameters()).device  # train.device (trainer/device.py)
        out = self.model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            max_new_tokens=_room_left(self.model, width, params.max_new_tokens),
            num_return_sequences=1 if params.greedy else n,
            do_sample=not params.greedy,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            stop_strings=list(params.stop) or None,
            tokenizer=tok if params.stop else None,
            output_scores=True,
            return_dict_in_generate=True,
            **sampling,
        )
        self.model.train(was_training)

        sequences = out.sequences[:, width:].cpu()  # [B*G, T]
        scores = torch.stack(out.scores, dim=1).float()  # [B*G, T, V]
        # log p(x) = score(x) - logsumexp(scores): the sampled token's logprob without a [B*G, T, V] log-softmax.
        picked = scores.gather(-1, out.sequences[:, width:].unsqueeze(-1)).squeeze(-1)  # [B*G, T]
        token_logprobs = (picked - scores.logsumexp(-1)).cpu()  # [B*G, T]

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
