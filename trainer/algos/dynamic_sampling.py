"""DAPO's dynamic sampling (Yu et al. 2025, sec. 3.2 and Algorithm 1): groups whose G rewards are all
equal (all correct or all wrong) have zero advantage and give no gradient, so they are dropped and
more prompts are sampled "until the batch is fully filled with samples whose accuracy is neither 0
nor 1".

Here the batch is `train.prompts_per_step` groups per rank. Round 0 is the step's usual draw; while
fewer groups than that survive, another round draws and samples `prompts_per_step` fresh prompts,
up to `algo.max_resample_rounds` extra rounds (verl's `max_num_gen_batches` plays this role). The
first `prompts_per_step` surviving groups in draw order are trained on; if the rounds run out the
step trains on the fewer it has (logged as kept_frac, the share of sampled groups trained on, and
dynamic_sampling/rounds). reward/mean and the other reward metrics stay those of round 0, the
step's usual draw, so the curve compares with other algorithms' (and a frozen run's) on the same
prompts; tokens_per_s counts every round.

With ranks (trainer.strategy=ddp|fsdp2) the decision is global and identical to one process's:
each round every rank shares its survivors, and the first `prompts_per_step x world size` survivors
in one process's draw order (round, then rank, then prompt) are kept, so all ranks run the same
number of rounds (their generation may make collective calls) and the run matches a 1-process one.
"""

from __future__ import annotations

import torch

from rlvr.trainer.algos.advantages import zero_variance_groups
from rlvr.trainer.distributed import gather_from_ranks, rank, world_size
from rlvr.trainer.rollout.sampling import Sampled, concat_sampled, sample_and_score


def first_survivors(survived: torch.Tensor, target: int) -> torch.Tensor:
    """survived: [R, W, B] bool in draw order -> the same shape, True for the first `target` of them."""
    flat = survived.flatten()
    return (flat & (flat.long().cumsum(0) <= target)).view_as(survived)


def sample_until_full(ctx, step: int, timings: dict) -> tuple[Sampled, Sampled, torch.Tensor, int]:
    """(round 0's groups, every group sampled this step on this rank, [R*B] mask of the groups to train on
    among the latter, rounds R)."""
    cfg = ctx.cfg
    target = cfg.train.prompts_per_step * world_size()
    parts, survived = [], []  # survived: per round, [W, B]
    for round_ in range(1 + cfg.algo.max_resample_rounds):
        part = sample_and_score(ctx, step, timings, round_=round_)
        parts.append(part)
        mixed = ~zero_variance_groups(part.rewards)  # [B] on the verifiers' rewards (eq. 11)
        survived.append(gather_from_ranks(mixed.long()).bool())  # [W, B]
        if int(torch.stack(survived).sum()) >= target:
            break
    chosen = first_survivors(torch.stack(survived), target)[:, rank()]  # [R, B]
    return parts[0], concat_sampled(parts, ctx.tokenizer.pad_token_id), chosen.flatten(), len(parts)
