"""Supervised fine-tuning (`algo=sft`): cross-entropy on completion tokens, from a file, the references, or RFT.

    source=data       the next train.prompts_per_step examples of data=FILE (a seeded shuffled epoch)
    source=reference  the step's train.prompts_per_step rows (the draw a GRPO step makes) with their `reference`
    source=rft        sample G completions per prompt -> verify -> keep the verified-correct ones (at most
                      algo.keep_per_prompt distinct ones per prompt) -> train on them
    then              `sft_loss` (token mean over every completion token of the step) -> one optimizer step

The batch is `sft_batch(ctx, step, collect)` (the step hands it trainer/experience/collect.py's `collect`, which
RFT samples with: an algorithm never imports the collection); the frame around the update (schedule, weight sync,
metrics) is trainer/step.py's, and micro-batching, the token budget, packing, LoRA and torchrun are
trainer/algos/update.py's, as for GRPO. `algo.source=auto` (the default) is `data` when data=FILE is given, else
`reference`.

RFT is rejection-sampling fine-tuning / expert iteration: STaR (Zelikman et al. 2022) keeps a rationale that
reaches the right answer and fine-tunes on it; RFT (Yuan et al. 2023, "Scaling relationship on learning
mathematical reasoning with large language models") keeps every distinct correct path. Departures and choices:
  * Online: each step samples from the current policy and takes one optimizer step on what it kept (STaR and RFT
    sample a whole dataset, then fine-tune from the start model); this is the verifier-native baseline beside
    GRPO's step, at GRPO's sampling cost.
  * Correct means the verifiers' status `correct` (the composite's first component, verifiers/compose.py) and not
    screened by reward.screen; a partial reward is not enough. Distinct means distinct token ids (RFT dedups by the
    equations a path uses, which a verifier-agnostic trainer cannot read).
  * A step that keeps nothing on any rank makes no update: `sft/updated` is 0 and no loss is logged (the schedule
    still advances, as for any step without rows, trainer/step.py). `rft/kept` counts the rows kept over all ranks.
  * The loss is taken at temperature 1 (the policy itself), whatever rollout.temperature sampled.

Under torchrun each rank keeps from its own share of the prompts and the loss divides by the completion tokens of
all ranks, so two ranks train to the weights one process does (tests/trainer/algos/test_sft_train.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rlvr.trainer.algos.dpo_offline import offline_batch
from rlvr.trainer.algos.sft_data import file_batch, read_sft_file, reference_batch, source_of
from rlvr.trainer.algos.sft_loss import sft_loss
from rlvr.trainer.algos.update import MicroLoss, accumulate_and_step, batch_counts
from rlvr.trainer.distributed import any_rows, global_sum, rank, world_size
from rlvr.trainer.context import RunContext
from rlvr.trainer.experience.batch import Batch
from rlvr.trainer.experience.metrics import timed
from rlvr.trainer.models.logprobs import PackedBatch, token_logprobs
from rlvr.trainer.rollout.prompts import render_messages, render_prompts
from rlvr.trainer.seeding import derive_seed
from rlvr.verifiers.result import Status


@dataclass
class SupervisedBatch:
    """A step of `source=data|reference`: this rank's examples, packed; nothing is sampled."""

    rows: PackedBatch  # [n, L] this rank's examples, the prompt masked out of completion_mask
    shown: list[tuple[str, str]]  # (prompt, completion) of the first few, for samples.jsonl
    metrics: dict = field(default_factory=dict)  # data/epoch
    timings: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def report(self, ctx, step: int, update_metrics: dict) -> tuple[dict, list[dict]]:
        """No completion is sampled, so no reward: the update's metrics, the data's, the lr and the timings."""
        metrics = {"step": step, **update_metrics, **self.metrics, "lr": ctx.scheduler.get_last_lr()[0],
                   **{f"time/{name}": seconds for name, seconds in self.timings.items()}}
        samples = [{"step": step, "prompt": prompt, "completion": completion}
                   for prompt, completion in self.shown[: ctx.cfg.train.logged_prompts_per_step]]
        return metrics, samples


