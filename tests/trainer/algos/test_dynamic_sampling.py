"""DAPO's dynamic sampling with resampling (trainer/experience/rewards.py, stage 6): groups whose rewards are all
equal are dropped and further rounds of prompts are sampled until `prompts_per_step` groups with
mixed outcomes are found, in draw order, the same with one process as over ranks."""

from __future__ import annotations

import pytest
import torch

from rlvr.trainer.algos import grpo
from rlvr.trainer.experience.collect import first_survivors
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from rlvr.verifiers.result import Status, VerifyResult
from tests.trainer.test_trainer_step import STEP_OVERRIDES, AlternatingRewardEnv, _context

T, F = True, False


def test_first_survivors_in_draw_order_round_then_rank_then_prompt():
    survived = torch.tensor([
        [[T, F], [F, F]],  # round 0: rank 0's two prompts, rank 1's two prompts
        [[T, T], [F, T]],  # round 1
    ])
    chosen = first_survivors(survived, target=3)
    assert chosen.tolist() == [[[T, F], [F, F]], [[T, T], [F, F]]]  # the 4th survivor (round 1, rank 1) is surplus
    assert first_survivors(survived, target=10).equal(survived)  # too few: all of them
    assert not first_survivors(survived, target=0).any()


class ScriptedGroupsEnv(AlternatingRewardEnv):
    """Each score() call (one sampling round) gives its groups the next scripted pattern:
    'mixed' = 1, 0, 1, 0; '0' = all wrong; '1' = all right."""

    def __init__(self, rounds: list[list[str]], **kwargs):
        super().__init__(**kwargs)
        self.rounds = list(rounds)

    def score(self, completions, rows):
        patterns = self.rounds.pop(0)
        size = len(completions) // len(patterns)
        rewards = []
        for pattern in patterns:
            rewards += [float(i % 2) if pattern == "mixed" else float(pattern) for i in range(size)]
        return [VerifyResult(r, Status.CORRECT if r else Status.INCORRECT) for r in rewards]


def _run_step(compose_train, lm, monkeypatch, rounds, extra=()):
    cfg = compose_train(STEP_OVERRIDES + ["algo=dapo", "algo.overlong_buffer=0", *extra])
    ctx = _context(cfg, ScriptedGroupsEnv(rounds, digits=1, ops=["+"]), lm, cfg.optim.lr)
    prompts, generate = [], ctx.engine.generate
    ctx.engine.generate = lambda texts, params: prompts.append(list(texts)) or generate(texts, params)
    trained = []
    accumulate = grpo.accumulate_gradients
    monkeypatch.setattr(grpo, "accumulate_gradients",
                        lambda model, batch, advantages, *a, **k: trained.append(advantages.clone())
                        or accumulate(model, batch, advantages, *a, **k))
    torch.manual_seed(0)
    metrics, _ = train_step(ctx, 1, ALGORITHMS["dapo"])
    return metrics, prompts, trained


def test_resamples_until_the_batch_is_full(tiny_lm_sft, compose_train, monkeypatch):
    # B = 2 prompts per step, G = 4: round 0 has one survivor, round 1 none, round 2 two (one is surplus)
    rounds = [["0", "mixed"], ["1", "0"], ["mixed", "mixed"]]
    metrics, prompts, trained = _run_step(compose_train, tiny_lm_sft, monkeypatch, rounds)
    assert metrics["dynamic_sampling/rounds"] == 3 and len(prompts) == 3
    assert prompts[0] != prompts[1], "each round draws fresh prompts"
    assert metrics["kept_frac"] == pytest.approx(2 / 6)  # 2 groups trained on, of 6 sampled
    # the reward metrics are round 0's (the step's usual draw, comparable across algorithms): (0 + 2) / 8
    assert metrics["reward/mean"] == pytest.approx(2 / 8)
    assert len(trained) == 1 and trained[0].shape == (8,), "one update on exactly B = 2 groups of 4"
    assert trained[0].abs().min() > 0, "only groups with mixed outcomes (non-zero advantages) are trained on"


def test_stops_after_max_resample_rounds_and_trains_on_what_it_has(tiny_lm_sft, compose_train, monkeypatch):
    rounds = [["0", "0"], ["mixed", "1"]]
    metrics, prompts, trained = _run_step(compose_train, tiny_lm_sft, monkeypatch, rounds,
                                          ["algo.max_resample_rounds=1"])
    assert metrics["dynamic_sampling/rounds"] == 2 and len(prompts) == 2
    assert len(trained) == 1 and trained[0].shape == (4,)


def test_without_resampling_dropped_groups_are_not_replaced(tiny_lm_sft, compose_train, monkeypatch):
    rounds = [["mixed", "1"]]
    metrics, prompts, trained = _run_step(compose_train, tiny_lm_sft, monkeypatch, rounds,
                                          ["algo.max_resample_rounds=0"])
    assert metrics["dynamic_sampling/rounds"] == 1 and len(prompts) == 1
    assert metrics["kept_frac"] == pytest.approx(0.5) and trained[0].shape == (4,)


def test_resampling_needs_the_filter(compose_train):
    from rlvr.trainer.validate import validate_train_config
    from rlvr.errors import ConfigError

    cfg = compose_train(["algo=grpo", "algo.max_resample_rounds=2"])
    with pytest.raises(ConfigError, match="algo.max_resample_rounds=2 .*filter_zero_variance_groups"):
        validate_train_config(cfg)
