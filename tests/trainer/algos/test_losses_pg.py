"""Hand-derived values for the policy-gradient family's math: REINFORCE baselines and loss,
GAE, the clipped value loss, PPO-penalty and its adaptive beta, conjugate gradient. The arithmetic
is written out beside each expected value."""

import math

import pytest
import torch

from rlvr.trainer.algos.advantages import gae, leave_one_out_advantages, outcome_advantages
from rlvr.trainer.algos.losses import reinforce_loss
from rlvr.trainer.algos.trpo import conjugate_gradient
from rlvr.trainer.algos.ppo_losses import adaptive_beta, ppo_penalty_loss, value_loss


def test_rloo_and_mean_baselines():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    # group 0: A_0 = 1 - (0+0+1)/3 = 2/3;  A_1 = 0 - (1+0+1)/3 = -2/3;  likewise A_2 = -2/3, A_3 = 2/3
    # group 1: every reward equals the others' mean -> 0
    expected = torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(leave_one_out_advantages(rewards), expected)
    torch.testing.assert_close(outcome_advantages(rewards, "rloo"), expected)
    # identity: G/(G-1) (r - mean): 4/3 * (1 - 0.5) = 2/3
    torch.testing.assert_close(expected[0, 0], torch.tensor(4 / 3 * 0.5))
    # mean over the whole batch: (2 + 4) / 8 = 0.75 -> r - 0.75
    torch.testing.assert_close(outcome_advantages(rewards, "mean"), rewards - 0.75)
    torch.testing.assert_close(outcome_advantages(rewards, "none"), rewards)
    with pytest.raises(ValueError):
        outcome_advantages(rewards, "median")


def test_reinforce_loss_hand_computed():
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    advantages = torch.tensor([2.0, -1.0])
    # -A * logprob: row 0 -> [2, 4]; row 1 -> [-0.5, (masked)]
    # seq_mean_token_mean: (mean(2, 4) + mean(-0.5)) / 2 = (3 - 0.5) / 2 = 1.25
    loss, _ = reinforce_loss(logprobs, advantages, mask, aggregation="seq_mean_token_mean")
    assert loss.item() == pytest.approx(1.25)
    # token_mean: (2 + 4 - 0.5) / 3
    loss, _ = reinforce_loss(logprobs, advantages, mask, aggregation="token_mean")
    assert loss.item() == pytest.approx(5.5 / 3)
    loss.backward()  # d/dlogprob = -A / 3 on real tokens, 0 on padding
    torch.testing.assert_close(logprobs.grad, torch.tensor([[-2 / 3, -2 / 3], [1 / 3, 0.0]]))


