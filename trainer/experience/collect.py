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

from dataclasses import dataclass, replace

import torch

from rlvr.envs.multi_turn import is_multi_turn
from rlvr.trainer.distributed import rank
from rlvr.trainer.experience.batch import Batch, Sampled
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.experience.rewards import (check_reward_errors, sample_until_full, score_round,
                                             with_overlong_penalty)
from rlvr.trainer.rollout.agent_loop import run_trajectories
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import Rollout
from rlvr.trainer.seeding import derive_seed


def collect(ctx, step: int) -> Batch:
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


def sample_and_score(ctx, step: int, timings: dict, round_: int = 0) -> Sampled:
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


def draw_and_generate(ctx, step: int, timings: dict, round_: int = 0) -> Drawn:
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


def without_dropped_groups(ctx, sampled: Sampled) -> tuple[Sampled, torch.Tensor]:
    """(`sampled` without the groups `reward.screen_mode=drop_group` screened, [B*G] bool of the rows kept).

    drop_group removes such a group from the loss: its rows leave the batch, so they count in no
    baseline, whitening, token count or normaliser (zeroing their reward would still move a REINFORCE
    or PPO update, whose advantages are not group-relative). Without drop_group every row is kept and
    `sampled` is returned as it is."""
    reward_cfg = ctx.cfg.get("reward")
    keep = torch.ones(len(sampled.results), dtype=torch.bool)  # [B*G]
    if reward_cfg is None or not reward_cfg.screen or reward_cfg.screen_mode != "drop_group":
        return sampled, keep
    keep = torch.tensor([not r.details.get("screened") for r in sampled.results])  # [B*G] whole groups (screen())
    return sampled.select(keep), keep
