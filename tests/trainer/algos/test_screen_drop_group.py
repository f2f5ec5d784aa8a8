"""`reward.screen_mode=drop_group` removes a screened group from the loss of every algorithm family (GRPO,
REINFORCE, PPO, TRPO/NPG): a step on two groups, the second with a flagged completion, makes exactly the
update of a step on the first group alone; screening the group's rewards to 0 and keeping its rows does not.

The engine is scripted (fixed token ids whatever the prompt), so both steps see the same first group; SGD
keeps the comparison sensitive to the gradient's scale as well as its direction."""

import importlib

import pytest
import torch

from rlvr.envs.arithmetic import ArithmeticEnv
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from rlvr.trainer.models.critic import build_critic
from rlvr.trainer.rollout.types import Rollout, SamplingParams
from rlvr.trainer.context import RunContext
from rlvr.verifiers.result import Status, VerifyResult

G = 4
COMPLETIONS = [[5, 6, 7, 8, 2], [9, 10, 2], [11, 12, 13, 2], [14, 2],  # group 0: honest, rewards 1, 0, 1, 0
               [15, 16, 2], [17, 18, 19, 20, 21, 2], [22, 2], [23, 24, 2]]  # group 1: one flagged hack


class ScriptedEngine:
    """Row i of every call gets COMPLETIONS[i] after a fixed prompt (the prompts' text is ignored)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, params):
        rows = COMPLETIONS[: len(prompts) * params.n]
        return Rollout([[3, 4, 5, 6]] * len(rows), [list(c) for c in rows], [f"c{i}" for i in range(len(rows))],
                       [torch.full((len(c),), -1.0) for c in rows], [False] * len(rows))

    def sync_weights(self, model):
        pass


class ScriptedEnv(ArithmeticEnv):
    """Group 0 scores 1, 0, 1, 0; group 1 scores 1, 1, 0, 1 with its second completion flagged."""

    def score(self, completions, rows):
        rewards = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
        return [VerifyResult(rewards[i], Status.CORRECT if rewards[i] else Status.INCORRECT,
                             {"hacks": ["early_exit"]} if i == 5 else {}) for i in range(len(completions))]


FAMILIES = {
    "grpo": ["algo=grpo"], "dr_grpo": ["algo=dr_grpo"],
    "reinforce": ["algo=reinforce", "algo.baseline=mean"],
    "ppo": ["algo=ppo"], "trpo": ["algo=trpo", "algo.baseline=mean"],
}


def _step_params(lm, compose_train, overrides):
    cfg = compose_train(["train.completions_per_prompt=4", "train.micro_batch_size=4", "rollout.max_new_tokens=8",
                         "env.digits=1", *overrides])
    torch.manual_seed(0)
    model = lm.model()
    critic = build_critic(model, cfg.algo.critic) if cfg.algo.name == "ppo" else None
    params = list(model.parameters()) + (list(critic.parameters()) if critic is not None else [])
    optimizer = torch.optim.SGD(params, lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    ctx = RunContext(cfg, ScriptedEnv(digits=1, ops=["+"]), lm.tokenizer, model, None, ScriptedEngine(lm.tokenizer),
                     SamplingParams(n=G, max_new_tokens=8), optimizer, scheduler, critic)
    metrics, _ = train_step(ctx, 1, ALGORITHMS[cfg.algo.name])
    return torch.cat([p.detach().flatten() for p in params]), metrics


@pytest.mark.parametrize("family", FAMILIES)
def test_drop_group_trains_as_if_the_group_was_never_sampled(tiny_lm_sft, compose_train, family, monkeypatch):
    before = torch.cat([p.detach().flatten() for p in tiny_lm_sft.model().parameters()])
    drop = ["train.prompts_per_step=2", "reward.screen=true", "reward.screen_mode=drop_group"]
    alone, _ = _step_params(tiny_lm_sft, compose_train, FAMILIES[family] + ["train.prompts_per_step=1"])
    dropped, metrics = _step_params(tiny_lm_sft, compose_train, FAMILIES[family] + drop)
    # what drop_group did before it removed rows: the screened group kept in the batch at reward 0
    monkeypatch.setattr(importlib.import_module("rlvr.trainer.experience.collect"), "without_dropped_groups",
                        lambda ctx, sampled: (sampled, torch.ones(len(sampled.results), dtype=torch.bool)))
    zeroed, _ = _step_params(tiny_lm_sft, compose_train, FAMILIES[family] + drop)
    n = len(before)
    moved = (alone[:n] - before).abs().max()
    assert moved > 1e-6, "the step must move the policy, or the comparison proves nothing"
    # measured: dropped and alone differ by <= 3e-5 of the step (TRPO's conjugate gradient), 0 for GRPO
    assert (dropped - alone).abs().max() <= 1e-3 * moved
    assert (zeroed[:n] - alone[:n]).abs().max() > 0.05 * moved, "a group at reward 0 still moves the update"
    assert metrics["kept_frac"] == 0.5 and metrics["hack/screened_frac"] == 0.5


@pytest.mark.parametrize("family", ["reinforce", "ppo", "trpo"])
def test_a_step_that_drops_every_group_makes_no_update(tiny_lm_sft, compose_train, family):
    class AllFlagged(ScriptedEnv):
        def score(self, completions, rows):
            return [VerifyResult(1.0, Status.CORRECT, {"hacks": ["tamper"]}) for _ in completions]

    cfg = compose_train(["train.prompts_per_step=1", "train.completions_per_prompt=4", "rollout.max_new_tokens=8",
                         "env.digits=1", "reward.screen=true", "reward.screen_mode=drop_group", *FAMILIES[family]])
    model = tiny_lm_sft.model()
    critic = build_critic(model, cfg.algo.critic) if cfg.algo.name == "ppo" else None
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ctx = RunContext(cfg, AllFlagged(digits=1, ops=["+"]), tiny_lm_sft.tokenizer, model, None,
                     ScriptedEngine(tiny_lm_sft.tokenizer), SamplingParams(n=G, max_new_tokens=8), optimizer,
                     torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0), critic)
    before = [p.detach().clone() for p in model.parameters()]
    metrics, _ = train_step(ctx, 1, ALGORITHMS[cfg.algo.name])
    assert all(torch.equal(p, q) for p, q in zip(before, model.parameters()))
    assert metrics["kept_frac"] == 0.0 and metrics["hack/screened_frac"] == 1.0
