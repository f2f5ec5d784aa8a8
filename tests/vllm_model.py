"""What the vLLM tests share: the tiny model's shape vLLM's CPU attention accepts (head_dim 32; it refuses
conftest's head_dim 16) and the largest gap between an engine's logprobs and a model's on the same tokens."""

import torch

from rlvr.trainer.models.logprobs import pack, token_logprobs

VLLM_ARCH = dict(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=128, max_positions=128)


def max_logprob_diff(model, rollout, tokenizer, temperature) -> float:
    """max |model's logprob - engine's| over every sampled token of `rollout`, at `temperature`."""
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, batch, temperature)  # [N, L-1]
    diffs = []
    for i, engine_logprobs in enumerate(rollout.logprobs):
        mask = batch.completion_mask[i].bool()
        assert int(mask.sum()) == len(rollout.completion_ids[i]) == len(engine_logprobs)
        diffs.append((logprobs[i][mask] - engine_logprobs).abs().max().item())
    return max(diffs)
