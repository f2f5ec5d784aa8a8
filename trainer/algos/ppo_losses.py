"""PPO's losses (Schulman et al. 2017): PPO-clip on the clipped surrogate it shares with GRPO (losses.py), the
value loss, PPO-penalty and its adaptive coefficient, as pure tensor functions returning `(loss, metrics)`.

Shapes as in losses.py: N sequences, T completion tokens, `mask` 1 on real completion tokens.
Departures: the value loss is clipped around the old values as OpenAI baselines' ppo2 does (the
paper's L^VF is unclipped; `clip_eps_value=None` gives the paper's), and PPO-penalty's KL is
estimated per sampled token rather than over the whole action distribution.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.trainer.algos.losses import aggregate, clipped_surrogate, kl_penalty


def ppo_clip_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    aggregation: str = "token_mean",
    max_tokens: int | None = None,
    num_sequences: float | None = None,
    num_tokens: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO-clip (Schulman et al. 2017, eq. 7), negated, per token with GAE's per-token advantages:

        L = -E_t[ min(ratio_t A_t, clip(ratio_t, 1 - eps_low, 1 + eps_high) A_t) ]

    reduced by `aggregation` (losses.py `aggregate`). No KL term: PPO's KL to the reference sits in its token
    rewards (ppo.py `token_rewards`). `advantages` is [N, T] (or [N], broadcast). Returns (loss, metrics);
    `clip_frac` and `ratio_mean` are token means over the mask, as GRPO's.
    """
    counts = dict(max_tokens=max_tokens, num_sequences=num_sequences, num_tokens=num_tokens)
    surrogate, ratio, clipped = clipped_surrogate(logprobs, old_logprobs, advantages, clip_eps_low,
                                                  clip_eps_high)  # [N, T], [N, T], [N, T]
    mask_f = mask.to(logprobs.dtype)  # [N, T]
    num_masked = mask_f.sum().clamp(min=1.0)  # []
    metrics = {
        "clip_frac": (clipped.to(mask_f.dtype) * mask_f).sum().detach() / num_masked,  # []
        "ratio_mean": (ratio * mask_f).sum().detach() / num_masked,  # []
        "policy_loss": aggregate(surrogate, mask, aggregation, **counts).detach(),  # []
    }
    return aggregate(surrogate, mask, aggregation, **counts), metrics


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip_eps_value: float | None,
    *,
    num_tokens: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped value loss of PPO implementations (OpenAI baselines ppo2; the paper's L^VF is unclipped):

        V_clip = old_V + clip(V - old_V, -eps_v, +eps_v)
        loss   = 1/2 * token_mean( max((V - R)^2, (V_clip - R)^2) )

    `clip_eps_value=None` gives the paper's 1/2 (V - R)^2. Returns (loss, metrics) with `vf_clip_frac`.
    """
    err = (values - returns) ** 2  # [N, T]
    if clip_eps_value is None:
        per_token, clipped = err, torch.zeros_like(err, dtype=torch.bool)  # [N, T]
    else:
        values_clipped = old_values + torch.clamp(values - old_values, -clip_eps_value, clip_eps_value)  # [N, T]
        err_clipped = (values_clipped - returns) ** 2  # [N, T]
        per_token = torch.maximum(err, err_clipped)  # [N, T]
        clipped = err_clipped > err  # [N, T]
    loss = 0.5 * aggregate(per_token, mask, "token_mean", num_tokens=num_tokens)  # []
    mask_f = mask.to(values.dtype)  # [N, T]
    num_masked = mask_f.sum().clamp(min=1.0)  # []
    return loss, {"vf_loss": loss.detach(), "vf_clip_frac": (clipped.to(mask_f.dtype) * mask_f).sum().detach() / num_masked}


def ppo_penalty_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    beta: float,
    *,
    kl_estimator: str = "k3",
    aggregation: str = "token_mean",
    max_tokens: int | None = None,
    num_sequences: float | None = None,
    num_tokens: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO-penalty (Schulman et al. 2017, eq. 8), negated:

        J = E_t[ ratio_t * A_t - beta * KL(pi_old || pi_theta)_t ],    ratio_t = pi_theta(o_t) / pi_old(o_t)

    The paper's KL is over the whole action distribution; here it is estimated per sampled token
    (`kl_penalty` with the roles swapped: tokens come from pi_old). `advantages` is [N] or [N, T].
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)  # [N, 1]
    ratio = torch.exp(logprobs - old_logprobs)  # [N, T]
    kl = kl_penalty(old_logprobs, logprobs, kl_estimator)  # [N, T]  KL(pi_old || pi_theta)
    counts = dict(max_tokens=max_tokens, num_sequences=num_sequences, num_tokens=num_tokens)
    surrogate = -ratio * advantages  # [N, T]
    loss = aggregate(surrogate + beta * kl, mask, aggregation, **counts)  # []
    mask_f = mask.to(logprobs.dtype)  # [N, T]
    num_masked = mask_f.sum().clamp(min=1.0)  # []
    return loss, {
        "policy_loss": aggregate(surrogate, mask, aggregation, **counts).detach(),
        "kl_old": (kl * mask_f).sum().detach() / num_masked,
        "ratio_mean": (ratio * mask_f).sum().detach() / num_masked,
    }


def adaptive_beta(beta: float, kl: float, kl_target: float) -> float:
    """PPO's adaptive KL coefficient (Schulman et al. 2017, section 4), after each batch with measured
    KL d and target d0:  d > 1.5 d0 -> beta * 2;  d < d0 / 1.5 -> beta / 2;  otherwise unchanged.
    (Some summaries of PPO print "beta <- 2 beta" for the second case; the paper halves it.)
    """
    if kl > 1.5 * kl_target:
        return beta * 2.0
    if kl < kl_target / 1.5:
        return beta / 2.0
    return beta
