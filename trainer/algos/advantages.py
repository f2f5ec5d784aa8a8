"""Group-relative advantage estimators (outcome supervision: one reward per completion).

Shapes: B prompts, G completions per prompt; rewards are [B, G].

Departures from the papers:
* The std is the unbiased (Bessel-corrected, /(G-1)) sample std, torch's default and what TRL
  uses; DeepSeekMath does not say which std it means.
* eps = 1e-4 is added to the std (TRL's value), so an all-equal group gives zeros, not NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, scale_by_std: bool = True, eps: float = 1e-4) -> Tensor:
    """GRPO outcome-supervision advantage (DeepSeekMath section 4.1.2):

        A_i = (r_i - mean(r)) / (std(r) + eps)      over the G completions of one prompt

    scale_by_std=False gives Dr. GRPO's A_i = r_i - mean(r) (Liu et al. 2025, which argues the std
    division up-weights prompts that are too easy or too hard).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [B, G] (prompts x completions), got shape {tuple(rewards.shape)}")
    if rewards.shape[1] == 1:
        raise ValueError("a group of one completion has no baseline: completions_per_prompt must be >= 2")
    rewards = rewards.to(torch.promote_types(rewards.dtype, torch.float32))  # [B, G]
    advantages = rewards - rewards.mean(dim=1, keepdim=True)  # [B, G]
    if scale_by_std:
        advantages = advantages / (rewards.std(dim=1, keepdim=True) + eps)  # [B, G]
    return advantages


def zero_variance_groups(rewards: Tensor) -> Tensor:
    """Groups whose G rewards are all equal: [B, G] -> bool [B].

    Their advantages are all zero, so they contribute no policy gradient; DAPO's dynamic sampling
    (Yu et al. 2025, eq. 11) drops them and samples more prompts.
    """
    return (rewards == rewards[:, :1]).all(dim=1)  # [B]


BASELINES = ("none", "mean", "rloo")


def leave_one_out_advantages(rewards: Tensor) -> Tensor:
    """RLOO (Kool et al. 2019; Ahmadian et al. 2024): each completion's baseline is the mean reward
    of the OTHER G-1 completions of its prompt:

        A_i = r_i - 1/(G-1) sum_{j != i} r_j  =  G/(G-1) * (r_i - mean(r))
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"leave-one-out needs rewards [B, G] with G >= 2, got shape {tuple(rewards.shape)}")
    rewards = rewards.to(torch.promote_types(rewards.dtype, torch.float32))  # [B, G]
    group = rewards.shape[1]
    others = (rewards.sum(dim=1, keepdim=True) - rewards) / (group - 1)  # [B, G]
    return rewards - others  # [B, G]


def outcome_advantages(rewards: Tensor, baseline: str, total=lambda x: x) -> Tensor:
    """REINFORCE advantages for one reward per completion, [B, G] -> [B, G] (Williams 1992):

        none   A_i = r_i                        (vanilla policy gradient)
        mean   A_i = r_i - mean over the whole batch of B*G rewards
        rloo   A_i = r_i - mean of the other G-1 rewards of the same prompt

    `total` sums a scalar over the whole batch when it is split (under torchrun: `distributed.global_sum`).
    """
    rewards = rewards.to(torch.promote_types(rewards.dtype, torch.float32))  # [B, G]
    if baseline == "none":
        return rewards.clone()  # [B, G]
    if baseline == "mean":
        count = total(torch.tensor(float(rewards.numel()), dtype=rewards.dtype))
        return rewards - total(rewards.sum()) / count  # [B, G]
    if baseline == "rloo":
        return leave_one_out_advantages(rewards)  # [B, G]
    raise ValueError(f"unknown baseline {baseline!r}; expected one of {BASELINES}")


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over token-level rewards.

        delta_t = r_t + gamma * V_{t+1} - V_t          (V after the last token = 0: the episode ends)
        A_t     = delta_t + gamma * lam * A_{t+1}
        R_t     = A_t + V_t                            (the value target, "returns")

    `rewards`, `values`, `mask` are [N, T]; the masked positions of a row are its time steps. A mask with
    holes (a multi-turn trajectory: the environment's tokens are 0, rollout/agent_loop.py) is bridged: the
    step before a hole bootstraps from the step after it, as if the hole were not there, since the
    environment's tokens are not the policy's actions. A contiguous mask (one completion) gives the same
    numbers as before holes were allowed. Positions outside the mask get A = R = 0.
    Returns (advantages, returns), both [N, T] and detached.
    """
    rewards, values, mask = rewards.detach(), values.detach(), mask.to(values.dtype)
    advantages = torch.zeros_like(values)  # [N, T]
    next_value = torch.zeros_like(values[:, 0])  # [N]
    next_advantage = torch.zeros_like(values[:, 0])  # [N]
    for t in reversed(range(values.shape[1])):
        m = mask[:, t]  # [N]
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # [N]
        advantages[:, t] = (delta + gamma * lam * next_advantage) * m  # [N]
        # [N]: 0 past the end of a completion; carried unchanged through a hole in the mask
        next_value = torch.where(m > 0, values[:, t], next_value)
        next_advantage = torch.where(m > 0, advantages[:, t], next_advantage)  # [N]
    returns = (advantages + values) * mask  # [N, T]
    return advantages, returns


def masked_mean_var(values: Tensor, mask: Tensor, total=lambda x: x) -> tuple[Tensor, Tensor]:
    """Mean and (population) variance of the masked entries. `total` sums a scalar over the whole batch
    when it is split (under torchrun: `distributed.global_sum`)."""
    mask = mask.to(values.dtype)  # [N, T]
    count = total(mask.sum()).clamp(min=1.0)  # []
    mean = total((values * mask).sum()) / count  # []
    var = total((((values - mean) * mask) ** 2).sum()) / count  # []
    return mean, var


def whiten(values: Tensor, mask: Tensor, eps: float = 1e-8, total=lambda x: x) -> Tensor:
    """(x - mean) / std over the masked entries (PPO implementations normalise GAE advantages so)."""
    mean, var = masked_mean_var(values, mask, total)
    return (values - mean) / (var.sqrt() + eps) * mask.to(values.dtype)  # [N, T]
