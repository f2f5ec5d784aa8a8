"""GSPO (Zheng et al. 2025): the sequence-level ratio, its per-sequence clip and gradient, derived by hand;
and the honest equivalence: at ratio 1 GSPO's gradient is GRPO's (seq_mean_token_mean)."""

import math

import pytest
import torch

from rlvr.trainer.algos.losses import grpo_loss, sequence_log_ratio

EPS_LOW, EPS_HIGH = 0.05, 0.1


def _three_sequences():
    # row 0: 2 tokens, log-ratio (logprobs - old) = +0.2, -0.4        -> mean -0.1, s = exp(-0.1) = 0.904837
    # row 1: 3 tokens, log-ratio 0, +0.3, -0.3                       -> mean 0,    s = 1
    # row 2: 1 token,  log-ratio +0.05                               -> mean 0.05, s = exp(0.05) = 1.051271
    logprobs = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5], [-0.3, 0.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-1.2, -1.6, 0.0], [-0.5, -0.8, -0.2], [-0.35, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    advantages = torch.tensor([-1.0, -2.0, 0.5])
    return logprobs, old, mask, advantages


def test_sequence_ratio_is_the_geometric_mean_of_token_ratios():
    logprobs, old, mask, _ = _three_sequences()
    s = sequence_log_ratio(logprobs, old, mask).exp().squeeze(-1)
    torch.testing.assert_close(s, torch.tensor([math.exp(-0.1), 1.0, math.exp(0.05)]))
    # geometric mean of row 0's token ratios: sqrt(exp(0.2) * exp(-0.4)) = exp(-0.1)
    assert s[0].item() == pytest.approx(math.sqrt(math.exp(0.2) * math.exp(-0.4)))


def test_gspo_loss_and_gradient_hand_computed():
    logprobs, old, mask, advantages = _three_sequences()
    loss, metrics = grpo_loss(logprobs, old, advantages, mask, clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH,
                              aggregation="seq_mean_token_mean", importance_level="sequence")
    # row 0: A = -1, s = 0.904837 < 1 - 0.05 -> clipped: min(-0.904837, 0.95 * -1) = -0.95 (no gradient)
    # row 1: A = -2, s = 1 -> -2
    # row 2: A = 0.5, s = 1.051271 < 1.1 -> not clipped: 0.5 * 1.051271 = 0.525636
    # loss = -(1/3) (-0.95 - 2 + 0.525636) = 0.808121
    assert loss.item() == pytest.approx(-(-0.95 - 2 + 0.5 * math.exp(0.05)) / 3, abs=1e-6)
    assert loss.item() == pytest.approx(0.808121, abs=1e-6)
    loss.backward()
    # d loss / d logprob_it = -(1/N) A_i s_i / |o_i| on unclipped rows, 0 on the clipped row and padding:
    # row 1: -(1/3)(-2)(1)/3 = 2/9 per token;  row 2: -(1/3)(0.5)(1.051271)/1 = -0.175212
    expected = torch.tensor([[0.0, 0.0, 0.0], [2 / 9, 2 / 9, 2 / 9], [-0.5 * math.exp(0.05) / 3, 0.0, 0.0]])
    torch.testing.assert_close(logprobs.grad, expected)
    # clip_frac counts tokens of clipped sequences: row 0's 2 of 6 tokens
    assert metrics["clip_frac"].item() == pytest.approx(2 / 6)
    # ratio_mean, token-weighted: (2 * 0.904837 + 3 * 1 + 1 * 1.051271) / 6 = 0.976824
    assert metrics["ratio_mean"].item() == pytest.approx((2 * math.exp(-0.1) + 3 + math.exp(0.05)) / 6, abs=1e-6)


def test_token_level_clips_tokens_where_gspo_clips_sequences():
    logprobs, old, mask, advantages = _three_sequences()
    loss, _ = grpo_loss(logprobs, old, advantages, mask, clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH,
                        aggregation="seq_mean_token_mean", importance_level="token")
    loss.backward()
    # token level, row 0 (A = -1): token 0's ratio exp(0.2) = 1.2214 is not clipped for A < 0, so it keeps a
    # gradient -(1/3)(-1)(1.2214)/2 = 0.203567; token 1's ratio exp(-0.4) = 0.67 < 0.95 is clipped -> 0.
    assert logprobs.grad[0, 0].item() == pytest.approx(math.exp(0.2) / 6, abs=1e-6)
    assert logprobs.grad[0, 1].item() == 0.0


def test_at_ratio_one_gspo_gradient_equals_grpo_seq_mean_token_mean():
    gen = torch.Generator().manual_seed(0)
    logprobs = -2 * torch.rand(5, 6, generator=gen)  # [N, T]
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 1, 3, 4, 2])[:, None]).long()  # [N, T]
    advantages = torch.randn(5, generator=gen)
    grads = {}
    for level in ("token", "sequence"):
        lp = logprobs.clone().requires_grad_()
        loss, metrics = grpo_loss(lp, lp.detach(), advantages, mask, clip_eps_low=3e-4, clip_eps_high=4e-4,
                                  aggregation="seq_mean_token_mean", importance_level=level)
        loss.backward()
        grads[level] = lp.grad
        assert metrics["clip_frac"].item() == 0.0
    # both are -(1/N) A_i / |o_i| on every real token: mu = 1 makes algo=gspo train exactly like algo=grpo
    torch.testing.assert_close(grads["sequence"], grads["token"])
    expected = -advantages[:, None] / mask.sum(-1, keepdim=True) / 5 * mask
    torch.testing.assert_close(grads["sequence"], expected)


def test_unknown_importance_level_is_refused():
    logprobs, old, mask, advantages = _three_sequences()
    with pytest.raises(ValueError, match="importance_level"):
        grpo_loss(logprobs, old, advantages, mask, importance_level="sentence")


@pytest.mark.parametrize("overrides,key", [
    (["algo=gspo", "algo.aggregation=token_mean"], "algo.aggregation"),
    (["algo=reinforce", "algo.importance_level=sequence"], "algo.importance_level"),
    (["algo=gspo", "algo.importance_level=word"], "algo.importance_level"),
    (["algo=dapo", "rollout.max_new_tokens=3"], "algo.overlong_buffer"),
    (["algo=reinforce", "algo.overlong_buffer=2"], "algo.overlong_buffer"),  # ppo's schema has no such key
    (["algo=ppo", "algo.critic=twin"], "algo.critic"),
])
def test_bad_gspo_dapo_and_critic_settings_are_refused_naming_the_key(compose_train, overrides, key):
    from rlvr.trainer.validate import validate_train_config
    from rlvr.errors import ConfigError

    validate_train_config(compose_train([overrides[0]]))  # the preset alone is valid
    with pytest.raises(ConfigError, match=key):
        validate_train_config(compose_train(overrides))
