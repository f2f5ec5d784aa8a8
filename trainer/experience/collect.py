"""A step's experience, collected: prompts drawn, completions generated, rewards through the pipeline, the
groups the step trains on.

    collect(ctx, step) -> Batch
      sample_and_score        B prompts (seeded by the step), G completions each from the engine, scored by the
                              reward pipeline's stages 1-4 (rewards.py); with `rollout.max_staleness > 0` taken
                              from the asynchronous producer (async_rollouts.py), sampled ahead and scored
      check_reward_errors     a reward component that errored on every completion stops the run; on some, a
                              warning line (rewards.py)
      sample_until_full       DAPO's dynamic sampling, further rounds until B groups have mixed rewards (stage 6)
      with_overlong_penalty   DAPO's overlong penalty on every sampled group's rewards (stage 5)
      without_dropped_groups  `reward.screen_mode=drop_group`: the screened groups leave the batch

Every algorithm's step goes through here (trainer/step.py); none samples on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from rlvr.envs.multi_turn import is_multi_turn
from rlvr.trainer.context import RunContext
from rlvr.trainer.distributed import gather_from_ranks, rank, world_size
from rlvr.trainer.experience.batch import Batch, Sampled, concat_sampled
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.experience.rewards import (check_reward_errors, score_round, with_overlong_penalty,
                                             without_dropped_groups)
from rlvr.trainer.rollout.agent_loop import run_trajectories
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import Rollout
from rlvr.trainer.seeding import derive_seed


def collect(ctx: RunContext, step: int) -> Batch:
    """The step's batch (batch.py): its rounds sampled and scored, rewards shaped, the rows it trains on chosen."""
    cfg, algo = ctx.cfg, ctx.cfg.algo
    group_size, timings, metrics = cfg.train.completions_per_prompt, {}, {}
    if algo.get("filter_zero_variance_groups", False):  # DAPO eq. 11, on the rewards of stage 4: mixed outcomes
        first, sampled, chosen, rounds = sample_until_full(lambda round_: sample_and_score(ctx, step, timings, round_),
                                                           cfg.train.prompts_per_step, algo.max_resample_rounds,
                                                           ctx.tokenizer.pad_token_id)  # chosen: [R*B]
        metrics["dynamic_sampling/rounds"] = rounds
    else:
        first = sampled = sample_and_score(ctx, step, timings)
        chosen = torch.ones(len(sampled.rows), dtype=torch.bool)  # [B]
    check_reward_errors(sampled.results, ctx.env, f"step {step}'s completions", getattr(ctx, "log", print))
    if algo.get("overlong_buffer", 0):
        sampled, penalty = with_overlong_penalty(sampled, cfg.rollout.max_new_tokens, algo.overlong_buffer,
                                                 algo.overlong_penalty)  # penalty: [R*B, G]
        metrics["reward/overlong_penalty"] = penalty.mean().item()
    keep = chosen.repeat_interleave(group_size)  # [R*B*G]
    keep &= without_dropped_groups(ctx, sampled)[1]  # reward.screen_mode=drop_group: screened groups leave the batch
    metrics = {"kept_frac": keep.float().mean().item(), **metrics}  # the share of all sampled rows trained on
    return Batch(first, sampled, keep, sampled if keep.all() else sampled.select(keep), timings, metrics)


def sample_and_score(ctx: RunContext, step: int, timings: dict, round_: int = 0) -> Sampled:
    """B prompts (drawn from the step's seed; `round_` > 0: a further draw, for DAPO's dynamic sampling),
    G completions each, verified and packed. With `rollout.max_staleness > 0` the loop has put an
    asynchronous producer in `ctx.rollouts` (async_rollouts.py): the batch comes from it,
    sampled ahead by its own engine copy and already scored."""
    rollouts = getattr(ctx, "rollouts", None)
    if rollouts is not None:
        return rollouts.take(step, round_, timings)
    return score_round(ctx, draw_and_generate(ctx, step, timings, round_), timings)


@dataclass
class Drawn:
    """One round's prompts and the engine's completions, not yet scored."""

    rows: list
    rollout: Rollout
    draw: tuple  # the seed key of this draw: (seed, step) or (seed, step, round)


