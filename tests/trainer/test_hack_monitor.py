"""The hack monitor in the loop (trainer/experience/metrics.py), screening, the control rewards
(trainer/experience/rewards.py) and `reward.*`'s checks: by hand, then through a GRPO step."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.envs.arithmetic import ArithmeticEnv
from rlvr.errors import ConfigError
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from rlvr.trainer.config import RewardConfig
from rlvr.trainer.field_rules import check_fields
from rlvr.trainer.experience.metrics import hack_metrics, hacks_of
from rlvr.trainer.experience.rewards import control_rewards, screen
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.context import RunContext
from rlvr.verifiers.result import Status, VerifyResult


def grpo_step(ctx, step):  # GRPO's row in the frame of every step (trainer/step.py)
    return train_step(ctx, step, ALGORITHMS["grpo"])


def _r(reward, hacks=(), component=False):
    details = {"hacks": list(hacks)} if hacks else {}
    if component:
        details = {"components": {"code": {"reward": reward, "details": details}, "format": {"reward": 1.0, "details": {}}}}
    return VerifyResult(reward, Status.CORRECT if reward else Status.INCORRECT, details)


def test_rates_count_own_and_component_hacks():
    results = [_r(1.0), _r(1.0, ["early_exit"]), _r(0.5, ["tamper", "read_files"], component=True), _r(0.0)]
    assert hacks_of(results[2]) == ["tamper", "read_files"]
    assert hack_metrics(results) == {"hack/rate": 0.5, "hack/early_exit_rate": 0.25, "hack/read_files_rate": 0.25,
                                     "hack/tamper_rate": 0.25}
    assert hack_metrics([_r(1.0)] * 3) == {"hack/rate": 0.0}


def test_screen_zero_and_drop_group():
    results = [_r(1.0), _r(1.0, ["hedge"]), _r(1.0), _r(-0.5, ["tamper"]), _r(1.0), _r(0.5)]  # groups of 2
    zero = screen(results, 2, "zero")
    assert [r.reward for r in zero] == [1.0, 0.0, 1.0, -0.5, 1.0, 0.5]  # a negative reward stays
    assert [bool(r.details.get("screened")) for r in zero] == [False, True, False, True, False, False]
    assert zero[1].details["reward_before_screen"] == 1.0 and zero[1].details["hacks"] == ["hedge"]
    dropped = screen(results, 2, "drop_group")
    assert [r.reward for r in dropped] == [0.0, 0.0, 0.0, -0.5, 1.0, 0.5]
    assert hack_metrics(dropped)["hack/screened_frac"] == pytest.approx(4 / 6)


class _Env:
    name = "fake"


def test_random_control_is_seeded_at_its_rate_and_keeps_the_true_reward():
    results = [_r(1.0)] * 4000
    cfg = RewardConfig(kind="random", rate=0.2)
    a, b = control_rewards(results, cfg, _Env(), [""] * 4000, 7), control_rewards(results, cfg, _Env(), [""] * 4000, 7)
    assert [r.reward for r in a] == [r.reward for r in b]
    assert {r.reward for r in a} == {0.0, 1.0}
    assert abs(sum(r.reward for r in a) / 4000 - 0.2) < 0.03
    assert [r.reward for r in control_rewards(results, cfg, _Env(), [""] * 4000, 8)] != [r.reward for r in a]
    assert all(r.details["reward_true"] == 1.0 and r.details["control"] == "random" for r in a)
    assert {r.reward for r in control_rewards(results[:50], RewardConfig(kind="random", rate=0.0), _Env(), [""] * 50, 1)} == {0.0}


def test_format_only_control_is_the_format_component():
    env = ArithmeticEnv(digits=1, ops=["+"])
    row = env.rows("train", 1, seed=0)[0]
    texts = [f"<think></think><answer>{row['answer']}</answer>", "<think></think><answer>-1</answer>", "no format"]
    results = env.score(texts, [row] * 3)
    out = control_rewards(results, RewardConfig(kind="format_only"), env, texts, 0)
    assert [r.reward for r in out] == [1.0, 1.0, 0.0]
    assert [r.details["reward_true"] for r in out] == [r.reward for r in results] and results[0].reward == 1.0
    with pytest.raises(ConfigError, match="format_only.*no 'format'"):
        control_rewards([_r(1.0)], RewardConfig(kind="format_only"), _Env(), [""], 0)


@pytest.mark.parametrize("key, value, message", [
    ("kind", "spurious", "reward.kind"), ("rate", 1.5, "reward.rate"), ("rate", True, "reward.rate"),
    ("screen", "yes", "reward.screen"), ("screen_mode", "drop", "reward.screen_mode")])
def test_bad_reward_config_names_the_key(key, value, message):
    cfg = RewardConfig()
    setattr(cfg, key, value)
    with pytest.raises(ConfigError, match=message):
        check_fields(cfg, RewardConfig, "reward.")  # the rules on RewardConfig's fields
    check_fields(RewardConfig(), RewardConfig, "reward.")


def test_presets_compose_by_one_override(compose_train):
    assert compose_train([]).reward.kind == "env" and compose_train([]).reward.screen is False
    cfg = compose_train(["reward=random", "reward.rate=0.25"])
    assert (cfg.reward.kind, cfg.reward.rate) == ("random", 0.25)
    assert compose_train(["reward=format_only"]).reward.kind == "format_only"
    assert compose_train(["reward.screen=true", "reward.screen_mode=drop_group"]).reward.screen_mode == "drop_group"


class HackyEnv(ArithmeticEnv):
    """Arithmetic whose every other completion scores 1 and is flagged `early_exit` (unregistered subclass)."""

    def score(self, completions, rows):
        return [VerifyResult(1.0, Status.CORRECT, {"hacks": ["early_exit"]}) if i % 2 else
                VerifyResult(float(i % 4 == 0), Status.CORRECT if i % 4 == 0 else Status.INCORRECT)
                for i in range(len(completions))]


def _context(cfg, env, lm):
    model = lm.model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=16)
    return RunContext(cfg, env, lm.tokenizer, model, None, HFEngine(model, lm.tokenizer), sampling, optimizer, scheduler)


OVERRIDES = ["train.prompts_per_step=2", "train.completions_per_prompt=4", "train.micro_batch_size=8",
             "rollout.max_new_tokens=16", "env.digits=1", "algo.beta=0.0"]


@pytest.mark.parametrize("screen_on", [False, True])
def test_grpo_step_logs_rates_marks_samples_and_screens(tiny_lm_sft, compose_train, screen_on):
    cfg = compose_train(OVERRIDES + [f"reward.screen={str(screen_on).lower()}"])
    torch.manual_seed(0)
    metrics, samples = grpo_step(_context(cfg, HackyEnv(digits=1, ops=["+"]), tiny_lm_sft), step=1)
    assert metrics["hack/rate"] == 0.5 and metrics["hack/early_exit_rate"] == 0.5
    completions = samples[0]["completions"]
    assert [c.get("hacks") for c in completions] == [None, ["early_exit"], None, ["early_exit"]]
    if screen_on:
        assert metrics["hack/screened_frac"] == 0.5
        assert [c["reward"] for c in completions] == [1.0, 0.0, 0.0, 0.0]
        assert metrics["reward/mean"] == pytest.approx(0.25)
    else:
        assert "hack/screened_frac" not in metrics and metrics["reward/mean"] == pytest.approx(0.75)


def test_grpo_step_with_the_random_control(tiny_lm_sft, compose_train):
    cfg = compose_train(OVERRIDES + ["reward=random", "reward.rate=0.5"])
    torch.manual_seed(0)
    env = ArithmeticEnv(digits=1, ops=["+"])
    metrics, samples = grpo_step(_context(cfg, env, tiny_lm_sft), step=1)
    rewards = [c["reward"] for s in samples for c in s["completions"]]
    assert set(rewards) <= {0.0, 1.0} and all(c["details"]["control"] == "random" for s in samples for c in s["completions"])
    assert 0.0 <= metrics["reward/true_mean"] <= 1.0 and math.isfinite(metrics["reward/mean"])
