"""DPO (Rafailov et al. 2023) on preference pairs made from verified groups, online or offline.

    online (no `data`), one step = one round:
        sample G completions per prompt with the current policy -> verify -> pairs (`pairs.py`)
        -> reference logprobs once -> `algo.dpo_updates_per_round` optimizer steps over the round's pairs
        -> sync the engine's weights
    offline (`data=PATH`, a scored-completions JSONL; the batch is dpo_offline.py's):
        once: read -> pairs -> reference logprobs of every pair
        each step: the next `algo.pairs_per_step` pairs of a seeded shuffled epoch -> one optimizer step

The loss lives in `dpo_loss.py`. Departures and choices:
  * The paper trains offline on fixed human pairs; the online mode is iterative DPO on the policy's
    own samples (as Xu et al. 2023, "Some things are more CRINGE than others", and Yuan et al. 2024,
    "Self-Rewarding Language Models"), with pairs from the verifier instead of a reward model, and
    every pair a group offers (capped), not TRL OnlineDPO's single pair of 2 samples.
  * Logprobs are taken at temperature 1 (the policy itself), whatever rollout.temperature sampled.
  * The reference is the starting model (`model.name_or_path` or the tiny build), loaded frozen;
    it is not refreshed between rounds.
  * Each optimizer step averages the loss over all pairs of its batch; micro-batches hold
    train.micro_batch_size sequences (a pair is 2), and add up to the same gradient.
  * Offline runs log no `reward/mean` (no completion is sampled); they log `data/reward_chosen` and
    `data/reward_rejected`, the verifier rewards of the batch's pairs, instead.
  * Under torchrun (ddp, fsdp2) online, each rank pairs the groups of its share of the prompts; offline,
    every rank holds all pairs and trains on a contiguous share of each step's. The loss is averaged over
    the pairs of all ranks, a rank with fewer (or no) pairs runs empty micro-batches so the collective
    passes match, and the pair statistics are the whole step's (tests/trainer/test_distributed.py).

Offline data: scored completions in JSONL, read and checked by `dpo_data.py` (the format is there).

Multi-turn environments (online only; envs/multi_turn.py): a pair is two whole trajectories of one prompt,
the higher-rewarded chosen (for the built-in envs, a verified-correct one over an incorrect one). Each side's
logprob, the policy's and the reference's, is summed over its sampled tokens only (the agent loop's loss mask:
the environment's replies are 0), so the loss never credits or blames the model for what the environment wrote.
Trajectories are deduplicated by their ids, and `length_match` and IPO count sampled tokens. Offline data
holds one-turn completions, so `data=` with a multi-turn env is refused (trainer/validate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from rlvr.trainer.algos.dpo_loss import dpo_loss
from rlvr.trainer.algos.pairs import Pair, Scored, build_pairs
from rlvr.trainer.algos.update import MicroLoss, accumulate_and_step, batch_counts
from rlvr.trainer.context import RunContext
from rlvr.trainer.distributed import any_rows, gather_objects, world_size
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.logprobs import PackedBatch, pack, token_logprobs

if TYPE_CHECKING:
    from rlvr.trainer.algos.dpo_offline import OfflineBatch


@dataclass
class PairBatch:
    """P pairs packed as 2P sequences: rows [0, P) chosen, rows [P, 2P) rejected."""

    sequences: PackedBatch  # [2P, L]
    ref_logps: torch.Tensor  # [2P] summed completion logprobs under the reference

    def __len__(self) -> int:
        return len(self.sequences) // 2

    def select(self, pairs: torch.Tensor, trim: bool = False, pack: bool = False) -> "PairBatch":
        rows = torch.cat([pairs, pairs + len(self)])  # [2p]
        return PairBatch(self.sequences.select(rows, trim, pack), self.ref_logps[rows])

    def pair_lengths(self, packed: bool = False) -> torch.Tensor:
        """[P] each pair's cost under a token budget: twice its longer sequence when padded, the sum of its
        two when packed (models/packing.py)."""
        lengths = self.sequences.lengths()  # [2P]
        chosen, rejected = lengths[: len(self)], lengths[len(self):]  # [P], [P]
        return chosen + rejected if packed else 2 * torch.maximum(chosen, rejected)


def pack_pairs(pairs: list[Pair], prompt_of, completion_of, pad_id: int, mask_of=None) -> PackedBatch:
    """P pairs as 2P sequences in PairBatch's layout (chosen rows, then rejected); `prompt_of(group)` and
    `completion_of(group, index)` give token ids; `mask_of(group, index)` (trajectories) their 0/1 loss mask,
    so the completion mask, and every logprob summed over it, covers the sampled tokens only. No pairs: an
    empty batch."""
    if not pairs:
        return PackedBatch.empty()
    sides = [(p.group, p.chosen) for p in pairs] + [(p.group, p.rejected) for p in pairs]
    masks = None if mask_of is None else [mask_of(g, i) for g, i in sides]
    return pack([prompt_of(g) for g, _ in sides], [completion_of(g, i) for g, i in sides], pad_id, masks)


def dpo_update(ctx: RunContext, batch: Batch | OfflineBatch) -> dict:
    """Online (a sampled batch, trainer/experience/batch.py): pairs from its kept groups, their reference
    logprobs, then `algo.dpo_updates_per_round` optimizer steps; a round that offers no pair on any rank makes
    none. Offline (an `OfflineBatch` from dpo_offline.py's `read_offline_pairs`): one optimizer step on the
    step's pairs."""
    if not isinstance(batch, Batch):
        with timed(batch.timings, "update"):
            return dpo_optimizer_step(ctx, batch.pairs)
    cfg, algo = ctx.cfg, ctx.cfg.algo
    group_size, trained = cfg.train.completions_per_prompt, batch.trained
    rollout = trained.rollout
    groups = [[_scored(rollout, i * group_size + j, trained.rewards[i, j].item()) for j in range(group_size)]
              for i in range(len(trained.rows))]
    pairs, stats = pairs_of(groups, algo)
    if world_size() > 1:  # the pair statistics of the whole step (every rank's groups), the same on all ranks
        stats = pairs_of([g for rank_groups in gather_objects(groups) for g in rank_groups], algo)[1]
    if not any_rows(len(pairs)):  # with ranks: all update, or none (a rank without pairs runs empty micro-batches)
        return stats
    mask_of = None if rollout.loss_mask is None else (lambda g, i: rollout.loss_mask[g * group_size + i])
    sequences = pack_pairs(pairs, lambda g: rollout.prompt_ids[g * group_size],
                           lambda g, i: rollout.completion_ids[g * group_size + i], ctx.tokenizer.pad_token_id,
                           mask_of)
    with timed(batch.timings, "logprobs"):
        pair_batch = PairBatch(sequences, sequence_logprobs(ctx.reference, sequences, cfg.train.micro_batch_size))
    with timed(batch.timings, "update"):
        for _ in range(algo.dpo_updates_per_round):
            metrics = dpo_optimizer_step(ctx, pair_batch)
    return {**metrics, **stats}


def _scored(rollout, k: int, reward: float) -> Scored:
    """Completion k for pairing. A trajectory (multi-turn) is told apart by all its ids, not by its last message
    (two trajectories that end alike may differ before), and its length counts its sampled tokens only."""
    if rollout.loss_mask is None:
        return Scored(rollout.texts[k], reward, len(rollout.completion_ids[k]))
    return Scored(" ".join(map(str, rollout.completion_ids[k])), reward, sum(rollout.loss_mask[k]))


def dpo_optimizer_step(ctx, batch: PairBatch) -> dict:
    """One optimizer step on the mean DPO loss over `batch`'s pairs, accumulated over micro-batches
    (`update.accumulate_and_step`; its metrics are weighted by pairs)."""
    algo = ctx.cfg.algo
    # with ranks: pairs counted over all of them, and as many micro-batches as the busiest rank (empty ones
    # run a zero-weight pass, trainer/distributed.py); one process: len(batch) and its own count
    pack = ctx.cfg.train.pack_sequences
    counts = batch_counts(len(batch), torch.tensor(0.0), max(1, ctx.cfg.train.micro_batch_size // 2),
                          batch.pair_lengths(pack), ctx.cfg.train.max_tokens_per_micro_batch, pack=pack)
    pair_index = torch.arange(len(batch))  # [P]

    def micro_loss(rows: slice) -> MicroLoss:
        micro = batch.select(pair_index[rows], trim=counts.trim, pack=counts.pack)
        loss, means = pair_batch_loss(ctx.model, micro, algo, counts.sequences, ctx.cfg.train.logprob_chunk_tokens)
        return MicroLoss(loss, len(micro), means=means)

    return accumulate_and_step(micro_loss, counts, ctx.optimizer, ctx.model, ctx.cfg.optim.max_grad_norm,
                               per="sequence")


def pair_batch_loss(model, micro: PairBatch, algo, num_pairs: int, chunk_tokens: int = 0) -> tuple[torch.Tensor, dict]:
    """The DPO loss of `micro`'s pairs (summed, divided by `num_pairs`) and its metrics. Each side's logprob is
    summed over its completion mask: for trajectories the sampled tokens only, so the environment's tokens
    (mask 0) change neither side's logprob nor, through `sequence_logprobs`, the reference's."""
    n = len(micro)
    logprobs = token_logprobs(model, micro.sequences, chunk_tokens=chunk_tokens)[0]  # [2n, L-1]
    mask = micro.sequences.completion_mask  # [2n, L-1]
    logps = (logprobs * mask).sum(-1)  # [2n]
    lengths = mask.sum(-1)  # [2n]
    loss, parts = dpo_loss(logps[:n], logps[n:], micro.ref_logps[:n], micro.ref_logps[n:], beta=algo.beta,
                           loss_type=algo.loss_type, label_smoothing=algo.label_smoothing,
                           chosen_lengths=lengths[:n], rejected_lengths=lengths[n:], num_pairs=num_pairs)
    return loss, {**parts, "logps/chosen": logps[:n].detach().mean(), "logps/rejected": logps[n:].detach().mean()}


@torch.no_grad()
def sequence_logprobs(model, sequences: PackedBatch, micro_batch_size: int) -> torch.Tensor:
    """[N] summed completion logprobs, computed micro_batch_size rows at a time."""
    sums = [torch.zeros(0)]
    for start in range(0, len(sequences), micro_batch_size):
        micro = sequences.select(slice(start, start + micro_batch_size))
        sums.append((token_logprobs(model, micro)[0] * micro.completion_mask).sum(-1))  # [n]
    return torch.cat(sums)  # [N]


def pairs_of(groups: list[list[Scored]], algo) -> tuple[list[Pair], dict]:
    return build_pairs(groups, algo.pair_strategy, max_pairs_per_prompt=algo.max_pairs_per_prompt,
                       min_margin=algo.min_margin, length_match=algo.length_match)
