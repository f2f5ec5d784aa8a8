"""Policy-gradient losses for RLVR as pure tensor functions.

Shapes: N sequences (completions) in the batch, T completion tokens (right-padded);
`mask` is 1 on real completion tokens and 0 on padding.

The math is GRPO (Shao et al. 2024, "DeepSeekMath", eq. 3) built from PPO-clip (Schulman et al.
2017, eq. 7). Where we depart from the papers, and why:

* We return a loss to minimise, i.e. the negated objective.
* Clipping is asymmetric, `clip_eps_low` / `clip_eps_high` (DAPO's "clip-higher", Yu et al. 2025);
  the papers' single epsilon is the case `clip_eps_low == clip_eps_high`.
* How per-token losses become one number is a choice (`aggregate`): the GRPO paper's
  1/G sum_i 1/|o_i| sum_t is "seq_mean_token_mean"; DAPO's token-level mean is "token_mean";
  Dr. GRPO's (Liu et al. 2025) constant normaliser is "seq_mean_token_sum_norm". Counts may be
  passed in from outside so micro-batches add up to the full-batch loss (see `aggregate`).
* The KL term uses Schulman's estimators ("Approximating KL divergence", 2020) evaluated on tokens
  sampled from pi_old, not pi_theta, and without an importance-sampling correction, as the GRPO
  paper and TRL do. The paper's beta is 0.04; ours defaults to 0.0 (no reference model needed),
  as TRL's does and as DAPO and Dr. GRPO recommend.
* Empty denominators (a fully masked row or batch) are clamped to 1 rather than giving NaN.
* `importance_level="sequence"` is GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization",
  eq. 5-7): one ratio per sequence, the geometric mean of its token ratios, clipped per sequence.
  GSPO's objective has no KL term; here beta * KL is still added per token when beta != 0.
* The engine that sampled (vLLM) and the trainer compute slightly different probabilities for the
  same tokens; the surrogate may be multiplied per token by truncated importance weights
  min(pi_old_trainer / pi_engine, cap) (Yao et al. 2025, "Your efficient RL framework secretly
  brings you off-policy RL training"), which the papers, written for one engine, do not have.
"""

from __future__ import annotations

import torch
from torch import Tensor

