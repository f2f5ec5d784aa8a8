"""Every `algo=` that `rlvr train` runs, in one table: its step function, its family and whether
it runs under torchrun (trainer.strategy=ddp|fsdp2). run.py dispatches on it; validate.py checks
names and combinations against it. A new algorithm is one row here plus its conf/algo/NAME.yaml.

Families:
  group             presets of one GRPO step (grpo.py): group-normalised advantages, no critic
  policy_gradient   REINFORCE with a batch or leave-one-out baseline (reinforce.py)
  actor_critic      PPO with a value head or a separate critic (ppo.py)
  natural_gradient  TRPO and NPG: conjugate gradient on the KL's Hessian (trpo.py)
  preference        DPO on pairs built from verified groups (dpo.py)

Under torchrun: the group family and REINFORCE. PPO's critic, TRPO/NPG's extra full-batch backward
passes and DPO's rounds are one-process only (trainer/distributed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rlvr.trainer.dpo import dpo_step
from rlvr.trainer.grpo import grpo_step
from rlvr.trainer.ppo import ppo_step
from rlvr.trainer.reinforce import reinforce_step
from rlvr.trainer.trpo import trpo_step


@dataclass(frozen=True)
class Algorithm:
    step: Callable  # (ctx, step) -> (metrics, samples)
    family: str
    parallel: bool  # runs under trainer.strategy=ddp|fsdp2


ALGORITHMS = {
    "grpo": Algorithm(grpo_step, "group", parallel=True),
    "dr_grpo": Algorithm(grpo_step, "group", parallel=True),
    "dapo": Algorithm(grpo_step, "group", parallel=True),
    "gspo": Algorithm(grpo_step, "group", parallel=True),
    "reinforce": Algorithm(reinforce_step, "policy_gradient", parallel=True),
    "ppo": Algorithm(ppo_step, "actor_critic", parallel=False),
    "trpo": Algorithm(trpo_step, "natural_gradient", parallel=False),
    "npg": Algorithm(trpo_step, "natural_gradient", parallel=False),
    "dpo": Algorithm(dpo_step, "preference", parallel=False),
}
STEPS = {name: algorithm.step for name, algorithm in ALGORITHMS.items()}  # run.py looks the step up here
GROUP_ALGOS = tuple(name for name, algorithm in ALGORITHMS.items() if algorithm.family == "group")
PARALLEL_ALGOS = tuple(name for name, algorithm in ALGORITHMS.items() if algorithm.parallel)
