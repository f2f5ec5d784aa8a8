"""PPO (Schulman et al. 2017) with a critic, as one readable update.

    sample -> verify -> token rewards (+ per-token KL to the reference) -> values -> GAE
    -> mu epochs of [clipped (or KL-penalised) surrogate + clipped value loss] -> log

The critic (`ctx.critic`, built in trainer/models/critic.py) is chosen by `algo.critic`:
  * `head` (default): a value head, `nn.Linear(hidden_size, 1)`, on the policy's last hidden state. Cheap
    (no second forward), but the value loss (weight `algo.vf_coef`) also moves the policy's trunk.
  * `model`: a separate critic, `CriticModel`: a copy of the base model's trunk (without its LM head) with
    its own value head, as in the PPO paper and InstructGPT. The value loss then never reaches the policy;
    it costs a second forward/backward and a second copy of the trunk's weights, gradients and Adam state.
    With `model.lora` the copy keeps the base weights frozen and trains LoRA adapters of its own.
Either way the critic's parameters sit in the same AdamW as the policy's, with the same `optim.lr`
(TRL's PPOTrainer also gives policy and value model one optimizer), and its whole state dict is saved
as "critic" in trainer_state.pt, so `resume=` restores it. Rewards are token
level: the verifier's reward sits on the last completion token and, when `algo.beta > 0`, every
token pays beta * (log pi_old - log pi_ref), the per-token KL penalty of InstructGPT (Ouyang et al.
2022). `algo.objective=penalty` swaps the clip for PPO-penalty (the paper's eq. 8) with the adaptive
coefficient of section 4, kept in `ctx.state["penalty_beta"]` across steps and resumes.
Departures from the paper:
  * the default critic (`algo.critic=head`) shares the policy's trunk (see above);
  * the separate critic starts from the base model's weights (its value head from zero), and its
    gradient is clipped jointly with the policy's (`optim.max_grad_norm` over both);
  * GAE advantages are whitened over the batch's tokens, and the value loss is clipped around the
    old values (`algo.clip_eps_value`, null: off), as OpenAI's baselines do (neither is in the paper);
  * one optimizer step per epoch over the whole batch (no minibatch shuffling); the trainer/engine
    logprob mismatch is not corrected (`rollout.importance_cap` is GRPO's).
Under torchrun (`trainer.strategy=ddp`, `algo.critic=head`) each rank takes its share of the prompts;
the counts, the whitening, the adaptive rule's KL and the value statistics are over all ranks, and
the value head's gradient is averaged like the policy's, so 2 ranks train as 1 process would
(tests/trainer/test_distributed.py). `reward.screen_mode=drop_group` removes screened groups before the
values, GAE and whitening (trainer/experience/collect.py); a step that drops every group makes no update
(trainer/step.py; with ranks, a rank left without rows while another has some is not handled).
"""

from __future__ import annotations

import torch

from rlvr.trainer.algos.advantages import gae, masked_mean_var, whiten
from rlvr.trainer.algos.ppo_losses import adaptive_beta, ppo_clip_loss, ppo_penalty_loss, value_loss
from rlvr.trainer.algos.update import MicroLoss, accumulate_and_step, batch_counts
from rlvr.trainer.distributed import global_sum
from rlvr.trainer.context import RunContext
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.critic import logprobs_and_values
from rlvr.trainer.models.logprobs import token_logprobs


def token_rewards(rewards, mask, old_logprobs, ref_logprobs, beta: float):
    """The verifier's reward on each row's last completion token, minus beta * (log pi_old - log pi_ref)
    on every token when beta > 0. rewards [N], mask [N, T] -> [N, T]."""
    mask = mask.to(torch.float32)  # [N, T]
    last = (mask * torch.arange(mask.shape[1])).argmax(dim=1)  # [N] column of the last completion token
    per_token = torch.zeros_like(mask)  # [N, T]
    per_token[torch.arange(mask.shape[0]), last] = rewards.float()
    if beta:
        per_token = per_token - beta * (old_logprobs - ref_logprobs) * mask  # [N, T]
    return per_token


