"""On-policy distillation as one readable update: the student samples, a frozen teacher scores every token.

    student samples G completions per prompt -> verify (logged; weighted in only with algo.reward_weight)
    -> teacher logprobs of every sampled token -> per-token advantage log q - sg[log pi] -> optimizer step

The losses are in distill_loss.py (`algo.loss`: `reverse_kl` on the sampled tokens, Thinking Machines'/Tinker's;
`gkd`, TRL's generalized JSD over the whole vocabulary at `algo.jsd_beta`); the teacher is loaded at start
(trainer/models/teacher.py). The update is REINFORCE's frame (reinforce.py) with a per-token advantage: the
shared micro-batch loop (update.py) with its global counts, token budget, packing, LoRA and torchrun paths.
The teacher's forward runs per micro-batch on the same rows (packed the same way), so its logprobs never cost
more memory than the student's.

Departures, each said where it is made: one update per batch (no mu, no clip: the samples are the current
weights'), the student term from the trainer's own logprobs (distill_loss.py); the engine/trainer mismatch
(rollout.importance_cap) is not corrected; with `algo.reward_weight > 0` the verifier reward's GRPO group
advantage (std-scaled, as grpo.py) is added to every token's advantage, so the run needs groups of >= 2.
"""

from __future__ import annotations

import torch

from rlvr.trainer.algos.advantages import group_advantages
from rlvr.trainer.algos.distill_loss import distill_advantages, generalized_jsd, sampled_token_loss
from rlvr.trainer.algos.losses import aggregate
from rlvr.trainer.algos.update import MicroLoss, accumulate_and_step, batch_counts
from rlvr.trainer.context import RunContext
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.logprobs import log_softmax, pick, run_forward, scatter_back, token_logprobs

TEACHER = "teacher"  # its key in ctx.cache, where `load_distill_teacher` puts it at start


def load_distill_teacher(cfg, tokenizer, device, world_size: int, log=print):
    """The row's `teacher` loader (trainer/setup.py calls it at start, after the policy): `algo.teacher` frozen on
    `device`, refused when its tokenizer is not the student's. Under torchrun it is wrapped as the reference is
    (distributed.RankModel), so a rank left with no rows still runs its forward."""
    from rlvr.trainer.distributed import RankModel
    from rlvr.trainer.models.model import autocast_forward
    from rlvr.trainer.models.teacher import load_teacher

    student = cfg.model.name_or_path or f"{cfg.model.name} at {tokenizer.name_or_path}"
    teacher = load_teacher(cfg.algo.teacher, tokenizer, student, device, log=log)
    if cfg.model.autocast == "bf16":  # computes as the policy does (models/model.py)
        autocast_forward(teacher)
    return RankModel(teacher) if world_size > 1 else teacher


def distill_update(ctx: RunContext, batch: Batch) -> dict:
    """One optimizer step on the kept rows; `ctx.cache["teacher"]` is the frozen teacher."""
    cfg, algo = ctx.cfg, ctx.cfg.algo
    teacher = ctx.cache[TEACHER]
    rows = batch.trained.batch
    reward_advantages = None
    if algo.reward_weight:  # per group, so computing them over every group and keeping the kept ones is the same
        reward_advantages = group_advantages(batch.sampled.rewards).flatten()[batch.keep]  # [N]
    counts = batch_counts(len(rows), rows.completion_mask.sum(), cfg.train.micro_batch_size, rows.lengths(),
                          cfg.train.max_tokens_per_micro_batch, pack=cfg.train.pack_sequences)
    sizes = dict(max_tokens=cfg.rollout.max_new_tokens, num_sequences=counts.sequences, num_tokens=counts.tokens)
    temperature, chunk = cfg.rollout.temperature, cfg.train.logprob_chunk_tokens

    def micro_loss(index) -> MicroLoss:
        micro = rows.select(index, trim=counts.trim, pack=counts.pack)
        mask = micro.completion_mask  # [n, L-1]
        rewards = None if reward_advantages is None else reward_advantages[index]  # [n]
        if algo.loss == "gkd":
            logprobs, entropy, teacher_logprobs, divergence = _full_distribution(ctx.model, teacher, micro,
                                                                                 temperature, algo.jsd_beta)
            _, reverse_kl = distill_advantages(logprobs, teacher_logprobs, mask)  # [n, L-1]: logged only
            per_token = divergence  # [n, L-1]
            if rewards is not None:
                per_token = per_token + sampled_token_loss(logprobs, algo.reward_weight * rewards.unsqueeze(-1))
            sums = {"distill/divergence": ((divergence.detach() * mask).sum() / counts.tokens).item()}
        else:
            logprobs, entropy = token_logprobs(ctx.model, micro, temperature, with_entropy=True,
                                               chunk_tokens=chunk)  # [n, L-1]
            with torch.no_grad():
                teacher_logprobs = token_logprobs(teacher, micro, temperature, chunk_tokens=chunk)[0]  # [n, L-1]
            advantages, reverse_kl = distill_advantages(logprobs, teacher_logprobs, mask, rewards,
                                                        algo.reward_weight)  # [n, L-1]
            per_token = sampled_token_loss(logprobs, advantages)  # [n, L-1]
            sums = {}
        loss = aggregate(per_token, mask, algo.aggregation, **sizes)
        # KL(student || teacher) per token, estimated on the sampled tokens (k1): what distillation drives down
        sums["distill/reverse_kl"] = (reverse_kl.sum() / counts.tokens).item()
        sums["distill/teacher_logprob"] = ((teacher_logprobs * mask).sum() / counts.tokens).item()
        return MicroLoss(loss, len(micro), mask, entropy, sums=sums)

    with timed(batch.timings, "update"):
        return accumulate_and_step(micro_loss, counts, ctx.optimizer, ctx.model, cfg.optim.max_grad_norm)


def _full_distribution(model, teacher, micro, temperature: float, beta: float):
    """The student's logprobs of the sampled tokens, its entropy, the teacher's logprobs of those tokens and the
    per-token generalized JSD over the vocabulary, each [n, L-1]; gradients reach the student's logits only."""
    forward = run_forward(model, micro)  # logits [M, V] at the completion tokens
    with torch.no_grad():
        teacher_logits = run_forward(teacher, micro).logits.to(forward.logits.device)  # [M, V']
    width = min(forward.logits.shape[-1], teacher_logits.shape[-1])  # an embedding padded past the vocabulary
    divergence = generalized_jsd(forward.logits[..., :width], teacher_logits[..., :width], beta, temperature)  # [M]
    log_dist = log_softmax(forward.logits, temperature)  # [M, V]
    with torch.no_grad():
        entropy = -(log_dist.exp() * log_dist).sum(-1)  # [M]
        teacher_logprobs = pick(log_softmax(teacher_logits, temperature), forward.targets)  # [M]
    logprobs = pick(log_dist, forward.targets)  # [M]
    return tuple(scatter_back(x, forward.mask) for x in (logprobs, entropy, teacher_logprobs, divergence))
