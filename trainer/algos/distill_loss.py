"""On-policy distillation losses as pure tensor functions: the student samples, a frozen teacher scores.

Two losses, chosen with `algo.loss` (trainer/algos/distill.py runs them):

* `reverse_kl` (sampled tokens): on the student's own samples o ~ pi, each token's advantage is

      A_t = log q(o_t | o_<t) - sg[log pi(o_t | o_<t)]   (+ reward_weight * A_reward)

  with q the teacher, pi the student and sg a stop-gradient: minus the per-token reverse KL, KL(pi || q)
  estimated on the sampled token. It goes through the policy-gradient surrogate -ratio_t * A_t with
  ratio_t = pi / sg[pi] (1 at the sampled weights), whose gradient is -A_t * grad log pi. This is Thinking
  Machines' on-policy distillation (Lu et al., "On-Policy Distillation", Thinking Machines Lab: Connectionism,
  Oct 2025) as the Tinker cookbook computes it (tinker_cookbook/distillation/train_on_policy.py,
  `incorporate_kl_penalty`: reverse KL = sampled logprobs - teacher logprobs, the advantage moved by minus it
  times kl_penalty_coef, then the importance-sampling loss). Departures: the student term is the trainer's
  logprobs of the sampled tokens (the weights that sampled, as there is one update per batch), not the
  sampler's; no discount over later tokens (the cookbook's kl_discount_factor = 0 case); the coefficient is 1,
  and the verifier reward's group advantage may be added with `algo.reward_weight`.
* `gkd` (the whole vocabulary): the generalized Jensen-Shannon divergence between the student's and the
  teacher's next-token distributions at every sampled position (Agarwal et al. 2024, "On-Policy Distillation
  of Language Models: Learning from Self-Generated Mistakes", eq. 1), with beta as TRL's GKDTrainer
  `generalized_jsd_loss` uses it: the mixture is m = (1 - beta) p_s + beta p_t and

      JSD_beta = beta KL(p_t || m) + (1 - beta) KL(p_s || m);   beta = 0: KL(p_t || p_s) (forward),
                                                                 beta = 1: KL(p_s || p_t) (reverse)

  The endpoints are the KLs themselves, as in TRL (the interpolated formula tends to 0 there). Gradients
  reach the student's logits only; the teacher's are constants. On-policy only (TRL's lmbda = 1): the
  positions are the student's own samples.

Shapes: N sequences, T completion positions, M completion tokens, V the vocabulary. Both take logits divided
by the sampling temperature (the student's as the engine sampled; the teacher's the same, as TRL does).
"""

from __future__ import annotations

import torch
from torch import Tensor

LOSSES = ("reverse_kl", "gkd")


def distill_advantages(logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor,
                       reward_advantages: Tensor | None = None, reward_weight: float = 0.0) -> tuple[Tensor, Tensor]:
    """Per-token advantages of the sampled-token loss and the per-token reverse KL they come from.

        reverse_kl_t = sg[log pi(o_t)] - log q(o_t)
        A_t          = -reverse_kl_t + reward_weight * A_reward_i     (A_reward: one per sequence, [N])

    Returns (advantages [N, T], reverse_kl [N, T]), both 0 outside `mask`; neither carries a gradient.
    """
    mask = mask.to(logprobs.dtype)  # [N, T]
    reverse_kl = (logprobs.detach() - teacher_logprobs) * mask  # [N, T]
    advantages = -reverse_kl  # [N, T]
    if reward_weight:
        advantages = advantages + reward_weight * reward_advantages.unsqueeze(-1) * mask  # [N, T]
    return advantages, reverse_kl


def sampled_token_loss(logprobs: Tensor, advantages: Tensor) -> Tensor:
    """Per-token surrogate -ratio_t * A_t with ratio_t = exp(log pi - sg[log pi]) (value 1, gradient grad log pi):
    its value is -A_t (the reverse KL when reward_weight is 0), its gradient -A_t * grad log pi. [N, T] -> [N, T]."""
    ratio = torch.exp(logprobs - logprobs.detach())  # [N, T]
    return -ratio * advantages  # [N, T]


def generalized_jsd(student_logits: Tensor, teacher_logits: Tensor, beta: float, temperature: float = 1.0) -> Tensor:
    """Per-position generalized JSD over the vocabulary (module docstring), [M, V] logits -> [M].

    log-space throughout: KL(a || b) = sum_v exp(log a_v) (log a_v - log b_v); the mixture's log is a logsumexp."""
    log_s = torch.log_softmax(student_logits.float() / temperature, dim=-1)  # [M, V]
    log_t = torch.log_softmax(teacher_logits.float() / temperature, dim=-1)  # [M, V]

    def kl(log_a: Tensor, log_b: Tensor) -> Tensor:
        return (log_a.exp() * (log_a - log_b)).sum(-1)  # [M]

    if beta == 0:
        return kl(log_t, log_s)  # [M] forward KL(teacher || student)
    if beta == 1:
        return kl(log_s, log_t)  # [M] reverse KL(student || teacher)
    weights = torch.tensor([1.0 - beta, beta], dtype=log_s.dtype, device=log_s.device).log()  # [2]
    log_m = torch.logsumexp(torch.stack([log_s + weights[0], log_t + weights[1]]), dim=0)  # [M, V]
    return beta * kl(log_t, log_m) + (1 - beta) * kl(log_s, log_m)  # [M]