def ppo_update(ctx: RunContext, batch: Batch) -> dict:
    """`algo.mu` epochs on the kept rows (`batch.trained`: drop_group's groups never in the values, GAE or whitening)."""
    cfg, algo = ctx.cfg, ctx.cfg.algo
    trained = batch.trained
    rows, mask = trained.batch, trained.batch.completion_mask  # [N, L-1]
    micro_batch_size, temperature = cfg.train.micro_batch_size, cfg.rollout.temperature
    chunks = [slice(s, s + micro_batch_size) for s in range(0, len(rows), micro_batch_size)]

    with timed(batch.timings, "logprobs"), torch.no_grad():
        old = [logprobs_and_values(ctx.model, ctx.critic, rows.select(c), temperature) for c in chunks]
        old_logprobs = torch.cat([o[0] for o in old])  # [N, L-1]
        old_values = torch.cat([o[1] for o in old]) * mask  # [N, L-1]
        ref_logprobs = (torch.cat([token_logprobs(ctx.reference, rows.select(c), temperature)[0] for c in chunks])
                        if algo.beta else None)  # [N, L-1]
        rewards = token_rewards(trained.rewards.flatten(), mask, old_logprobs, ref_logprobs, algo.beta)  # [N, L-1]
        advantages, returns = gae(rewards, old_values, mask, algo.gamma, algo.lam)  # [N, L-1], [N, L-1]
        advantages = whiten(advantages, mask, total=global_sum)  # [N, L-1] over all ranks' tokens

    penalty_beta = ctx.state.setdefault("penalty_beta", algo.penalty_beta)
    # under torchrun: the whole batch's counts (every rank holds the same number of rows, so the same chunks)
    counts = batch_counts(len(rows), mask.sum(), micro_batch_size, rows.lengths(), cfg.train.max_tokens_per_micro_batch,
                          pack=cfg.train.pack_sequences)
    sizes = dict(max_tokens=cfg.rollout.max_new_tokens, num_sequences=counts.sequences, num_tokens=counts.tokens)

    def micro_loss(index: slice) -> MicroLoss:
        micro = rows.select(index, trim=counts.trim, pack=counts.pack)
        logprobs, values, entropy = logprobs_and_values(ctx.model, ctx.critic, micro, temperature,
                                                        cfg.train.logprob_chunk_tokens)
        if algo.objective == "penalty":
            pg_loss, parts = ppo_penalty_loss(logprobs, old_logprobs[index], advantages[index], micro.completion_mask,
                                              penalty_beta, aggregation=algo.aggregation, **sizes)
        else:
            pg_loss, parts = ppo_clip_loss(logprobs, old_logprobs[index], advantages[index], micro.completion_mask,
                                           clip_eps_low=algo.clip_eps_low, clip_eps_high=algo.clip_eps_high,
                                           aggregation=algo.aggregation, **sizes)
        vf_loss, vf_parts = value_loss(values, old_values[index], returns[index], micro.completion_mask,
                                       algo.clip_eps_value, num_tokens=counts.tokens)
        parts = {**parts, **vf_parts}
        sums = {name: parts.pop(name) for name in ("policy_loss", "vf_loss") if name in parts}  # terms of a total
        return MicroLoss(pg_loss + algo.vf_coef * vf_loss, len(micro), micro.completion_mask, entropy, parts, sums)

    totals: dict[str, float] = {}
    with timed(batch.timings, "update"):
        for _ in range(algo.mu):
            totals = accumulate_and_step(micro_loss, counts, ctx.optimizer, ctx.model, cfg.optim.max_grad_norm,
                                         critic=ctx.critic)
        if algo.objective == "penalty":  # the adaptive rule measures KL(pi_old || pi_new) after the update
            with torch.no_grad():
                new_logprobs = torch.cat([token_logprobs(ctx.model, rows.select(c), temperature)[0] for c in chunks])
                kl = global_sum(((old_logprobs - new_logprobs) * mask).sum()) / counts.tokens  # k1 on pi_old's tokens
            ctx.state["penalty_beta"] = adaptive_beta(penalty_beta, kl.item(), algo.kl_target)
            totals.update({"kl_old_new": kl.item(), "penalty_beta": ctx.state["penalty_beta"]})
    totals["value/mean"] = (global_sum((old_values * mask).sum()) / counts.tokens).item()
    totals["value/explained_var"] = _explained_variance(old_values, returns, mask)
    return totals


def _explained_variance(values, returns, mask) -> float:
    """1 - Var[returns - values] / Var[returns] over the completion tokens of all ranks."""
    var = masked_mean_var(returns, mask, global_sum)[1]
    return 0.0 if var == 0 else (1 - masked_mean_var(returns - values, mask, global_sum)[1] / var).item()
