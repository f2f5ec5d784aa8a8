"""Supervised fine-tuning's loss: cross-entropy on the completion tokens only, the prompt masked out.

    L = - 1/|C| sum_{(i, t) in C} log pi_theta(y_{i,t} | x_i, y_{i,<t})

where C is every completion token of the batch (over all rows and, under torchrun, all ranks): one mean over
tokens, as TRL's `SFTTrainer` with `completion_only_loss=True` takes it (the model's cross-entropy with the prompt
labelled -100, divided by the batch's label tokens; tests/trainer/algos/test_sft_loss.py checks the two agree on identical
tensors). A long completion therefore weighs more than a short one, as in TRL and the warm start; GRPO's default
(`seq_mean_token_mean`) would weigh each sequence alike.

`num_tokens` lets micro-batches add up to the full batch's loss (trainer/algos/update.py): each micro-batch
divides its own sum by the whole batch's token count. Called with its own mask's sum it is the plain mean, which
is what the tiny model's warm start computes (trainer/warm_start.py), to the bit: the same operations in the same
order.
"""

from __future__ import annotations

import torch
from torch import Tensor


def sft_loss(logprobs: Tensor, mask: Tensor, num_tokens: Tensor | float | None = None) -> tuple[Tensor, dict]:
    """(loss, metrics) of `logprobs` [N, T] (log pi of each target token) over `mask` [N, T] (1 on completion
    tokens; 0 on the prompt and padding), divided by `num_tokens` (default: the mask's own sum)."""
    if num_tokens is None:
        num_tokens = mask.sum()  # []
    loss = -(logprobs * mask).sum() / num_tokens  # []
    tokens = mask.sum().clamp(min=1)  # [] this call's own tokens, for its metric only
    return loss, {"nll_mean": (-(logprobs.detach() * mask).sum() / tokens).item()}
