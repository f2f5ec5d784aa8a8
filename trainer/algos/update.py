"""The micro-batch update every gradient algorithm shares: accumulate, normalise by global counts, clip, step.

An algorithm (grpo.py, reinforce.py, ppo.py, dpo.py) hands `accumulate` a function of a micro-batch's
rows that returns its loss as a `MicroLoss`; the loop here runs the backward passes and combines the
metrics, `optimizer_step` clips and steps, and `learning_rate_schedule` sets each step's learning rate.
What stays the same across algorithms lives only here:

  * Each micro-batch loss is already normalised by the whole batch's counts (sequences and tokens over
    all ranks, `batch_counts`), so the summed gradient equals the full batch's and no division by the
    number of micro-batches is needed: micro-batch 1 x accumulation 8 gives the gradient of micro-batch
    8 x accumulation 1 (tests/trainer/test_trainer_step.py).
  * Under trainer.strategy=ddp|fsdp2 the loss is scaled by the world size (DDP and FSDP2 average over
    ranks; x W makes it the sum), and a rank with fewer micro-batches than the busiest one runs empty
    (zero-weight) ones so the collective calls match (trainer/distributed.py). One process: no-ops.
  * Metrics: `loss` and each `MicroLoss.sums` entry add up as they are (they are already terms of the
    batch's total); each `MicroLoss.means` entry is the micro-batch's average, weighted by its share of the
    batch (its completion tokens over all ranks' tokens, or, with `per="sequence"`, its rows over all
    rows: DPO's pairs). `entropy` is the token mean over the whole batch's completion tokens, one
    weighting for every algorithm: each micro-batch adds its entropy summed over its completion tokens,
    divided by all ranks' completion tokens (not its own mean times its token share, which is the same
    number up to float rounding). Metrics never feed the loss, so gradients are unaffected.
  * Empty micro-batches (a rank that ran out of rows) contribute to no metric.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rlvr.trainer.algos.token_budget import token_budget_micro_batches
from rlvr.trainer.distributed import global_counts, loss_scale, reduce_gradients


@dataclass(frozen=True)
class Counts:
    """One batch's sizes over all ranks, and how this rank cuts it into micro-batches."""

    sequences: int  # rows over all ranks (DPO: pairs)
    tokens: torch.Tensor  # [] completion tokens over all ranks
    micro_batches: int  # the busiest rank's number of micro-batches (every rank runs this many)
    micro_batch_size: int  # rows per micro-batch
    plan: tuple | None = None  # token budget (token_budget.py): each micro-batch's row indices on this rank
    pack: bool = False  # each micro-batch's rows run as one packed row (models/packing.py)

    @property
    def trim(self) -> bool:
        """Whether micro-batches drop the padding columns past their longest row (token-budget batches)."""
        return self.plan is not None

    def rows(self, index: int) -> slice | torch.Tensor:
        """Micro-batch `index`'s rows; past this rank's last row the slice (or index) selects none."""
        if self.plan is not None:
            return self.plan[index] if index < len(self.plan) else torch.zeros(0, dtype=torch.long)
        return slice(index * self.micro_batch_size, (index + 1) * self.micro_batch_size)


def batch_counts(num_rows: int, num_tokens: torch.Tensor, micro_batch_size: int,
                 lengths: torch.Tensor | None = None, max_tokens: int = 0, pack: bool = False) -> Counts:
    """The counts a loss normalises by: this rank's rows and completion tokens summed over ranks
    (a collective under torchrun; every rank must call it). `max_tokens > 0` with `lengths` [rows]:
    micro-batches by that token budget (token_budget.py) instead of `micro_batch_size` rows; `pack`
    (only with a budget): each micro-batch's rows packed into one row, the budget counting their sum."""
    if max_tokens <= 0:
        sequences, tokens, micro_batches = global_counts(num_rows, num_tokens, micro_batch_size)
        return Counts(sequences, tokens, micro_batches, micro_batch_size)
    plan = tuple(token_budget_micro_batches(lengths, max_tokens, packed=pack))
    sequences, tokens, micro_batches = global_counts(num_rows, num_tokens, micro_batch_size, len(plan))
    return Counts(sequences, tokens, micro_batches, micro_batch_size, plan, pack)


@dataclass
class MicroLoss:
    """What an algorithm's loss returns for one micro-batch (see the module docstring for the weighting)."""

    loss: torch.Tensor  # [] this micro-batch's term of the batch loss, normalised by the global counts
    rows: int  # rows in the micro-batch (0: an empty one, which logs nothing)
    mask: torch.Tensor | None = None  # [n, L-1] its completion tokens: the token weight, and where entropy counts
    entropy: torch.Tensor | None = None  # [n, L-1] per-token entropy (no gradient)
    means: dict = field(default_factory=dict)  # name -> the micro-batch's average of a statistic
    sums: dict = field(default_factory=dict)  # name -> an additive term of a batch total


def accumulate(micro_loss: Callable[[slice], MicroLoss], counts: Counts, per: str = "token") -> dict:
    """Backward over `counts.micro_batches` micro-batches; returns the batch's metrics. `per` weights
    `MicroLoss.means`: "token" by completion tokens, "sequence" by rows."""
    totals: Counter = Counter()
    for index in range(counts.micro_batches):
        micro = micro_loss(counts.rows(index))
        (micro.loss * loss_scale()).backward()
        if micro.rows == 0:
            continue
        if per == "token":
            share = (micro.mask.sum() / counts.tokens).item()
        else:
            share = micro.rows / counts.sequences
        totals["loss"] += micro.loss.item()
        if micro.entropy is not None:
            totals["entropy"] += ((micro.entropy * micro.mask).sum() / counts.tokens).item()
        for name, value in micro.means.items():
            totals[name] += share * float(value)
        for name, value in micro.sums.items():
            totals[name] += float(value)
    return dict(totals)


def optimizer_step(optimizer, model: torch.nn.Module, max_grad_norm: float,
                   critic: torch.nn.Module | None = None) -> float:
    """Clip the gradient norm of the policy's (and the critic's) parameters jointly, step, zero the
    gradients; returns the norm before clipping. The critic sits outside DDP, so its gradients are
    averaged over ranks here first (the policy's were by DDP)."""
    params = list(model.parameters())
    if critic is not None:
        reduce_gradients(critic)
        params += list(critic.parameters())
    grad_norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm).item()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


def learning_rate_schedule(optim_cfg, total_steps: int) -> Callable[[int], float]:
    """The factor on `optim.lr` at each step, for torch's LambdaLR: a linear warmup over `optim.warmup_steps`,
    then `optim.schedule` (constant, linear or cosine decay to 0 at `total_steps`)."""
    warmup, schedule = optim_cfg.warmup_steps, optim_cfg.schedule

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def accumulate_and_step(micro_loss: Callable[[slice], MicroLoss], counts: Counts, optimizer, model, max_grad_norm: float,
                        *, critic: torch.nn.Module | None = None, per: str = "token") -> dict:
    """One optimizer step on the batch `counts` describes: `accumulate`, then `optimizer_step`;
    the metrics with `grad_norm`."""
    metrics = accumulate(micro_loss, counts, per)
    metrics["grad_norm"] = optimizer_step(optimizer, model, max_grad_norm, critic)
    return metrics
