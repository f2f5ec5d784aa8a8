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
