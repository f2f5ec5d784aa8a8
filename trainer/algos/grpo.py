"""GRPO (Shao et al., 2024, DeepSeekMath) as one readable update.

    sample G completions per prompt -> verify -> group-normalised advantages
    -> clipped surrogate (+ beta * KL to the reference) -> optimizer step -> log

This file is the update (`grpo_update(ctx, batch)`); the step around it (sampling, the reward pipeline, the
schedule, the weight sync, the metrics) is trainer/step.py's, and the math lives in `losses.py` and `advantages.py`.
Departures from the paper, each a config switch (see conf/algo/grpo.yaml):
  * `beta` defaults to 0 (the paper used 0.04), as Dr. GRPO and DAPO recommend; no reference
    model is loaded then.
  * `clip_eps_high` may exceed `clip_eps_low` (DAPO clip-higher); `aggregation` picks the
    paper's per-sequence mean, DAPO's token mean or Dr. GRPO's constant normaliser.
  * `filter_zero_variance_groups` drops groups whose rewards are all equal (their advantage is
    zero); with `max_resample_rounds > 0` it also samples further prompts until the batch is full
    again, as DAPO's dynamic sampling does (trainer/experience/rewards.py, stage 6). The reward metrics stay
    those of the step's first draw; kept_frac is the share of all sampled groups trained on.
  * `overlong_buffer > 0` adds DAPO's soft overlong penalty (trainer/experience/rewards.py, stage 5) to
    the rewards before the advantages; `reward/mean` stays the verifiers' reward, the penalty's mean
    is logged as reward/overlong_penalty, and the filter above looks at the verifiers' rewards only.
  * `importance_level=sequence` is GSPO's sequence ratio (`losses.grpo_loss`); the preset gspo.yaml
    sets mu = 4, since at mu = 1 its gradient is exactly GRPO's.
  * With `mu == 1` the old logprobs equal the current ones, so the ratio is 1 and they are not
    recomputed (the gradient is the same); with `mu > 1` they are computed once before the epochs.
  * The paper assumes the sampler and the trainer share one model. Here the engine (vLLM, or HF
    generate) may compute slightly different probabilities, so the surrogate is reweighted per token
    by min(pi_old_trainer / pi_engine, rollout.importance_cap) (null: off), and the mismatch is
    logged as rollout/logprob_diff_mean and rollout/logprob_diff_max (kept rows only).
"""

from __future__ import annotations

import torch

from rlvr.trainer.algos.advantages import group_advantages, zero_variance_groups
from rlvr.trainer.algos.losses import grpo_loss, truncated_importance_weights
from rlvr.trainer.algos.update import MicroLoss, accumulate, batch_counts, optimizer_step
from rlvr.trainer.context import RunContext
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.logprobs import PackedBatch, token_logprobs


def grpo_update(ctx: RunContext, batch: Batch) -> dict:
    """GRPO's update on the step's batch (trainer/experience/batch.py): advantages over every sampled group,
    then `algo.mu` optimizer steps on the kept rows. `ctx` holds cfg, model, reference, optimizer."""
    cfg, algo = ctx.cfg, ctx.cfg.algo
    # per group, so computing them over all R*B groups and keeping the kept ones equals computing them over those
    advantages = group_advantages(batch.sampled.rewards, scale_by_std=algo.scale_advantages_by_std).flatten()  # [R*B*G]
    advantages = advantages[batch.keep]  # [N]
    rows, engine_logprobs = batch.trained.batch, batch.trained.engine_logprobs  # [N, L], [N, L-1]
    with timed(batch.timings, "logprobs"), torch.no_grad():
        chunk = cfg.train.logprob_chunk_tokens
        old_logprobs = (token_logprobs(ctx.model, rows, cfg.rollout.temperature, chunk_tokens=chunk)[0]
                        if algo.mu > 1 else None)
        ref_logprobs = (token_logprobs(ctx.reference, rows, cfg.rollout.temperature, chunk_tokens=chunk)[0]
                        if algo.beta else None)
    with timed(batch.timings, "update"):
        for _ in range(algo.mu):
            metrics = accumulate_gradients(
                ctx.model, rows, advantages, old_logprobs, ref_logprobs, algo,
                micro_batch_size=cfg.train.micro_batch_size, temperature=cfg.rollout.temperature,
                max_tokens=cfg.rollout.max_new_tokens, engine_logprobs=engine_logprobs,
                importance_cap=cfg.rollout.importance_cap, chunk_tokens=cfg.train.logprob_chunk_tokens,
                token_budget=cfg.train.max_tokens_per_micro_batch, pack=cfg.train.pack_sequences,
            )
            metrics["grad_norm"] = optimizer_step(ctx.optimizer, ctx.model, cfg.optim.max_grad_norm)
    # over all rounds' groups, like kept_frac
    metrics["zero_adv_frac"] = zero_variance_groups(batch.sampled.rewards).float().mean().item()
    return metrics


