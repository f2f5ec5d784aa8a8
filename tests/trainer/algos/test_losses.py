"""Hand-derived values for rlvr.trainer.algos.losses and rlvr.trainer.algos.advantages (arithmetic in comments)."""

import math

import pytest
import torch

from rlvr.trainer.algos.advantages import group_advantages, zero_variance_groups
from rlvr.trainer.algos.losses import aggregate, clipped_surrogate, grpo_loss, kl_penalty


def _surrogate_objective(ratio: float, advantage: float, eps_low: float = 0.2, eps_high: float = 0.2):
    """Objective (= -loss) of one token with the given ratio, and d objective / d logprob."""
    logprobs = torch.tensor([[math.log(ratio)]], dtype=torch.float64, requires_grad=True)  # ratio = exp(lp - 0)
    old_logprobs = torch.zeros(1, 1, dtype=torch.float64)
    loss, ratio_t, clipped = clipped_surrogate(
        logprobs, old_logprobs, torch.tensor([advantage], dtype=torch.float64), eps_low, eps_high
    )
    loss.sum().backward()
    assert ratio_t.item() == pytest.approx(ratio)
    return -loss.item(), -logprobs.grad.item(), clipped.item()


# --- PPO-clip's three cases (a good action already liked and a bad one already avoided are capped; a bad
# action still liked gets the full gradient), eps = 0.2 -> clip range [0.8, 1.2] ---


def test_ppo_clip_good_action_liked_is_capped():
    # A=+1, ratio 1.5: min(1.5 * 1, clip(1.5) * 1) = min(1.5, 1.2) = 1.2, the clipped term is active,
    # which is constant in theta: gradient 0 ("见好就收").
    objective, grad, clipped = _surrogate_objective(1.5, +1.0)
    assert objective == pytest.approx(1.2)
    assert grad == 0.0
    assert clipped


def test_ppo_clip_bad_action_already_avoided_is_capped():
    # A=-1, ratio 0.5: min(0.5 * -1, clip(0.5) * -1) = min(-0.5, 0.8 * -1 = -0.8) = -0.8, clipped: gradient 0.
    objective, grad, clipped = _surrogate_objective(0.5, -1.0)
    assert objective == pytest.approx(-0.8)
    assert grad == 0.0
    assert clipped


def test_ppo_clip_bad_action_liked_gets_full_gradient():
    # A=-1, ratio 1.5: min(1.5 * -1, clip(1.5) * -1) = min(-1.5, 1.2 * -1 = -1.2) = -1.5: the UNclipped term
    # is active, so the gradient passes in full: d(ratio * A)/d logprob = ratio * A = 1.5 * -1 = -1.5.
    objective, grad, clipped = _surrogate_objective(1.5, -1.0)
    assert objective == pytest.approx(-1.5)
    assert grad == pytest.approx(-1.5)
    assert not clipped


def test_clip_higher_asymmetric():
    # eps_low=0.2, eps_high=0.28 -> clip range [0.8, 1.28].
    # A=+1, ratio 1.25: min(1.25, clip(1.25)=1.25) = 1.25, inside the range: full gradient ratio * A = 1.25
    # (with symmetric eps=0.2 this token would be capped at 1.2 with gradient 0).
    objective, grad, clipped = _surrogate_objective(1.25, +1.0, 0.2, 0.28)
    assert (objective, grad, clipped) == (pytest.approx(1.25), pytest.approx(1.25), False)
    assert _surrogate_objective(1.25, +1.0, 0.2, 0.2)[:2] == (pytest.approx(1.2), 0.0)
    # A=+1, ratio 1.5: min(1.5, 1.28) = 1.28, clipped above.
    objective, grad, clipped = _surrogate_objective(1.5, +1.0, 0.2, 0.28)
    assert (objective, grad, clipped) == (pytest.approx(1.28), 0.0, True)
    # A=-1, ratio 0.7: the low side still uses 0.2: min(-0.7, 0.8 * -1 = -0.8) = -0.8, clipped below.
    objective, grad, clipped = _surrogate_objective(0.7, -1.0, 0.2, 0.28)
    assert (objective, grad, clipped) == (pytest.approx(-0.8), 0.0, True)
    # A=-1, ratio 0.75 < 0.8 but with eps_low=0.28 (range [0.72, ...]) it is inside: -0.75, full gradient.
    objective, grad, clipped = _surrogate_objective(0.75, -1.0, 0.28, 0.2)
    assert (objective, grad, clipped) == (pytest.approx(-0.75), pytest.approx(-0.75), False)


