"""REINFORCE (Williams 1992) as one readable update: the vanilla policy gradient.

    sample G completions per prompt -> verify -> A = reward - baseline -> -A * log pi -> optimizer step

`algo.baseline` picks the baseline (`advantages.outcome_advantages`): `none` (the plain estimator,
unbiased but high variance), `mean` (the batch's mean reward) or `rloo` (the mean of the other
G-1 completions of the same prompt: REINFORCE Leave-One-Out, Ahmadian et al. 2024).
Departures: the update is a single gradient step on on-policy samples (no ratio, no clip), so
`algo.mu`, the clip range and `rollout.importance_cap` are not used; `algo.beta > 0` adds
beta * KL(pi_theta || pi_ref) to the loss as GRPO does (Williams had no reference model).
`reward.screen_mode=drop_group` removes screened groups before the baseline (trainer/experience/collect.py).
"""

from __future__ import annotations

import torch

from rlvr.trainer.algos.advantages import outcome_advantages
from rlvr.trainer.algos.losses import aggregate, kl_penalty, reinforce_loss
from rlvr.trainer.algos.update import MicroLoss, accumulate_and_step, batch_counts
from rlvr.trainer.distributed import global_sum
from rlvr.trainer.context import RunContext
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.logprobs import token_logprobs


def reinforce_update(ctx: RunContext, batch: Batch) -> dict:
    """One optimizer step on the kept rows (`batch.trained`: drop_group's groups never in the baseline)."""
    cfg, algo = ctx.cfg, ctx.cfg.algo
    trained = batch.trained
    advantages = outcome_advantages(trained.rewards, algo.baseline, total=global_sum).flatten()  # [N], all ranks
    rows = trained.batch
    # with ranks: counts over all ranks and the busiest rank's micro-batch count (trainer/distributed.py)
    counts = batch_counts(len(rows), rows.completion_mask.sum(), cfg.train.micro_batch_size, rows.lengths(),
                          cfg.train.max_tokens_per_micro_batch, pack=cfg.train.pack_sequences)
    sizes = dict(max_tokens=cfg.rollout.max_new_tokens, num_sequences=counts.sequences, num_tokens=counts.tokens)

    def micro_loss(index: slice) -> MicroLoss:
        micro = rows.select(index, trim=counts.trim, pack=counts.pack)
        logprobs, entropy = token_logprobs(ctx.model, micro, cfg.rollout.temperature, with_entropy=True,
                                           chunk_tokens=cfg.train.logprob_chunk_tokens)  # [n, L-1]
        loss, _ = reinforce_loss(logprobs, advantages[index], micro.completion_mask, aggregation=algo.aggregation,
                                 **sizes)
        sums = {}
        if algo.beta:
            with torch.no_grad():
                ref = token_logprobs(ctx.reference, micro, cfg.rollout.temperature,
                                     chunk_tokens=cfg.train.logprob_chunk_tokens)[0]  # [n, L-1]
            kl = kl_penalty(logprobs, ref, algo.kl_estimator)  # [n, L-1]
            loss = loss + algo.beta * aggregate(kl, micro.completion_mask, algo.aggregation, **sizes)
            sums["kl"] = ((kl * micro.completion_mask).sum() / counts.tokens).item()
        return MicroLoss(loss, len(micro), micro.completion_mask, entropy, sums=sums)

    with timed(batch.timings, "update"):
        metrics = accumulate_and_step(micro_loss, counts, ctx.optimizer, ctx.model, cfg.optim.max_grad_norm)
    metrics["zero_adv_frac"] = (advantages == 0).float().mean().item() if len(advantages) else 1.0
    return metrics