def accumulate_gradients(model, batch: PackedBatch, advantages, old_logprobs, ref_logprobs, algo, *,
                         micro_batch_size: int, temperature: float, max_tokens: int,
                         engine_logprobs=None, importance_cap: float | None = None, chunk_tokens: int = 0,
                         token_budget: int = 0, pack: bool = False) -> dict:
    """GRPO's loss, backward over micro-batches (`update.accumulate`: the summed gradient equals the
    full batch's); no optimizer step. Returns the batch's metrics.

    With `engine_logprobs` [N, L-1] (the sampler's, packed like `batch`) the trainer/engine mismatch
    is measured on the old logprobs and, when `importance_cap` is set, corrected by truncated
    importance weights. `token_budget > 0`: micro-batches by that many tokens (update.batch_counts); `pack`:
    each one's rows packed into one row (models/packing.py).
    """
    counts = batch_counts(len(batch), batch.completion_mask.sum(), micro_batch_size, batch.lengths(), token_budget,
                          pack=pack)
    diff_max = 0.0

    def micro_loss(rows: slice) -> MicroLoss:
        nonlocal diff_max
        micro = batch.select(rows, trim=counts.trim, pack=counts.pack)  # 0 rows once this rank has run out
        logprobs, entropy = token_logprobs(model, micro, temperature, with_entropy=True,
                                           chunk_tokens=chunk_tokens)  # [n, L-1]
        old = logprobs.detach() if old_logprobs is None else old_logprobs[rows]  # [n, L-1]
        ref = None if ref_logprobs is None else ref_logprobs[rows]
        weights, sums = None, {}
        if engine_logprobs is not None and len(micro) > 0:
            engine = engine_logprobs[rows]  # [n, L-1]
            diff = (old - engine).abs() * micro.completion_mask  # [n, L-1]
            sums["rollout/logprob_diff_mean"] = (diff.sum() / counts.tokens).item()
            diff_max = max(diff_max, diff.max().item())
            if importance_cap is not None:
                weights = truncated_importance_weights(old, engine, importance_cap)  # [n, L-1]
        loss, parts = grpo_loss(
            logprobs, old, advantages[rows], micro.completion_mask, ref_logprobs=ref, beta=algo.beta,
            kl_estimator=algo.kl_estimator, clip_eps_low=algo.clip_eps_low, clip_eps_high=algo.clip_eps_high,
            aggregation=algo.aggregation, max_tokens=max_tokens, num_sequences=counts.sequences,
            num_tokens=counts.tokens, importance_weights=weights, importance_level=algo.importance_level,
        )
        means = {name: parts[name] for name in ("clip_frac", "kl", "ratio_mean") if name in parts}
        return MicroLoss(loss, len(micro), micro.completion_mask, entropy, means, sums)

    metrics = accumulate(micro_loss, counts)
    if engine_logprobs is not None:
        metrics["rollout/logprob_diff_max"] = diff_max
    return metrics
