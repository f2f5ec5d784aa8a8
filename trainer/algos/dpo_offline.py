"""Offline DPO (`algo=dpo data=FILE`): the step's pairs read from a scored-completions JSONL, not sampled.

    once (the first step): read (dpo_data.py checks the format) -> pairs (pairs.py) -> reference logprobs of
                           every pair, kept in `ctx.cache` (rebuilt on resume, never checkpointed)
    each step:             the next `algo.pairs_per_step` pairs of a seeded shuffled epoch (`offline_batch`: a batch
                           stays inside one epoch, so it never repeats a pair) -> this rank's contiguous share

The row of algo=dpo names `read_offline_pairs` as its `offline_data` (trainer/algos/table.py), which the step
calls instead of collecting when `data=` is given; the update on the pairs is dpo.py's, as online.
Offline runs log no `reward/mean` (no completion is sampled): `OfflineBatch.report` logs the data's pair
statistics, the epoch, and `data/reward_chosen` and `data/reward_rejected`, the verifier rewards of the step's
pairs. Offline data holds one-turn completions, so `data=` with a multi-turn env is refused (trainer/validate.py).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from rlvr.errors import ConfigError
from rlvr.trainer.algos.dpo import PairBatch, pack_pairs, pairs_of, sequence_logprobs
from rlvr.trainer.algos.dpo_data import read_scored_completions
from rlvr.trainer.algos.pairs import Pair, Scored
from rlvr.trainer.context import RunContext
from rlvr.trainer.distributed import rank, world_size
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.rollout.prompts import render_messages
from rlvr.trainer.seeding import derive_seed


@dataclass
class OfflineBatch:
    """A step of offline DPO (`data=FILE`): this rank's share of the step's pairs; nothing is sampled."""

    data: "OfflineData"
    picked: torch.Tensor  # [<= pairs_per_step] the step's pair indices, over all ranks
    pairs: PairBatch  # this rank's contiguous share of them, with reference logprobs
    epochs_done: float
    timings: dict

    def __len__(self) -> int:
        return len(self.pairs)

    def report(self, ctx, step: int, update_metrics: dict) -> tuple[dict, list[dict]]:
        """Offline runs log no `reward/mean` (no completion is sampled): the data's pair statistics, the epoch,
        and the verifier rewards of the step's chosen and rejected completions; samples are its pairs."""
        data = self.data
        pairs = [data.pairs[i] for i in self.picked.tolist()]
        metrics = {
            "step": step, **update_metrics, **data.stats,
            "data/epoch": self.epochs_done,
            "data/reward_chosen": sum(data.groups[p.group][p.chosen].reward for p in pairs) / len(pairs),
            "data/reward_rejected": sum(data.groups[p.group][p.rejected].reward for p in pairs) / len(pairs),
            "lr": ctx.scheduler.get_last_lr()[0],
            **{f"time/{name}": seconds for name, seconds in self.timings.items()},
        }
        samples = [{"step": step, "prompt": data.prompts[p.group],
                    "chosen": {"text": data.groups[p.group][p.chosen].text,
                               "reward": data.groups[p.group][p.chosen].reward},
                    "rejected": {"text": data.groups[p.group][p.rejected].text,
                                 "reward": data.groups[p.group][p.rejected].reward}}
                   for p in pairs[: ctx.cfg.train.logged_prompts_per_step]]
        return metrics, samples


def read_offline_pairs(ctx: RunContext, step: int) -> OfflineBatch:
    """Step `step`'s pairs of `data=FILE` (read, paired and given reference logprobs once, on the first step)."""
    cfg, timings = ctx.cfg, {}
    if "dpo_offline" not in ctx.cache:
        with timed(timings, "prepare"):
            ctx.cache["dpo_offline"] = _prepare_offline(ctx)
    data = ctx.cache["dpo_offline"]
    picked, epochs_done = offline_batch(cfg.seed, step, cfg.algo.pairs_per_step, len(data.batch))
    picked = torch.tensor(picked)  # [<= pairs_per_step]
    mine = torch.tensor_split(picked, world_size())[rank()]  # with ranks: a contiguous share (sizes differ by <= 1)
    return OfflineBatch(data, picked, data.batch.select(mine), epochs_done, timings)


def offline_batch(seed: int, step: int, pairs_per_step: int, size: int) -> tuple[list[int], float]:
    """Step `step`'s pair indices and the epochs completed after it. Each epoch is a seeded shuffle of
    the `size` pairs cut into batches of `pairs_per_step` (the last one shorter when it does not divide);
    a batch never crosses into the next epoch, so it never holds a pair twice."""
    per_step = min(pairs_per_step, size)
    batches_per_epoch = math.ceil(size / per_step)
    epoch, index = divmod(step - 1, batches_per_epoch)
    end = min((index + 1) * per_step, size)
    return _epoch_order(seed, epoch, size)[index * per_step : end], epoch + end / size


def _epoch_order(seed: int, epoch: int, size: int) -> list[int]:
    order = list(range(size))
    random.Random(derive_seed("dpo-epoch", seed, epoch)).shuffle(order)
    return order


@dataclass
class OfflineData:
    prompts: list[list[dict]]  # per group: the chat messages
    groups: list[list[Scored]]
    pairs: list[Pair]
    stats: dict
    batch: PairBatch  # every pair, with reference logprobs


def _prepare_offline(ctx) -> OfflineData:
    cfg, tokenizer = ctx.cfg, ctx.tokenizer
    prompts, completions = read_scored_completions(cfg.data)
    try:
        texts = render_messages(tokenizer, prompts)
    except ValueError as error:
        raise ConfigError(f"data={cfg.data}: {error}") from None
    prompt_ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    completion_ids = [[tokenizer(text, add_special_tokens=False)["input_ids"] + ([] if truncated else
                                                                                   [tokenizer.eos_token_id])
                       for text, _, truncated in group] for group in completions]
    groups = [[Scored(text, reward, len(ids)) for (text, reward, _), ids in zip(group, group_ids)]
              for group, group_ids in zip(completions, completion_ids)]
    pairs, stats = pairs_of(groups, cfg.algo)
    if not pairs:
        raise ConfigError(f"data={cfg.data}: no preference pair in {len(groups)} prompt(s): every prompt's "
                          f"completions tie (or differ by less than algo.min_margin={cfg.algo.min_margin})")
    sequences = pack_pairs(pairs, lambda g: prompt_ids[g], lambda g, i: completion_ids[g][i], tokenizer.pad_token_id)
    ref_logps = sequence_logprobs(ctx.reference, sequences, cfg.train.micro_batch_size)  # [2P]
    if rank() == 0:  # every rank holds all pairs (and their reference logprobs); each step trains on its share
        print(f"dpo: {len(pairs)} pairs from {len(groups)} prompts in {cfg.data} "
              f"({stats['pairs/no_pair_frac']:.0%} of prompts without a pair); "
              + (f"{cfg.algo.pairs_per_step} pairs per step = {math.ceil(len(pairs) / cfg.algo.pairs_per_step)} "
                 "steps an epoch" if cfg.algo.pairs_per_step <= len(pairs) else
                 f"algo.pairs_per_step={cfg.algo.pairs_per_step} is more than there are pairs: each step takes "
                 f"all {len(pairs)}, once each"))
    return OfflineData(prompts, groups, pairs, stats, PairBatch(sequences, ref_logps))