KL_ESTIMATORS = ("k1", "k2", "k3")
AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")
IMPORTANCE_LEVELS = ("token", "sequence")


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: str) -> Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) on tokens drawn from the policy.

    With log r = log pi_ref(o_t) - log pi_theta(o_t)  (Schulman 2020):
        k1 = -log r                    unbiased, can be negative
        k2 = 1/2 (log r)^2             biased, always >= 0, low variance
        k3 = (r - 1) - log r           unbiased, always >= 0 (GRPO eq. 4, TRL)
    """
    log_r = ref_logprobs - logprobs  # [N, T]
    if estimator == "k1":
        return -log_r  # [N, T]
    if estimator == "k2":
        return 0.5 * log_r**2  # [N, T]
    if estimator == "k3":
        return torch.exp(log_r) - log_r - 1  # [N, T]
    raise ValueError(f"unknown KL estimator {estimator!r}; expected one of {KL_ESTIMATORS}")


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    mode: str,
    *,
    max_tokens: int | None = None,
    num_sequences: float | None = None,
    num_tokens: float | None = None,
) -> Tensor:
    """Reduce a per-token loss [N, T] to a scalar.

        token_mean               sum_{i,t} x_it m_it / num_tokens                      (DAPO eq. 8)
        seq_mean_token_mean      1/num_sequences sum_i (sum_t x_it m_it / |o_i|)      (GRPO eq. 3)
        seq_mean_token_sum_norm  sum_{i,t} x_it m_it / (num_sequences * max_tokens)   (Dr. GRPO)

    num_sequences defaults to N and num_tokens to mask.sum() (clamped to 1). A caller that splits
    one batch into micro-batches passes the WHOLE batch's counts instead: every mode is then a sum
    of per-row terms over a fixed denominator, so the micro-batch losses sum exactly to the
    full-batch loss, and micro-batch 1 x accumulation 8 == micro-batch 8 x accumulation 1 (do not
    divide again by the number of accumulation steps).
    """
    mask = mask.to(per_token.dtype)  # [N, T]
    masked = per_token * mask  # [N, T]
    if num_sequences is None:
        num_sequences = per_token.shape[0]
    if mode == "token_mean":
        if num_tokens is None:
            num_tokens = mask.sum().clamp(min=1.0)  # []
        return masked.sum() / num_tokens  # []
    if mode == "seq_mean_token_mean":
        per_seq = masked.sum(-1) / mask.sum(-1).clamp(min=1.0)  # [N]
        return per_seq.sum() / num_sequences  # []
    if mode == "seq_mean_token_sum_norm":
        if max_tokens is None:
            raise ValueError("aggregation 'seq_mean_token_sum_norm' needs max_tokens (the completion length limit)")
        return masked.sum() / (num_sequences * max_tokens)  # []
    raise ValueError(f"unknown aggregation {mode!r}; expected one of {AGGREGATIONS}")


def clipped_surrogate(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    clip_eps_low: float,
    clip_eps_high: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO-clip surrogate per token, as a loss (PPO eq. 7 with DAPO's asymmetric clip):

        ratio = pi_theta(o_t) / pi_old(o_t)
        loss  = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)

    `advantages` is [N] (one per sequence, broadcast over tokens) or [N, T]. Returns
    (per_token_loss, ratio, clipped); `clipped` marks tokens whose gradient the clip removed:
    ratio < 1 - eps_low with A < 0, or ratio > 1 + eps_high with A > 0 (as TRL counts it).
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)  # [N, 1]
    ratio = torch.exp(logprobs - old_logprobs)  # [N, T]
    clipped_ratio = torch.clamp(ratio, 1 - clip_eps_low, 1 + clip_eps_high)  # [N, T]
    per_token_loss = -torch.minimum(ratio * advantages, clipped_ratio * advantages)  # [N, T]
    clipped_low = (ratio < 1 - clip_eps_low) & (advantages < 0)  # [N, T]
    clipped_high = (ratio > 1 + clip_eps_high) & (advantages > 0)  # [N, T]
    return per_token_loss, ratio, clipped_low | clipped_high  # [N, T], [N, T], [N, T]


def sequence_log_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor) -> Tensor:
    """GSPO's log importance ratio (Zheng et al. 2025, eq. 7), one per sequence:

        log s_i = 1/|o_i| sum_t (log pi_theta(o_it) - log pi_old(o_it))

    i.e. s_i is the geometric mean of the token ratios, so its size does not grow with the length.
    A fully masked row gets log s = 0. Returns [N, 1], differentiable through `logprobs`.
    """
    mask = mask.to(logprobs.dtype)  # [N, T]
    log_ratio = ((logprobs - old_logprobs) * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # [N]
    return log_ratio.unsqueeze(-1)  # [N, 1]


def truncated_importance_weights(old_logprobs: Tensor, engine_logprobs: Tensor, cap: float) -> Tensor:
    """Per-token correction for sampling with an engine whose probabilities differ from the trainer's
    (truncated importance sampling, Yao et al. 2025):

        w_t = min(pi_old_trainer(o_t) / pi_engine(o_t), cap)

    Detached: it reweights the gradient, it is not differentiated. Padding positions get w = 1
    (their logprobs are 0 on both sides); the loss masks them anyway.
    """
    return torch.exp(old_logprobs - engine_logprobs).clamp(max=cap).detach()  # [N, T]


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    ref_logprobs: Tensor | None = None,
    beta: float = 0.0,
    kl_estimator: str = "k3",
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    aggregation: str = "seq_mean_token_mean",
    max_tokens: int | None = None,
    num_sequences: float | None = None,
    num_tokens: float | None = None,
    importance_weights: Tensor | None = None,
    importance_level: str = "token",
) -> tuple[Tensor, dict[str, Tensor]]:
    """GRPO loss (DeepSeekMath eq. 3, negated):

        J = 1/G sum_i 1/|o_i| sum_t [ min(ratio_it A_i, clip(ratio_it, 1-eps_low, 1+eps_high) A_i)
                                      - beta * KL_it(pi_theta || pi_ref) ]

    with the 1/G sum_i 1/|o_i| sum_t reduction chosen by `aggregation` (see `aggregate`, which
    also explains num_sequences / num_tokens). The KL term is computed only when beta != 0.
    `importance_weights` [N, T] (detached; see `truncated_importance_weights`) multiply the
    surrogate per token, not the KL term. Returns (loss, metrics); metrics are detached 0-d tensors.

    `importance_level="sequence"` is GSPO (Zheng et al. 2025, eq. 5): ratio_it is replaced by the
    sequence ratio s_i (`sequence_log_ratio`), clipped once per sequence, so every token of a sequence
    carries the same surrogate; with aggregation "seq_mean_token_mean" the loss is then GSPO's
    1/G sum_i min(s_i A_i, clip(s_i, 1-eps_low, 1+eps_high) A_i). `clip_frac` and `ratio_mean` are
    token-weighted (the share of tokens in clipped sequences), so micro-batches average them as in
    the token case; TRL logs the fraction of sequences instead. `importance_weights` still act per
    token: a sequence's surrogate is then scaled by the mean weight of its tokens (as TRL's token-level
    vLLM correction does).
    At ratio 1 (mu == 1, no engine correction) GSPO's gradient, -1/G sum_i A_i/|o_i| sum_t grad log pi,
    is exactly GRPO's with "seq_mean_token_mean": the two differ only off-policy (mu > 1).
    """
    if beta != 0.0 and ref_logprobs is None:
        raise ValueError(f"beta={beta} needs ref_logprobs (set beta=0.0 to train without a reference model)")
    counts = dict(max_tokens=max_tokens, num_sequences=num_sequences, num_tokens=num_tokens)
    if importance_level == "token":
        surrogate, ratio, clipped = clipped_surrogate(
            logprobs, old_logprobs, advantages, clip_eps_low, clip_eps_high
        )  # [N, T], [N, T], [N, T]
    elif importance_level == "sequence":
        log_s = sequence_log_ratio(logprobs, old_logprobs, mask)  # [N, 1]
        surrogate, ratio, clipped = clipped_surrogate(
            log_s, torch.zeros_like(log_s), advantages, clip_eps_low, clip_eps_high
        )  # [N, 1], [N, 1], [N, 1]
        surrogate, ratio, clipped = (x.expand_as(logprobs) for x in (surrogate, ratio, clipped))  # [N, T] each
    else:
        raise ValueError(f"unknown importance_level {importance_level!r}; expected one of {IMPORTANCE_LEVELS}")
    if importance_weights is not None:
        surrogate = surrogate * importance_weights.detach()  # [N, T]
    per_token_loss = surrogate  # [N, T]
    mask_f = mask.to(logprobs.dtype)  # [N, T]
    num_masked = mask_f.sum().clamp(min=1.0)  # []

    metrics = {
        "clip_frac": (clipped.to(mask_f.dtype) * mask_f).sum().detach() / num_masked,  # []
        "ratio_mean": (ratio * mask_f).sum().detach() / num_masked,  # []
        "policy_loss": aggregate(surrogate, mask, aggregation, **counts).detach(),  # []
    }
    if beta != 0.0:
        kl = kl_penalty(logprobs, ref_logprobs, kl_estimator)  # [N, T]
        per_token_loss = per_token_loss + beta * kl  # [N, T]
        metrics["kl"] = (kl * mask_f).sum().detach() / num_masked  # []

    loss = aggregate(per_token_loss, mask, aggregation, **counts)  # []
    return loss, metrics


def reinforce_loss(
    logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    aggregation: str = "seq_mean_token_mean",
    max_tokens: int | None = None,
    num_sequences: float | None = None,
    num_tokens: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """REINFORCE (Williams 1992), as a loss: -(1/N) sum_i A_i sum_t log pi_theta(o_it),
    with the per-token reduction chosen by `aggregation` (see `aggregate`). `advantages` [N] is the
    reward minus a baseline (see `advantages.outcome_advantages`); with no baseline it is the reward.
    Its gradient equals the clipped surrogate's at ratio 1, i.e. GRPO's with mu = 1.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)  # [N, 1]
    per_token_loss = -advantages.detach() * logprobs  # [N, T]
    loss = aggregate(per_token_loss, mask, aggregation, max_tokens=max_tokens, num_sequences=num_sequences,
                     num_tokens=num_tokens)  # []
    return loss, {"policy_loss": loss.detach()}