def sft_batch(ctx: RunContext, step: int, collect: Callable[[RunContext, int], Batch]) -> SupervisedBatch | Batch:
    """Step `step`'s batch: a `SupervisedBatch` (data, reference) or the sampled, scored Batch (rft, `collect`)."""
    cfg, timings = ctx.cfg, {}
    source = source_of(cfg)
    if source == "rft":
        return collect(ctx, step)
    if source == "reference":
        with timed(timings, "prepare"):  # the draw a GRPO step makes (experience/collect.py), this rank's share
            rows = ctx.env.rows("train", cfg.train.prompts_per_step, seed=derive_seed("train-rows", cfg.seed, step))
            packed = reference_batch(ctx.tokenizer, ctx.env, rows)
            prompts = render_prompts(ctx.tokenizer, ctx.env, rows[: cfg.train.logged_prompts_per_step])
        return SupervisedBatch(packed, [(p, r["reference"]) for p, r in zip(prompts, rows)], {}, timings)
    if "sft_data" not in ctx.cache:  # read and packed once; every rank holds all examples
        with timed(timings, "prepare"):
            examples = read_sft_file(cfg.data)
            ctx.cache["sft_data"] = (examples, file_batch(ctx.tokenizer, examples, cfg.data))
    examples, packed = ctx.cache["sft_data"]
    per_step = cfg.train.prompts_per_step * world_size()  # ctx.cfg holds this rank's share of the step
    picked, epochs_done = offline_batch(cfg.seed, step, per_step, len(examples))
    mine = torch.tensor_split(torch.tensor(picked), world_size())[rank()]  # [<= n] a contiguous share
    shown = [(render_messages(ctx.tokenizer, [examples[i][0]])[0], examples[i][1])
             for i in mine[: cfg.train.logged_prompts_per_step].tolist()]
    return SupervisedBatch(packed.select(mine), shown, {"data/epoch": epochs_done}, timings)


def kept_completions(results: list, completion_ids: list[list[int]], group_size: int,
                     keep_per_prompt: int) -> list[int]:
    """RFT's choice: indices (into `results`, groups of `group_size` in order) of the completions kept, per group
    the first `keep_per_prompt` distinct ones (by token ids) whose status is correct and that no screen marked."""
    kept = []
    for start in range(0, len(results), group_size):
        seen: set[tuple[int, ...]] = set()
        for k in range(start, start + group_size):
            result, ids = results[k], tuple(completion_ids[k])
            if result.status is not Status.CORRECT or result.details.get("screened") or ids in seen:
                continue
            seen.add(ids)
            kept.append(k)
            if len(seen) == keep_per_prompt:
                break
    return kept


def sft_update(ctx: RunContext, batch: SupervisedBatch | Batch) -> dict:
    """One optimizer step of `sft_loss` on the step's examples (a SupervisedBatch), or on the verified-correct
    completions RFT keeps from the sampled batch; none when RFT kept nothing on any rank (module docstring)."""
    metrics = {}
    if isinstance(batch, SupervisedBatch):
        rows = batch.rows
    else:
        trained, group_size = batch.trained, ctx.cfg.train.completions_per_prompt
        kept = kept_completions(trained.results, trained.rollout.completion_ids, group_size, ctx.cfg.algo.keep_per_prompt)
        groups = {k // group_size for k in kept}
        totals = global_sum(torch.tensor([len(kept), len(groups), len(trained.rows)], dtype=torch.int64))  # [3]
        metrics = {"rft/kept": int(totals[0]), "rft/prompts_kept_frac": totals[1].item() / max(totals[2].item(), 1)}
        if not any_rows(len(kept)):
            return {**metrics, "sft/updated": 0}
        rows = trained.batch.select(torch.tensor(kept, dtype=torch.long))
    with timed(batch.timings, "update"):
        metrics.update(sft_optimizer_step(ctx, rows))
    return {**metrics, "sft/updated": 1}


def sft_optimizer_step(ctx, rows: PackedBatch) -> dict:
    """`sft_loss` over `rows`' completion tokens (all ranks'), accumulated over micro-batches, then one step."""
    cfg = ctx.cfg
    pack = cfg.train.pack_sequences
    counts = batch_counts(len(rows), rows.completion_mask.sum(), cfg.train.micro_batch_size, rows.lengths(),
                          cfg.train.max_tokens_per_micro_batch, pack=pack)

    def micro_loss(index) -> MicroLoss:
        micro = rows.select(index, trim=counts.trim, pack=counts.pack)  # 0 rows once this rank has run out
        logprobs, entropy = token_logprobs(ctx.model, micro, with_entropy=True,
                                           chunk_tokens=cfg.train.logprob_chunk_tokens)  # [n, L-1]
        loss, _ = sft_loss(logprobs, micro.completion_mask, counts.tokens)
        return MicroLoss(loss, len(micro), micro.completion_mask, entropy)

    return accumulate_and_step(micro_loss, counts, ctx.optimizer, ctx.model, cfg.optim.max_grad_norm)
