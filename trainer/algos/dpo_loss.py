"""DPO losses on sequence logprobs: sigmoid DPO with conservative label smoothing, and IPO.

With the implicit rewards  r_c = beta * (log pi(y_c|x) - log pi_ref(y_c|x))  (chosen) and r_r likewise
(rejected), and  delta = (r_c - r_r) / beta:

    sigmoid (DPO, Rafailov et al. 2023, eq. 7):  -log sigmoid(beta * delta)
    cDPO (Mitchell 2023, "A note on DPO with noisy preferences"), label smoothing eps, the probability
    that a label is flipped:  -(1 - eps) * log sigmoid(beta * delta) - eps * log sigmoid(-beta * delta)
    IPO (Azar et al. 2023, eq. 17, tau = beta):  (delta_norm - 1 / (2 * beta))^2

Departures, each as TRL 1.16's DPOTrainer (trl/trainer/dpo_trainer.py, `_compute_loss`; code written here):
  * IPO is length-normalised: each side's log-ratio is divided by its number of completion tokens
    (delta_norm), which the paper does not state; TRL says the IPO authors confirmed it. Sigmoid DPO
    uses the summed logprobs, as the paper.
  * The logged rewards (rewards/chosen, rewards/rejected, rewards/margin, rewards/accuracy) are
    beta * summed log-ratios for every loss type, as TRL logs them (for IPO too).
  * TRL 1.16's "sigmoid" no longer reads label_smoothing (it moved to "robust", rDPO); here eps applies
    to sigmoid as cDPO, the form TRL's "sigmoid" had before and its "aot" loss keeps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOSS_TYPES = ("sigmoid", "ipo")


def dpo_loss(chosen_logps: torch.Tensor, rejected_logps: torch.Tensor, ref_chosen_logps: torch.Tensor,
             ref_rejected_logps: torch.Tensor, *, beta: float, loss_type: str = "sigmoid",
             label_smoothing: float = 0.0, chosen_lengths: torch.Tensor | None = None,
             rejected_lengths: torch.Tensor | None = None, num_pairs: int | None = None) -> tuple[torch.Tensor, dict]:
    """Loss summed over these P pairs and divided by `num_pairs` (default P: the mean), so micro-batches of
    one batch add up to the whole batch's mean. Inputs are [P] summed completion logprobs; IPO also needs the
    [P] completion token counts. Metrics are this micro-batch's means (tensors, detached)."""
    chosen_logratios = chosen_logps - ref_chosen_logps  # [P]
    rejected_logratios = rejected_logps - ref_rejected_logps  # [P]
    if loss_type == "sigmoid":
        logits = beta * (chosen_logratios - rejected_logratios)  # [P]
        per_pair = -(1 - label_smoothing) * F.logsigmoid(logits) - label_smoothing * F.logsigmoid(-logits)  # [P]
    elif loss_type == "ipo":
        if chosen_lengths is None or rejected_lengths is None:
            raise ValueError("loss_type='ipo' needs chosen_lengths and rejected_lengths (completion token counts)")
        delta = (chosen_logratios / chosen_lengths.clamp(min=1)
                 - rejected_logratios / rejected_lengths.clamp(min=1))  # [P]
        per_pair = (delta - 1 / (2 * beta)) ** 2  # [P]
    else:
        raise ValueError(f"loss_type={loss_type!r}; choose one of {', '.join(LOSS_TYPES)}")
    loss = per_pair.sum() / (num_pairs or per_pair.numel())

    chosen_rewards = beta * chosen_logratios.detach()  # [P]
    rejected_rewards = beta * rejected_logratios.detach()  # [P]
    metrics = {
        "rewards/chosen": chosen_rewards.mean(),
        "rewards/rejected": rejected_rewards.mean(),
        "rewards/margin": (chosen_rewards - rejected_rewards).mean(),
        "rewards/accuracy": (chosen_rewards > rejected_rewards).float().mean(),
    }
    return loss, metrics
