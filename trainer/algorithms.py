"""Every `algo=` that `rlvr train` runs, in one table: its step function, its family and whether
the torchrun strategies it runs under (trainer.strategy=ddp|fsdp2). run.py dispatches on it; validate.py checks
names and combinations against it. A new algorithm is one row here plus its conf/algo/NAME.yaml.

Families:
  group             presets of one GRPO step (algos/grpo.py): group-normalised advantages, no critic
  policy_gradient   REINFORCE with a batch or leave-one-out baseline (algos/reinforce.py)
  actor_critic      PPO with a value head or a separate critic (algos/ppo.py)
  natural_gradient  TRPO and NPG: conjugate gradient on the KL's Hessian (algos/trpo.py)
  preference        DPO on pairs built from verified groups (algos/dpo.py)

Under torchrun: the group family, REINFORCE and DPO with ddp or fsdp2; PPO with ddp and its value
head (the separate critic and FSDP2's sharded optimizer state are not arranged for its extra
parameters). TRPO/NPG's conjugate gradient (extra full-batch backward passes) is one-process only
(trainer/distributed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rlvr.trainer.algos.dpo import dpo_step
from rlvr.trainer.algos.grpo import grpo_step
from rlvr.trainer.algos.ppo import ppo_step
from rlvr.trainer.algos.reinforce import reinforce_step
from rlvr.trainer.algos.trpo import trpo_step


@dataclass(frozen=True)
class Algorithm:
    step: Callable  # (ctx, step) -> (metrics, samples)
    family: str
    strategies: tuple[str, ...]  # the trainer.strategy values besides none it runs under


ALGORITHMS = {
    "grpo": Algorithm(grpo_step, "group", strategies=("ddp", "fsdp2")),
    "dr_grpo": Algorithm(grpo_step, "group", strategies=("ddp", "fsdp2")),
    "dapo": Algorithm(grpo_step, "group", strategies=("ddp", "fsdp2")),
    "gspo": Algorithm(grpo_step, "group", strategies=("ddp", "fsdp2")),
    "reinforce": Algorithm(reinforce_step, "policy_gradient", strategies=("ddp", "fsdp2")),
    "ppo": Algorithm(ppo_step, "actor_critic", strategies=("ddp",)),
    "trpo": Algorithm(trpo_step, "natural_gradient", strategies=()),
    "npg": Algorithm(trpo_step, "natural_gradient", strategies=()),
    "dpo": Algorithm(dpo_step, "preference", strategies=("ddp", "fsdp2")),
}
STEPS = {name: algorithm.step for name, algorithm in ALGORITHMS.items()}  # run.py looks the step up here
GROUP_ALGOS = tuple(name for name, algorithm in ALGORITHMS.items() if algorithm.family == "group")
