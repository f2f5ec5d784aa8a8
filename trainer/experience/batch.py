"""The batch a step hands its algorithm: the groups it sampled, scored and packed, and the rows it trains on.

    Sampled  one or more rounds of B prompts x G completions: rows, the engine's Rollout, the verifiers'
             results after the reward pipeline (rewards.py), rewards [B, G], the packed rows and the engine's
             logprobs in their layout
    Batch    what `update(ctx, batch)` receives (trainer/step.py): `first` (round 0, the step's usual draw,
             which its metrics and logged samples read), `sampled` (every round, rewards shaped), `keep`
             (the rows trained on) and `trained` (those rows as a Sampled), plus the step's timings and the
             metrics of what was kept

An algorithm whose advantages are per group (GRPO) may compute them over `sampled` and select `keep`; one whose
baseline or normaliser spans the batch (REINFORCE, PPO, TRPO) reads `trained`, where dropped groups never were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rlvr.trainer.experience.metrics import step_metrics_and_samples
from rlvr.trainer.models.logprobs import PackedBatch, pack
from rlvr.trainer.rollout.types import Rollout

ROLLOUT_LISTS = ("prompt_ids", "completion_ids", "texts", "logprobs", "truncated")


@dataclass
class Sampled:
    rows: list  # B prompts' data rows
    rollout: Rollout  # the engine's: texts, prompt_ids, completion_ids, logprobs, truncated
    results: list  # B*G VerifyResults
    rewards: torch.Tensor  # [B, G]
    batch: PackedBatch  # B*G packed rows
    engine_logprobs: torch.Tensor  # [B*G, L-1] the engine's logprobs in `batch`'s layout

    @classmethod
    def packed(cls, rows: list, rollout: Rollout, results: list, group_size: int, pad_token_id: int) -> "Sampled":
        """`rollout`'s rows packed into one batch, with the engine's logprobs laid out like it."""
        rewards = torch.tensor([r.reward for r in results], dtype=torch.float32).view(len(rows), group_size)  # [B, G]
        batch = pack(rollout.prompt_ids, rollout.completion_ids, pad_token_id, rollout.loss_mask)
        engine_logprobs = packed_engine_logprobs(rollout, batch.completion_mask.shape[1])  # [B*G, L-1]
        return cls(rows, rollout, results, rewards, batch, engine_logprobs)

    def select(self, keep: torch.Tensor) -> "Sampled":
        """The rows where `keep` [B*G] is True, which must be whole groups."""
        group_size = self.rewards.shape[1]
        groups = keep.view(-1, group_size).all(dim=1)  # [B]
        rows = keep.nonzero().flatten().tolist()
        rollout = Rollout(*([getattr(self.rollout, name)[i] for i in rows] for name in ROLLOUT_LISTS))
        for name in ("loss_mask", "trajectories", "version"):  # multi-turn, asynchronous: per row too
            values = getattr(self.rollout, name)
            setattr(rollout, name, None if values is None else [values[i] for i in rows])
        return Sampled(rows=[row for row, k in zip(self.rows, groups.tolist()) if k], rollout=rollout,
                       results=[self.results[i] for i in rows], rewards=self.rewards[groups],
                       batch=self.batch.select(keep), engine_logprobs=self.engine_logprobs[keep])


def concat_sampled(parts: list[Sampled], pad_token_id: int) -> Sampled:
    """Several rounds of sampling as one: groups in round order, repacked to one width."""
    if len(parts) == 1:
        return parts[0]
    rollout = Rollout(*(sum((getattr(p.rollout, name) for p in parts), []) for name in ROLLOUT_LISTS))
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


def packed_engine_logprobs(rollout, width: int) -> torch.Tensor:
    """The engine's per-completion logprobs scattered into `pack`'s [N, L-1] layout (0 elsewhere):
    completion tokens of row i sit at columns len(prompt_i) - 1 onwards."""
    packed = torch.zeros(len(rollout.completion_ids), width)  # [N, L-1]
    for i, (prompt, logprobs) in enumerate(zip(rollout.prompt_ids, rollout.logprobs)):
        packed[i, len(prompt) - 1 : len(prompt) - 1 + len(logprobs)] = logprobs.float()
    return packed


@dataclass
class Batch:
    """One step's experience, as collect.py builds it; see the module docstring."""

    first: Sampled  # round 0 as scored: the step's reward metrics and logged samples
    sampled: Sampled  # every round (R x B groups), rewards shaped (rewards.py: DAPO's overlong penalty)
    keep: torch.Tensor  # [R*B*G] bool: the rows trained on (dynamic sampling's choice, drop_group's groups out)
    trained: Sampled  # `sampled` where `keep`: the rows the update sees
    timings: dict = field(default_factory=dict)  # phase -> seconds; the update adds its own (logprobs, update)
    metrics: dict = field(default_factory=dict)  # kept_frac, dynamic_sampling/rounds, reward/overlong_penalty

    def __len__(self) -> int:
        """Rows this rank trains on."""
        return len(self.trained.batch)

    def report(self, ctx, step: int, update_metrics: dict) -> tuple[dict, list[dict]]:
        """The step's metrics (round 0's rewards; throughput over every round's tokens) and logged samples."""
        return step_metrics_and_samples(ctx, step, self.first, self.timings, update_metrics, self.metrics,
                                        generated_tokens=self.sampled.rollout.num_tokens)
