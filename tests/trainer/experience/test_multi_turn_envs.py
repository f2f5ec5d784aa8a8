"""The built-in multi-turn environments and a training step on one with each policy-gradient family:
guess_number (no tools; envs/guess_number.py). The tool environment's sandboxed steps are in
tests/sandboxes/test_python_session.py."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.envs import load_env
from rlvr.envs.guess_number import GuessNumberEnv
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from tests.trainer.algos.test_algorithm_steps import _context
from tests.trainer.test_trainer_step import STEP_OVERRIDES


def test_guess_number_rows_split_by_secret_and_the_game_replies():
    env = load_env("guess_number", high=40)
    test = {r["secret"] for r in env.rows("test", env.test_size())}
    train = {r["secret"] for r in env.rows("train", 200, seed=1)}
    assert test and not test & train and test | train <= set(range(1, 41))
    row = env.rows("train", 1)[0]
    secret = row["secret"]
    assert env.step(row, {}, f"<answer>{secret}</answer>").done
    if secret > 1:
        assert env.step(row, {}, "<think></think><answer>1</answer>").messages == [{"role": "user", "content": "higher"}]
    if secret < 40:
        assert env.step(row, {}, "<answer>40</answer>").messages == [{"role": "user", "content": "lower"}]
    assert "<answer>N</answer>" in env.step(row, {}, "seven").messages[0]["content"]
    with pytest.raises(Exception, match="'high'"):
        load_env("guess_number", high=1)


def test_tool_multiply_rows_and_parameters():
    env = load_env("tool_multiply", digits=3)
    rows = env.rows("test", 5)
    assert all(100 <= r["a"] < 1000 and r["answer"] == str(r["a"] * r["b"]) for r in rows)
    assert env.tools[0]["function"]["name"] == "python" and "<tool_call>" in rows[0]["messages"][0]["content"]
    with pytest.raises(Exception, match="'sandbox_backend'"):
        load_env("tool_multiply", sandbox_backend="vm")


class ArithmeticPromptGuess(GuessNumberEnv):
    """guess_number whose prompt is a one-digit sum, which tiny_lm_sft answers as `<think></think><answer>N</answer>`
    then EOS (on guess_number's own prompt it rambles to the length limit), so trajectories reach later turns."""

    def _row(self, secret):
        return {**super()._row(secret), "messages": [{"role": "user", "content": f"{secret % 5}+{secret // 2}="}]}


@pytest.mark.parametrize("algo", ["grpo", "reinforce", "ppo", "trpo"])
def test_one_step_on_a_multi_turn_env(tiny_lm_sft, compose_train, algo):
    cfg = compose_train(STEP_OVERRIDES + [f"algo={algo}"])
    ctx = _context(cfg, tiny_lm_sft)
    ctx.env = ArithmeticPromptGuess(high=9, max_turns=3)
    torch.manual_seed(0)
    metrics, samples = train_step(ctx, 1, ALGORITHMS[algo])
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()), metrics
    assert 1 < metrics["turns/mean"] <= 3 and metrics["tool_calls/mean"] == 0
    assert sum(metrics[f"end/{r}"] for r in ("done", "max_turns", "token_budget", "truncated")) == pytest.approx(1)
    trajectory = samples[0]["completions"][0]["trajectory"]
    assert [s["mask"] for s in trajectory["segments"]] == [1, 0] * (len(trajectory["segments"]) // 2) + [1] * (len(trajectory["segments"]) % 2)
    assert all(s["role"] == ("assistant" if s["mask"] else "environment") for s in trajectory["segments"])
    json.dumps(samples)


@pytest.mark.parametrize("overrides, says", [(["algo=dpo", "data=scored.jsonl"], "offline data holds one-turn"),
                                             (["algo=dapo"], "algo.overlong_buffer")])
def test_what_is_not_built_for_multi_turn_is_refused_by_name(compose_train, overrides, says):
    from rlvr.errors import ConfigError
    from rlvr.trainer.validate import validate_multi_turn

    cfg = compose_train(overrides)
    with pytest.raises(ConfigError, match=says):
        validate_multi_turn(cfg, load_env("guess_number"))
    validate_multi_turn(cfg, load_env("arithmetic"))  # one-turn environments: unchanged


def test_response_length_counts_sampled_tokens_only(tiny_lm_sft, compose_train):
    from rlvr.trainer.experience.collect import sample_and_score
    from rlvr.trainer.experience.metrics import step_metrics_and_samples

    cfg = compose_train(STEP_OVERRIDES)
    ctx = _context(cfg, tiny_lm_sft)
    ctx.env = ArithmeticPromptGuess(high=9, max_turns=3)
    torch.manual_seed(0)
    sampled = sample_and_score(ctx, 1, {})
    metrics, _ = step_metrics_and_samples(ctx, 1, sampled, {"generate": 1.0}, {})
    mask = sampled.rollout.loss_mask
    assert metrics["response_len/mean"] == pytest.approx(sum(map(sum, mask)) / len(mask))
    assert sum(map(sum, mask)) < sum(map(len, mask))  # some trajectory had an environment reply