def test_gae_hand_computed_trajectory():
    gamma, lam = 0.9, 0.5  # gamma * lam = 0.45
    # row 0: a prompt column (masked), then 3 completion tokens, reward 1 on the last
    # row 1: 2 completion tokens, reward 2 on the last, then padding whose values must be ignored
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 2.0, 0.0, 0.0]])
    values = torch.tensor([[9.0, 0.5, 0.6, 0.8], [1.0, 1.0, 5.0, 5.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    advantages, returns = gae(rewards, values, mask, gamma, lam)
    # row 0, t=3: delta = 1 + 0.9*0 - 0.8 = 0.2                 A = 0.2
    #        t=2: delta = 0 + 0.9*0.8 - 0.6 = 0.12              A = 0.12 + 0.45*0.2 = 0.21
    #        t=1: delta = 0 + 0.9*0.6 - 0.5 = 0.04              A = 0.04 + 0.45*0.21 = 0.1345
    # row 1, t=1: delta = 2 + 0.9*0 - 1 = 1  (V after the end = 0, not the padding's 5)   A = 1
    #        t=0: delta = 0 + 0.9*1 - 1 = -0.1                  A = -0.1 + 0.45*1 = 0.35
    expected = torch.tensor([[0.0, 0.1345, 0.21, 0.2], [0.35, 1.0, 0.0, 0.0]])
    torch.testing.assert_close(advantages, expected)
    # returns = A + V on the mask: [0.6345, 0.81, 1.0] and [1.35, 2.0]
    torch.testing.assert_close(returns, torch.tensor([[0.0, 0.6345, 0.81, 1.0], [1.35, 2.0, 0.0, 0.0]]))


def test_gae_with_gamma_lambda_one_is_return_minus_value():
    rewards = torch.tensor([[0.5, 0.0, 1.0]])
    values = torch.tensor([[0.2, 0.3, 0.4]])
    mask = torch.ones(1, 3)
    advantages, returns = gae(rewards, values, mask, 1.0, 1.0)
    # Monte Carlo: return-to-go [1.5, 1.0, 1.0] minus V
    torch.testing.assert_close(advantages, torch.tensor([[1.3, 0.7, 0.6]]))
    torch.testing.assert_close(returns, torch.tensor([[1.5, 1.0, 1.0]]))


def test_value_loss_clipping_hand_computed():
    values = torch.tensor([[1.0, 0.4]])
    old_values = torch.tensor([[0.5, 0.5]])
    returns = torch.tensor([[2.0, 0.0]])
    mask = torch.ones(1, 2)
    # token 0: (1 - 2)^2 = 1;  V_clip = 0.5 + clip(0.5, -0.2, 0.2) = 0.7, (0.7 - 2)^2 = 1.69 -> max 1.69 (clipped)
    # token 1: (0.4 - 0)^2 = 0.16; V_clip = 0.5 + clip(-0.1) = 0.4, same 0.16 -> 0.16 (not clipped)
    # loss = 1/2 * (1.69 + 0.16) / 2 = 0.4625
    loss, metrics = value_loss(values, old_values, returns, mask, 0.2)
    assert loss.item() == pytest.approx(0.4625)
    assert metrics["vf_clip_frac"].item() == pytest.approx(0.5)
    # unclipped: 1/2 * (1 + 0.16) / 2 = 0.29
    loss, _ = value_loss(values, old_values, returns, mask, None)
    assert loss.item() == pytest.approx(0.29)


def test_ppo_penalty_loss_hand_computed():
    logprobs = torch.tensor([[math.log(0.5)]])
    old_logprobs = torch.tensor([[math.log(0.25)]])
    mask = torch.ones(1, 1)
    # ratio = 0.5 / 0.25 = 2; A = 1
    # KL(old || new) by k3 on the old policy's token: r = new/old = 2 -> (r - 1) - log r = 1 - ln 2 = 0.306853
    # loss = -(2 * 1) + 0.5 * 0.306853 = -1.846574
    loss, metrics = ppo_penalty_loss(logprobs, old_logprobs, torch.tensor([1.0]), mask, beta=0.5)
    assert loss.item() == pytest.approx(-2 + 0.5 * (1 - math.log(2)), rel=1e-6)
    assert metrics["kl_old"].item() == pytest.approx(1 - math.log(2), rel=1e-6)
    assert metrics["ratio_mean"].item() == pytest.approx(2.0)


def test_adaptive_beta_on_a_scripted_kl_sequence():
    # d0 = 0.01: the band is [0.01/1.5, 1.5*0.01] = [0.006667, 0.015]
    kl_target, beta = 0.01, 1.0
    script = [
        (0.020, 2.0),   # 0.020 > 0.015       -> double: 1 -> 2
        (0.016, 4.0),   # 0.016 > 0.015       -> double: 2 -> 4
        (0.012, 4.0),   # inside the band     -> unchanged
        (0.005, 2.0),   # 0.005 < 0.006667    -> halve: 4 -> 2
        (0.0066, 1.0),  # 0.0066 < 0.006667   -> halve: 2 -> 1
        (0.015, 1.0),   # on the upper edge (not >) -> unchanged
        (0.01 / 1.5, 1.0),  # on the lower edge (not <) -> unchanged
    ]
    for kl, expected in script:
        beta = adaptive_beta(beta, kl, kl_target)
        assert beta == expected, (kl, beta)


def test_conjugate_gradient_solves_a_known_spd_system():
    a = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    b = torch.tensor([1.0, 2.0], dtype=torch.float64)
    # det = 4*3 - 1*1 = 11; A^-1 = 1/11 [[3, -1], [-1, 4]]; x = 1/11 [3 - 2, -1 + 8] = [1/11, 7/11]
    # CG is exact on an n x n SPD system in n = 2 iterations
    x = conjugate_gradient(lambda v: a @ v, b, iters=2)
    torch.testing.assert_close(x, torch.tensor([1 / 11, 7 / 11], dtype=torch.float64))
    # one iteration is the steepest-descent step alpha * b, alpha = b.b / b.A b = 5 / (b.[6, 7]) = 5 / 20
    x1 = conjugate_gradient(lambda v: a @ v, b, iters=1)
    torch.testing.assert_close(x1, 0.25 * b)
    # a larger random SPD system: 20 iterations reach the direct solve
    g = torch.Generator().manual_seed(0)
    m = torch.randn(20, 20, generator=g, dtype=torch.float64)
    spd = m @ m.T + 20 * torch.eye(20, dtype=torch.float64)
    rhs = torch.randn(20, generator=g, dtype=torch.float64)
    torch.testing.assert_close(conjugate_gradient(lambda v: spd @ v, rhs, iters=20, residual_tol=1e-20),
                               torch.linalg.solve(spd, rhs))


def test_dapo_overlong_penalty_hand_computed():
    from rlvr.trainer.experience.rewards import overlong_penalty

    lengths = torch.tensor([10, 12, 13, 14, 16, 20])
    # L_max = 16, L_cache = 4 -> expected length L_max - L_cache = 12 (DAPO eq. 13)
    # 10, 12 -> 0;  13 -> (12 - 13) / 4 = -0.25;  14 -> -0.5;  16 = L_max -> (12 - 16) / 4 = -1;  20 > L_max -> -1
    expected = torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    torch.testing.assert_close(overlong_penalty(lengths, max_tokens=16, buffer=4), expected)
    torch.testing.assert_close(overlong_penalty(lengths, max_tokens=16, buffer=4, factor=0.5), 0.5 * expected)
    torch.testing.assert_close(overlong_penalty(lengths, max_tokens=16, buffer=0), torch.zeros(6))  # off
