"""Every policy-gradient algorithm runs with `rollout=vllm`: two steps of each step function sample
from one shared vLLM engine, log finite metrics, move every parameter, and leave the engine holding
the updated policy (its logprobs are the trainer's again after the step's weight sync).

vLLM's CPU attention needs head_dim >= 32, so the model is tests/trainer/rollout/test_rollout_vllm.py's head_dim-32 model
after 60 supervised steps. One engine serves every algorithm: before each algorithm it is synced to a fresh
copy of the supervised model. Rewards come from AlternatingRewardEnv (1, 0, 1, 0, ...), so every group
has reward variance and every algorithm has a gradient whatever the model writes.
"""

import copy
import math

import pytest
import torch

from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.models.critic import build_critic
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.factory import build_engine
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.algos.table import ALGORITHMS as TABLE
from rlvr.trainer.step import train_step
from rlvr.trainer.context import RunContext
from tests.trainer.rollout.test_rollout_vllm import sft_model  # noqa: F401  (the head_dim-32 supervised model fixture)
from tests.trainer.test_trainer_step import STEP_OVERRIDES, AlternatingRewardEnv

pytestmark = pytest.mark.xdist_group("vllm")  # one xdist worker: a starting vLLM engine takes both cores

ALGORITHMS = [["algo=grpo"], ["algo=dr_grpo"], ["algo=dapo"], ["algo=gspo", "algo.mu=2"], ["algo=reinforce"],
              ["algo=ppo", "algo.mu=2"], ["algo=ppo", "algo.objective=penalty", "algo.mu=2"],
              ["algo=ppo", "algo.critic=model", "algo.mu=2"], ["algo=trpo", "algo.cg_iters=3"],
              ["algo=npg", "algo.cg_iters=3"]]


@pytest.fixture(scope="module")
def engine(sft_model, tiny_lm, require_vllm):
    engine = build_engine("vllm", sft_model, tiny_lm.tokenizer, {"seed": 0})
    yield engine
    engine.shutdown()


def _max_logprob_diff(engine, model, tok, prompts) -> float:
    """max |engine logprob - trainer logprob| over the completion tokens of a fresh engine sample."""
    rollout = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=12))
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id)
    with torch.no_grad():
        logprobs = token_logprobs(model, batch, 1.0)[0]  # [N, L-1]
    return max((logprobs[i][batch.completion_mask[i].bool()] - theirs).abs().max().item()
               for i, theirs in enumerate(rollout.logprobs))


@pytest.mark.parametrize("overrides", ALGORITHMS, ids=["grpo", "dr_grpo", "dapo", "gspo", "reinforce", "ppo",
                                                    "ppo-penalty", "ppo-critic-model", "trpo", "npg"])
def test_two_steps_with_vllm(engine, sft_model, tiny_lm, compose_train, overrides):
    cfg = compose_train(STEP_OVERRIDES + ["rollout=vllm"] + overrides)
    tok = tiny_lm.tokenizer
    model = copy.deepcopy(sft_model).train()
    critic_module = build_critic(model, cfg.algo.critic) if cfg.algo.name == "ppo" else None
    params = list(model.parameters()) + (list(critic_module.parameters()) if critic_module is not None else [])
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens)
    env = AlternatingRewardEnv(digits=1, ops=["+"])
    ctx = RunContext(cfg, env, tok, model, None, engine, sampling, optimizer, scheduler, critic_module)
    engine.sync_weights(model)  # the previous algorithm left its policy in the engine
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    torch.manual_seed(0)
    for step in (1, 2):
        metrics, samples = train_step(ctx, step, TABLE[cfg.algo.name])
        assert metrics["step"] == step and samples
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()), metrics
        assert metrics["time/sync"] > 0, "the step must push its update into the engine"
        if "rollout/logprob_diff_max" in metrics:  # the GRPO family measures the sampler/trainer mismatch
            assert metrics["rollout/logprob_diff_max"] <= 1e-3, metrics

    changed = [name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert len(changed) == len(before), f"unchanged: {sorted(set(before) - set(changed))}"
    prompts = render_prompts(tok, env, env.rows("test", 3, seed=0))
    assert _max_logprob_diff(engine, model, tok, prompts) <= 1e-3, "after the sync the engine must be the policy"
    assert _max_logprob_diff(engine, sft_model, tok, prompts) > 1e-3, "...and no longer the model it started from"
