"""PPO-clip (trainer/algos/ppo_losses.py `ppo_clip_loss`) against the hand-derived value and against GRPO's loss at
beta 0, which PPO was computed through before it had its own: the same numbers, bit for bit."""

import pytest
import torch

from rlvr.trainer.algos.losses import grpo_loss
from rlvr.trainer.algos.ppo_losses import ppo_clip_loss


def test_ppo_clip_by_hand():
    # one sequence, two tokens; ratios e^0.5 = 1.6487 (clipped to 1.2 with A = 1) and e^-0.5 = 0.6065 (A = -1:
    # clipped to 0.8, min(-0.6065, -0.8) = -0.8); token mean of the negated surrogate: (-1.2 + 0.8) / 2 = -0.2
    logprobs = torch.tensor([[0.0, 0.0]])
    old = torch.tensor([[-0.5, 0.5]])
    advantages = torch.tensor([[1.0, -1.0]])
    loss, metrics = ppo_clip_loss(logprobs, old, advantages, torch.ones(1, 2), aggregation="token_mean")
    assert loss.item() == pytest.approx(-0.2)
    assert metrics["clip_frac"].item() == 1.0  # both tokens' gradients removed by the clip


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_ppo_clip_equals_grpo_loss_at_beta_zero_bit_for_bit(aggregation):
    torch.manual_seed(0)
    logprobs = (torch.randn(6, 9) * 0.3 - 1).requires_grad_()
    old = logprobs.detach() + torch.randn(6, 9) * 0.2
    advantages = torch.randn(6, 9)  # GAE's: one per token
    mask = (torch.rand(6, 9) > 0.2).float()
    sizes = dict(max_tokens=9, num_sequences=8.0, num_tokens=50.0)
    ours, our_metrics = ppo_clip_loss(logprobs, old, advantages, mask, clip_eps_low=0.2, clip_eps_high=0.28,
                                      aggregation=aggregation, **sizes)
    (ours_grad,) = torch.autograd.grad(ours, logprobs)
    theirs, their_metrics = grpo_loss(logprobs, old, advantages, mask, clip_eps_low=0.2, clip_eps_high=0.28,
                                      aggregation=aggregation, **sizes)
    (their_grad,) = torch.autograd.grad(theirs, logprobs)
    assert torch.equal(ours, theirs) and torch.equal(ours_grad, their_grad)
    assert our_metrics.keys() == their_metrics.keys()
    assert all(torch.equal(our_metrics[k], their_metrics[k]) for k in our_metrics)
