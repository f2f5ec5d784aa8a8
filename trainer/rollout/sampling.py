"""What every policy-gradient step shares before and after its update: sample G completions per
prompt, verify them, pack them (with `reward.*`'s control rewards and hack screening applied, hack_monitor.py);
then the step's common metrics (hack rates included) and logged samples.

The algorithms (trainer/algos/: `grpo.py`, `reinforce.py`, `ppo.py`, `trpo.py`) differ only in between.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

from rlvr.envs.multi_turn import is_multi_turn
from rlvr.trainer.distributed import rank
from rlvr.trainer.models.logprobs import PackedBatch, pack
from rlvr.trainer.rollout.controls import control_rewards
from rlvr.trainer.rollout.hack_monitor import hack_metrics, hacks_of, screen
from rlvr.trainer.rollout.agent_loop import run_trajectories, trajectory_metrics, trajectory_sample
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import Rollout
from rlvr.trainer.seeding import derive_seed
from rlvr.trainer.truncation import no_credit_when_truncated


@dataclass
class Sampled:
    rows: list  # B prompts' data rows
    rollout: object  # the engine's Rollout: texts, prompt_ids, completion_ids, logprobs, truncated
    results: list  # B*G VerifyResults
    rewards: torch.Tensor  # [B, G]
    batch: PackedBatch  # B*G packed rows
    engine_logprobs: torch.Tensor  # [B*G, L-1] the engine's logprobs in `batch`'s layout


def sample_and_score(ctx, step: int, timings: dict, round_: int = 0) -> Sampled:
    """B prompts (drawn from the step's seed; `round_` > 0: a further draw, for DAPO's dynamic sampling),
    G completions each, verified and packed. With `rollout.max_staleness > 0` the loop has put an
    asynchronous producer in `ctx.rollouts` (rollout/async_rollouts.py): the batch comes from it,
    sampled ahead by its own engine copy and already scored."""
    rollouts = getattr(ctx, "rollouts", None)
    if rollouts is not None:
        return rollouts.take(step, round_, timings)
    return score_drawn(ctx, draw_and_generate(ctx, step, timings, round_), timings)


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


def score_drawn(ctx, drawn: Drawn, timings: dict, score=None) -> Sampled:
    """Verify and pack `drawn`. `score(texts, rows)` replaces `ctx.env.score` (the asynchronous producer's
    scores group by group on a thread pool); multi-turn trajectories are scored by the environment."""
    cfg, rows, rollout, draw = ctx.cfg, drawn.rows, drawn.rollout, drawn.draw
    prompts_per_step, group_size = cfg.train.prompts_per_step, cfg.train.completions_per_prompt
    multi_turn = is_multi_turn(ctx.env)
    with timed(timings, "score"):
        repeated = [row for row in rows for _ in range(group_size)]
        if multi_turn:  # the verifiers' score plus the env's weighted turn rewards (weight 0: the score alone)
            results = ctx.env.add_turn_rewards(ctx.env.score_trajectories([t["messages"] for t in rollout.trajectories],
                                                                          repeated),
                                               [t["turn_rewards"] for t in rollout.trajectories])
        else:
            results = (score or ctx.env.score)(rollout.texts, repeated)
        results = no_credit_when_truncated(results, rollout.truncated, cfg.rollout.truncated_reward)
        reward_cfg = cfg.get("reward")
        if reward_cfg is not None and reward_cfg.kind != "env":  # a control: the stated reward, not the verifiers'
            results = control_rewards(results, reward_cfg, ctx.env, rollout.texts, derive_seed("control", *draw))
        if reward_cfg is not None and reward_cfg.screen:
            results = screen(results, group_size, reward_cfg.screen_mode)
    rewards = torch.tensor([r.reward for r in results], dtype=torch.float32).view(prompts_per_step, group_size)  # [B, G]
    batch = pack(rollout.prompt_ids, rollout.completion_ids, ctx.tokenizer.pad_token_id, rollout.loss_mask)
    engine_logprobs = packed_engine_logprobs(rollout, batch.completion_mask.shape[1])  # [B*G, L-1]
    return Sampled(rows, rollout, results, rewards, batch, engine_logprobs)


def without_dropped_groups(ctx, sampled: Sampled) -> tuple[Sampled, torch.Tensor]:
    """(`sampled` without the groups `reward.screen_mode=drop_group` screened, [B*G] bool of the rows kept).

    drop_group removes such a group from the loss: its rows leave the batch, so they count in no
    baseline, whitening, token count or normaliser (zeroing their reward would still move a REINFORCE
    or PPO update, whose advantages are not group-relative). Without drop_group every row is kept and
    `sampled` is returned as it is. The kept one's `rollout` stays the whole step's: the step's metrics and
    logged samples read the full `sampled`."""
    group_size = ctx.cfg.train.completions_per_prompt
    reward_cfg = ctx.cfg.get("reward")
    keep = torch.ones(len(sampled.results), dtype=torch.bool)  # [B*G]
    if reward_cfg is None or not reward_cfg.screen or reward_cfg.screen_mode != "drop_group":
        return sampled, keep
    keep = torch.tensor([not r.details.get("screened") for r in sampled.results])  # [B*G] whole groups (screen())
    groups = keep.view(-1, group_size).all(dim=1)  # [B]
    kept = Sampled(rows=[row for row, k in zip(sampled.rows, groups.tolist()) if k], rollout=sampled.rollout,
                   results=[r for r, k in zip(sampled.results, keep.tolist()) if k], rewards=sampled.rewards[groups],
                   batch=sampled.batch.select(keep), engine_logprobs=sampled.engine_logprobs[keep])
    return kept, keep


def skip_update(ctx, step: int, sampled: Sampled, timings: dict) -> tuple[dict, list[dict]]:
    """A step whose every group was dropped (`without_dropped_groups`): no update, the schedule still advances."""
    ctx.scheduler.step()
    return step_metrics_and_samples(ctx, step, sampled, timings, {}, {"kept_frac": 0.0})


def concat_sampled(parts: list[Sampled], pad_token_id: int) -> Sampled:
    """Several rounds of `sample_and_score` as one: groups in round order, repacked to one width."""
    if len(parts) == 1:
        return parts[0]
    rollout = Rollout(*(sum((getattr(p.rollout, name) for p in parts), [])
                        for name in ("prompt_ids", "completion_ids", "texts", "logprobs", "truncated")))
    if all(p.rollout.version is not None for p in parts):  # asynchronous rollouts: each sample's policy version
        rollout.version = sum((p.rollout.version for p in parts), [])
    if parts[0].rollout.loss_mask is not None:  # multi-turn: every round's rollout carries its mask and trajectories
        rollout.loss_mask = sum((p.rollout.loss_mask for p in parts), [])
        rollout.trajectories = sum((p.rollout.trajectories for p in parts), [])
    batch = pack(rollout.prompt_ids, rollout.completion_ids, pad_token_id, rollout.loss_mask)
    return Sampled(
        rows=sum((p.rows for p in parts), []), rollout=rollout, results=sum((p.results for p in parts), []),
        rewards=torch.cat([p.rewards for p in parts]), batch=batch,
        engine_logprobs=packed_engine_logprobs(rollout, batch.completion_mask.shape[1]),
    )


def step_metrics_and_samples(ctx, step: int, sampled: Sampled, timings: dict, update_metrics: dict,
                             batch_metrics: dict | None = None,
                             generated_tokens: int | None = None) -> tuple[dict, list[dict]]:
    """The metrics every algorithm logs (reward, statuses, lengths, throughput, timings), with the
    algorithm's `update_metrics` after the rewards and its `batch_metrics` after the lengths, and
    the first `train.logged_prompts_per_step` prompts' completions. Throughput counts `generated_tokens`
    (default: `sampled`'s; more when the step sampled further rounds than the one it reports)."""
    cfg, rollout, results = ctx.cfg, sampled.rollout, sampled.results
    group_size = cfg.train.completions_per_prompt
    metrics = {"step": step, **reward_metrics(sampled.rewards, results), **hack_metrics(results), **update_metrics}
    sampled_ids = rollout.completion_ids if rollout.loss_mask is None else [  # multi-turn: the sampled tokens only
        [t for t, m in zip(c, mask) if m] for c, mask in zip(rollout.completion_ids, rollout.loss_mask)]
    lengths = torch.tensor([len(c) for c in sampled_ids], dtype=torch.float32)  # [B*G]
    metrics.update({
        "response_len/mean": lengths.mean().item(),
        "truncated_frac": sum(rollout.truncated) / len(rollout.truncated),
    })
    if rollout.trajectories is not None:
        metrics.update(trajectory_metrics(rollout.trajectories))
    metrics.update(batch_metrics or {})
    metrics.update({
        "lr": ctx.scheduler.get_last_lr()[0],
        "tokens_per_s": (generated_tokens or rollout.num_tokens) / max(sum(timings.values()), 1e-9),
        **{f"time/{name}": seconds for name, seconds in timings.items()},
    })
    rows = sampled.rows

    def completion(k: int) -> dict:
        logged = {"text": rollout.texts[k], **results[k].to_dict()}
        hacks = hacks_of(results[k])
        if hacks:  # the monitor's mark (hack_monitor.py)
            logged["hacks"] = hacks
        if rollout.trajectories is not None:  # multi-turn: each turn's text with its loss mask
            logged["trajectory"] = trajectory_sample(ctx.tokenizer, rollout.trajectories[k])
        return logged

    samples = [
        {"step": step, "prompt": ctx.env.messages(rows[i]), "answer": rows[i].get("answer"),
         "completions": [completion(i * group_size + j) for j in range(group_size)]}
        for i in range(min(cfg.train.logged_prompts_per_step, len(rows)))
    ]
    return metrics, samples


def packed_engine_logprobs(rollout, width: int) -> torch.Tensor:
    """The engine's per-completion logprobs scattered into `pack`'s [N, L-1] layout (0 elsewhere):
    completion tokens of row i sit at columns len(prompt_i) - 1 onwards."""
    packed = torch.zeros(len(rollout.completion_ids), width)  # [N, L-1]
    for i, (prompt, logprobs) in enumerate(zip(rollout.prompt_ids, rollout.logprobs)):
        packed[i, len(prompt) - 1 : len(prompt) - 1 + len(logprobs)] = logprobs.float()
    return packed


def reward_metrics(rewards: torch.Tensor, results) -> dict:
    metrics = {"reward/mean": rewards.mean().item(), "reward/std": rewards.std().item(),
               # groups whose G rewards are all equal: zero advantage, no gradient (algos/advantages.py)
               "reward/zero_var_frac": (rewards == rewards[:, :1]).all(dim=1).float().mean().item()}
    components: dict[str, list[float]] = {}
    for result in results:
        for name, part in result.details.get("components", {}).items():
            components.setdefault(name, []).append(part["reward"])
    metrics.update({f"reward/{name}": sum(v) / len(v) for name, v in components.items()})
    true = [r.details["reward_true"] for r in results if "reward_true" in r.details]
    if true:  # a control reward (controls.py): what the environment's verifiers gave
        metrics["reward/true_mean"] = sum(true) / len(true)
    statuses = Counter(r.status.value for r in results)
    metrics.update({f"status/{s}": c / len(results) for s, c in sorted(statuses.items())})
    return metrics


@contextmanager
def timed(timings: dict, name: str):
    start = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