def test_advantages_per_token_broadcast_equals_per_sequence():
    torch.manual_seed(0)
    logprobs, old_logprobs = -torch.rand(3, 4), -torch.rand(3, 4)  # [N, T]
    advantages = torch.randn(3)  # [N]
    per_seq = clipped_surrogate(logprobs, old_logprobs, advantages, 0.2, 0.2)
    per_tok = clipped_surrogate(logprobs, old_logprobs, advantages[:, None].expand(3, 4), 0.2, 0.2)
    for a, b in zip(per_seq, per_tok):
        assert torch.equal(a, b)


# --- KL estimators ---


def test_k3_hand_value():
    # logp=-1, ref=-2: log r = ref - logp = -1; k3 = exp(-1) - (-1) - 1 = exp(-1) = 0.36787944...
    k3 = kl_penalty(torch.tensor([[-1.0]]), torch.tensor([[-2.0]]), "k3")
    assert k3.item() == pytest.approx(math.exp(-1), abs=1e-7)
    # logp=-2, ref=-1: log r = 1; k3 = e - 1 - 1 = 0.71828...
    k3 = kl_penalty(torch.tensor([[-2.0]]), torch.tensor([[-1.0]]), "k3")
    assert k3.item() == pytest.approx(math.e - 2, abs=1e-6)


def test_k1_k2_hand_values():
    # logp=-1, ref=-2: k1 = -1 - (-2) = 1; k2 = 0.5 * 1^2 = 0.5. Swapped: k1 = -1, k2 = 0.5.
    lp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-2.0, -1.0]])
    assert kl_penalty(lp, ref, "k1").tolist() == [[1.0, -1.0]]
    assert kl_penalty(lp, ref, "k2").tolist() == [[0.5, 0.5]]


def test_kl_estimator_signs():
    torch.manual_seed(0)
    logprobs = -5 * torch.rand(64, 32, dtype=torch.float64)  # [N, T]
    ref_logprobs = -5 * torch.rand(64, 32, dtype=torch.float64)  # [N, T]
    assert torch.all(kl_penalty(logprobs, logprobs, "k3") == 0)
    assert torch.all(kl_penalty(logprobs, ref_logprobs, "k3") > 0)  # values never coincide exactly
    assert torch.all(kl_penalty(logprobs, ref_logprobs, "k2") >= 0)
    k1 = kl_penalty(logprobs, ref_logprobs, "k1")
    assert torch.equal(k1 > 0, logprobs > ref_logprobs)  # k1 > 0 exactly where the policy is more likely


def test_unknown_kl_estimator():
    with pytest.raises(ValueError, match=r"'k4'.*k1.*k2.*k3"):
        kl_penalty(torch.zeros(1, 1), torch.zeros(1, 1), "k4")


# --- aggregation ---

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # [2, 3]
MASK = torch.tensor([[1, 1, 0], [1, 0, 0]])  # [2, 3]: rows of 2 and 1 real tokens


def test_token_mean_hand():
    # (1 + 2 + 4) / 3 tokens = 7/3
    assert aggregate(X, MASK, "token_mean").item() == pytest.approx(7 / 3)


def test_seq_mean_token_mean_hand():
    # row 0: (1 + 2) / 2 = 1.5; row 1: 4 / 1 = 4; mean over 2 rows = 5.5 / 2 = 2.75
    assert aggregate(X, MASK, "seq_mean_token_mean").item() == pytest.approx(2.75)


def test_seq_mean_token_sum_norm_hand():
    # (1 + 2 + 4) / (2 rows * max_tokens 4) = 7/8
    assert aggregate(X, MASK, "seq_mean_token_sum_norm", max_tokens=4).item() == pytest.approx(0.875)
    with pytest.raises(ValueError, match="max_tokens"):
        aggregate(X, MASK, "seq_mean_token_sum_norm")


def test_fully_masked_row_counts_as_zero_not_nan():
    # row 1 has no tokens: its per-sequence mean is 0 / clamp(0, 1) = 0; row 0: (1 + 2 + 3) / 3 = 2; (2 + 0) / 2 = 1
    mask = torch.tensor([[1, 1, 1], [0, 0, 0]])
    assert aggregate(X, mask, "seq_mean_token_mean").item() == pytest.approx(1.0)
    assert aggregate(X, torch.zeros(2, 3), "token_mean").item() == 0.0


def test_unknown_aggregation():
    with pytest.raises(ValueError, match="'sum'"):
        aggregate(X, MASK, "sum")


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
@pytest.mark.parametrize("micro_batch", [1, 3, 8])
def test_micro_batches_sum_to_full_batch(mode, micro_batch):
    # micro-batch 1 x accumulation 8 == micro-batch 8 x accumulation 1 (and 3 + 3 + 2, uneven):
    # each micro-batch is aggregated with the WHOLE batch's num_sequences and num_tokens.
    torch.manual_seed(0)
    n, t = 8, 5
    per_token = torch.randn(n, t, dtype=torch.float64)  # [N, T]
    lengths = torch.tensor([5, 1, 3, 2, 5, 4, 1, 2])  # ragged on purpose
    mask = torch.arange(t)[None, :] < lengths[:, None]  # [N, T]
    counts = dict(max_tokens=t, num_sequences=n, num_tokens=mask.sum().item())
    full = aggregate(per_token, mask, mode, max_tokens=t)
    summed = sum(
        aggregate(per_token[i : i + micro_batch], mask[i : i + micro_batch], mode, **counts)
        for i in range(0, n, micro_batch)
    )
    assert summed.item() == pytest.approx(full.item(), abs=1e-12)


