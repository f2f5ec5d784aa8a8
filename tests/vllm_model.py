"""What the vLLM tests share: the tiny model's shape vLLM's CPU attention accepts (head_dim 32; it refuses
conftest's head_dim 16), the largest gap between an engine's logprobs and a model's on the same tokens, and two
GRPO steps of an adapter on vLLM whose second step checks the sync."""

import json

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


# a head_dim-32 tiny model warm-started briefly, 8 x 8 completions, 2 steps, no held-out eval between them
TWO_VLLM_STEPS = ["rollout=vllm", "env.digits=1", "model.warm_start.max_steps=50", "model.warm_start.eval_every=50",
                  "model.warm_start.eval_rows=20", "model.warm_start.lr=1e-2", "model.arch.hidden_size=64",
                  "model.arch.num_layers=2", "model.arch.num_heads=2", "model.arch.num_kv_heads=1",  # head_dim 32
                  "model.arch.intermediate_size=128", "train.prompts_per_step=8", "train.completions_per_prompt=8",
                  "train.steps=2", "train.eval_every=100", "train.eval_prompts=4", "optim.lr=1e-2", "threads=1"]


def two_synced_steps(compose_train, tmp_path, *overrides) -> list[dict]:
    """2 GRPO steps on vLLM with `overrides` (an adapter's keys): step 2 samples from the weights step 1 trained,
    so its engine/trainer logprob gap (at most 1e-3) checks what the sync handed the engine. The metrics lines."""
    from rlvr.trainer.run import train

    train(compose_train([*TWO_VLLM_STEPS, *overrides, f"output_dir={tmp_path}"]), log=lambda *_: None)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2]
    diffs = [m.get("rollout/logprob_diff_max", float("inf")) for m in lines[1:]]  # absent: no row was kept
    assert max(diffs) <= 1e-3, diffs
    return lines
