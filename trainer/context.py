"""`RunContext`: what a step reads, one typed object built once by trainer/setup.py.

An algorithm's contract is `update(ctx: RunContext, batch) -> metrics` (trainer/algos/table.py); the step's frame
(trainer/step.py) and the collection of its experience (trainer/experience/) read the same object. It sits on the
ground floor of the trainer: it imports nothing above it (the engine's types are trainer/rollout/'s, below every
room), so every room may name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    import torch
    from omegaconf import DictConfig
    from transformers import PreTrainedTokenizerBase

    from rlvr.envs.base import Env
    from rlvr.trainer.rollout.types import Engine, SamplingParams


class Rollouts(Protocol):
    """The asynchronous producer a step takes its samples from (trainer/experience/async_rollouts.py)."""

    def take(self, step: int, round_: int, timings: dict): ...  # one round's scored samples (experience/batch.py)

    def step_metrics(self, step: int) -> dict: ...

    def close(self) -> None: ...


@dataclass
class RunContext:
    """What a step reads (trainer/step.py, the algorithms' updates, trainer/experience/)."""

    cfg: DictConfig  # this rank's view of the run's config: its share of the prompts (trainer/distributed.py)
    env: Env  # the training environment (a curriculum's current level; with ranks, this rank's shard)
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module  # the policy as trained: wrapped by DDP or FSDP2 under torchrun
    reference: torch.nn.Module | None  # the frozen reference, when the algorithm's row asks for one
    engine: Engine  # samples completions (trainer/rollout/); synced with the policy after every step
    sampling: SamplingParams
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    critic: torch.nn.Module | None = None  # ppo's: a value head, or a whole critic model (algo.critic)
    state: dict = field(default_factory=dict)  # what an algorithm carries across steps (ppo's penalty_beta)
    cache: dict = field(default_factory=dict)  # what an algorithm rebuilds rather than checkpoints (dpo's offline pairs)
    rollouts: Rollouts | None = None  # rollout.max_staleness > 0: the producer sample_and_score takes from
    log: Callable[[str], None] = print  # the run's log on rank 0, nothing elsewhere: a step's warnings
