"""One step of each issue-6 algorithm on the tiny model: it runs, logs finite metrics and moves the
parameters; a TRPO step keeps the real KL within delta and improves the surrogate; PPO's state
(value head, adaptive beta) is carried in the context."""

import json
import math

import pytest
import torch

from rlvr.trainer.advantages import outcome_advantages
from rlvr.trainer.logprobs import pack
from rlvr.trainer.ppo import build_value_head
from rlvr.trainer.prompts import render_prompts
from rlvr.trainer.rollout import SamplingParams
from rlvr.trainer.rollout_hf import HFEngine
from rlvr.trainer.run import STEPS, RunContext
from rlvr.trainer.trpo import natural_gradient_update
from tests.test_trainer_step import STEP_OVERRIDES, AlternatingRewardEnv


def _context(cfg, lm):
    model = lm.model()
    value_head = build_value_head(model) if cfg.algo.name == "ppo" else None
    params = list(model.parameters()) + (list(value_head.parameters()) if value_head is not None else [])
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens)
    return RunContext(cfg, AlternatingRewardEnv(digits=1, ops=["+"]), lm.tokenizer, model, None,
                      HFEngine(model, lm.tokenizer), sampling, optimizer, scheduler, value_head)


@pytest.mark.parametrize("overrides", [
    ["algo=reinforce"], ["algo=reinforce", "algo.baseline=mean"], ["algo=ppo", "algo.mu=2"],
    ["algo=ppo", "algo.objective=penalty"], ["algo=trpo"], ["algo=npg"],
], ids=lambda o: "-".join(x.split("=")[1] for x in o))
def test_one_step_runs_and_changes_the_parameters(tiny_lm_sft, compose_train, overrides):
    cfg = compose_train(STEP_OVERRIDES + overrides)
    ctx = _context(cfg, tiny_lm_sft)
    before = {name: p.detach().clone() for name, p in ctx.model.named_parameters()}
    torch.manual_seed(0)
    metrics, samples = STEPS[cfg.algo.name](ctx, step=1)

    changed = [name for name, p in ctx.model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert len(changed) == len(before), f"unchanged: {sorted(set(before) - set(changed))}"
    assert metrics["reward/std"] > 0 and samples
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()), metrics
    json.dumps(metrics)
    if cfg.algo.name == "ppo":
        assert ctx.value_head.weight.abs().sum() > 0, "the value head must train"
    if cfg.algo.objective == "penalty" and cfg.algo.name == "ppo":
        assert ctx.state["penalty_beta"] in (0.5, 1.0, 2.0) and metrics["penalty_beta"] == ctx.state["penalty_beta"]
    if cfg.algo.name in ("trpo", "npg"):
        assert metrics["kl"] > 0
        assert cfg.algo.name == "npg" or metrics["kl"] <= cfg.algo.max_kl


def test_trpo_step_keeps_kl_within_delta_and_improves_the_surrogate(tiny_lm_sft):
    env = AlternatingRewardEnv(digits=1, ops=["+"])
    tok = tiny_lm_sft.tokenizer
    model = tiny_lm_sft.model()
    torch.manual_seed(0)
    rollout = HFEngine(model, tok).generate(render_prompts(tok, env, env.rows("train", 2, seed=0)),
                                            SamplingParams(n=4, max_new_tokens=16))
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id)
    rewards = torch.tensor([r.reward for r in env.score(rollout.texts, [None] * 8)]).view(2, 4)
    advantages = outcome_advantages(rewards, "rloo").flatten()  # [8]
    delta = 0.005
    metrics = natural_gradient_update(model, batch, advantages, max_kl=delta, cg_iters=10, micro_batch_size=4,
                                      max_tokens=16)
    assert metrics["step_frac"] > 0, metrics
    assert 0 < metrics["kl"] <= delta, metrics
    assert metrics["improve"] > 0, metrics
    # the quadratic model predicted a KL of delta for the full step: the real one is of that order
    assert metrics["kl"] >= 0.1 * delta * metrics["step_frac"] ** 2, metrics