# --- grpo_loss ---


def test_grpo_loss_hand():
    # Two sequences, advantages +1 and -1, ratios from old_logprobs = 0 and eps 0.2:
    #   row 0 (A=+1): ratios 1.5 (capped: loss -1.2), 1.0 (loss -1.0), padding
    #   row 1 (A=-1): ratio 1.5 (unclipped: loss +1.5), padding, padding
    # seq_mean_token_mean: ((-1.2 - 1.0) / 2 + 1.5 / 1) / 2 = (-1.1 + 1.5) / 2 = 0.2
    # clip_frac: 1 clipped (row 0 tok 0) of 3 tokens; ratio_mean = (1.5 + 1.0 + 1.5) / 3 = 4/3
    ratios = torch.tensor([[1.5, 1.0, 1.0], [1.5, 1.0, 1.0]], dtype=torch.float64)
    logprobs = ratios.log().requires_grad_()
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    loss, metrics = grpo_loss(logprobs, torch.zeros_like(ratios), torch.tensor([1.0, -1.0]), mask)
    assert loss.item() == pytest.approx(0.2)
    assert metrics["clip_frac"].item() == pytest.approx(1 / 3)
    assert metrics["ratio_mean"].item() == pytest.approx(4 / 3)
    assert metrics["policy_loss"].item() == pytest.approx(0.2)
    assert "kl" not in metrics
    assert all(not m.requires_grad and m.dim() == 0 for m in metrics.values())


def test_grpo_loss_kl_term():
    # ratio 1 everywhere and A = 0, so the surrogate is 0 and the loss is beta * mean k3.
    # logp=-1, ref=-2 on both real tokens: k3 = exp(-1) = 0.36788; loss = 0.1 * 0.36788 (every mode here).
    logprobs = torch.full((1, 2), -1.0)
    ref_logprobs = torch.full((1, 2), -2.0)
    loss, metrics = grpo_loss(
        logprobs, logprobs, torch.zeros(1), torch.ones(1, 2), ref_logprobs=ref_logprobs, beta=0.1
    )
    assert loss.item() == pytest.approx(0.1 * math.exp(-1))
    assert metrics["kl"].item() == pytest.approx(math.exp(-1))
    assert metrics["policy_loss"].item() == 0.0
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(logprobs, logprobs, torch.zeros(1), torch.ones(1, 2), beta=0.1)


# --- advantages ---


def test_group_advantages_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    advantages = group_advantages(rewards)
    # group 0: mean 0.25; deviations 0.75, -0.25 x3; unbiased var = (0.5625 + 3 * 0.0625) / 3 = 0.25, std 0.5
    #   A = 0.75 / 0.5001 = 1.49970, -0.25 / 0.5001 = -0.49990
    # group 1: mean 0.5; deviations +-0.5; var = 4 * 0.25 / 3 = 1/3, std 0.57735; A = +-0.5 / 0.57745 = +-0.86588
    # group 2: all equal -> 0 / (0 + 1e-4) = 0
    expected = torch.tensor(
        [
            [0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001],
            [0.5 / (3**-0.5 + 1e-4), -0.5 / (3**-0.5 + 1e-4), -0.5 / (3**-0.5 + 1e-4), 0.5 / (3**-0.5 + 1e-4)],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    torch.testing.assert_close(advantages, expected)
    assert advantages[0, 0].item() == pytest.approx(1.49970, abs=1e-5)
    assert advantages[1, 0].item() == pytest.approx(0.86588, abs=1e-5)
    assert zero_variance_groups(rewards).tolist() == [False, False, True]


def test_group_advantages_without_std_is_dr_grpo():
    # r - mean: group mean 0.25 -> 0.75, -0.25, -0.25, -0.25
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    advantages = group_advantages(rewards, scale_by_std=False)
    torch.testing.assert_close(advantages, torch.tensor([[0.75, -0.25, -0.25, -0.25], [0.0, 0.0, 0.0, 0.0]]))


def test_group_advantages_integer_rewards_become_float():
    assert group_advantages(torch.tensor([[1, 0]])).dtype == torch.float32


def test_group_of_one_has_no_baseline():
    with pytest.raises(ValueError, match="group of one"):
        group_advantages(torch.tensor([[1.0], [0.0]]))