def draw_and_generate(ctx: RunContext, step: int, timings: dict, round_: int = 0) -> Drawn:
    """The step's (or round's) B prompts and G completions each from `ctx.engine`."""
    cfg = ctx.cfg
    prompts_per_step = cfg.train.prompts_per_step
    draw = (cfg.seed, step) if round_ == 0 else (cfg.seed, step, round_)  # round 0: the draw every algorithm makes
    seed = derive_seed("train-rows", *draw)
    rows = ctx.env.rows("train", prompts_per_step, seed=seed)
    # one sampling seed per prompt, keyed by its place in the whole step's draw (this rank's share starts at
    # rank x B): vLLM then samples the same completions for it at any world size and after a resume
    first = rank() * prompts_per_step
    params = (replace(ctx.sampling, seeds=tuple(derive_seed("sample", *draw, first + i) for i in range(len(rows))))
              if cfg.rollout.seed_per_prompt else ctx.sampling)
    with timed(timings, "generate"):  # multi-turn: the whole agent loop, environment steps included
        if is_multi_turn(ctx.env):
            rollout = run_trajectories(ctx.engine, ctx.env, rows, params)
        else:
            rollout = ctx.engine.generate(render_prompts(ctx.tokenizer, ctx.env, rows), params)
    return Drawn(rows, rollout, draw)


# ---- dynamic sampling (the reward pipeline's stage 6, rewards.py) --------------------------------------------
# DAPO's dynamic sampling (Yu et al. 2025, sec. 3.2 and Algorithm 1): groups whose G rewards are all equal (all
# correct or all wrong) have zero advantage and give no gradient, so they are dropped and more prompts are sampled
# "until the batch is fully filled with samples whose accuracy is neither 0 nor 1".
#
# Here the batch is `train.prompts_per_step` groups per rank. Round 0 is the step's usual draw; while fewer groups
# than that survive, another round draws and samples `prompts_per_step` fresh prompts, up to
# `algo.max_resample_rounds` extra rounds (verl's `max_num_gen_batches` plays this role). The first
# `prompts_per_step` surviving groups in draw order are trained on; if the rounds run out the step trains on the
# fewer it has (logged as kept_frac, the share of sampled groups trained on, and dynamic_sampling/rounds).
# reward/mean and the other reward metrics stay those of round 0, the step's usual draw, so the curve compares with
# other algorithms' (and a frozen run's) on the same prompts; tokens_per_s counts every round.
#
# With ranks (trainer.strategy=ddp|fsdp2) the decision is global and identical to one process's: each round every
# rank shares its survivors, and the first `prompts_per_step x world size` survivors in one process's draw order
# (round, then rank, then prompt) are kept, so all ranks run the same number of rounds (their generation may make
# collective calls) and the run matches a 1-process one.

def first_survivors(survived: Tensor, target: int) -> Tensor:
    """survived: [R, W, B] bool in draw order -> the same shape, True for the first `target` of them."""
    flat = survived.flatten()
    return (flat & (flat.long().cumsum(0) <= target)).view_as(survived)


def sample_until_full(sample_round: Callable[[int], Sampled], prompts_per_step: int, max_resample_rounds: int,
                      pad_token_id: int) -> tuple[Sampled, Sampled, Tensor, int]:
    """(round 0's groups, every group sampled this step on this rank, [R*B] mask of the groups to train on
    among the latter, rounds R). `sample_round(r)` samples and scores round r (stages 1-4)."""
    target = prompts_per_step * world_size()
    parts, survived = [], []  # survived: per round, [W, B]
    for round_ in range(1 + max_resample_rounds):
        part = sample_round(round_)
        parts.append(part)
        mixed = ~(part.rewards == part.rewards[:, :1]).all(dim=1)  # [B] groups with unequal rewards (eq. 11)
        survived.append(gather_from_ranks(mixed.long()).bool())  # [W, B]
        if int(torch.stack(survived).sum()) >= target:
            break
    chosen = first_survivors(torch.stack(survived), target)[:, rank()]  # [R, B]
    return parts[0], concat_sampled(parts, pad_token_id), chosen.flatten(), len(parts)
