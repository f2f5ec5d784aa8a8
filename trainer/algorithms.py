"""Every `algo=` that `rlvr train` runs, in one table: its step function, its family, the torchrun
strategies it runs under (trainer.strategy=ddp|fsdp2), and what a run of it needs besides the policy:
a frozen reference model, a critic trained beside the policy, offline data. run.py asks this table
(`needs_reference`, `build_critic`, `offline_data`) instead of testing algorithm names; validate.py
checks names and combinations against it. A new algorithm is one row here, its step in
trainer/algos/ and its conf/algo/NAME.yaml.

Families:
  group             presets of one GRPO step (algos/grpo.py): group-normalised advantages, no critic
  policy_gradient   REINFORCE with a batch or leave-one-out baseline (algos/reinforce.py)
  actor_critic      PPO with a value head or a separate critic (algos/ppo.py)
  natural_gradient  TRPO and NPG: conjugate gradient on the KL's Hessian (algos/trpo.py)
  preference        DPO on pairs built from verified groups, or from a file (algos/dpo.py)

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
from rlvr.trainer.algos.ppo import build_critic, ppo_step
from rlvr.trainer.algos.reinforce import reinforce_step
from rlvr.trainer.algos.trpo import trpo_step


@dataclass(frozen=True)
class Algorithm:
    step: Callable  # (ctx, step) -> (metrics, samples)
    family: str
    strategies: tuple[str, ...]  # the trainer.strategy values besides none it runs under
    # "kl": a reference only when algo.beta > 0 adds a KL term; "always": the loss itself compares with
    # the frozen reference (DPO's log-ratios, where algo.beta is a temperature and never 0)
    reference: str = "kl"
    build_critic: Callable | None = None  # (policy, algo.critic) -> the module trained beside it (PPO's)
    offline_data: bool = False  # reads `data=FILE` (scored completions) instead of sampling, when given
    # trains on samples up to rollout.max_staleness versions old (rollout/async_rollouts.py): its loss corrects
    # them with the engine's logprobs (rollout.importance_cap's truncated importance weights)
    corrects_staleness: bool = False

    def needs_reference(self, algo_cfg) -> bool:
        return self.reference == "always" or bool(algo_cfg.get("beta", 0))


_GROUP = dict(family="group", strategies=("ddp", "fsdp2"), corrects_staleness=True)
ALGORITHMS = {
    "grpo": Algorithm(grpo_step, **_GROUP),
    "dr_grpo": Algorithm(grpo_step, **_GROUP),
    "dapo": Algorithm(grpo_step, **_GROUP),
    "gspo": Algorithm(grpo_step, **_GROUP),
    "reinforce": Algorithm(reinforce_step, "policy_gradient", strategies=("ddp", "fsdp2")),
    "ppo": Algorithm(ppo_step, "actor_critic", strategies=("ddp",), build_critic=build_critic),
    "trpo": Algorithm(trpo_step, "natural_gradient", strategies=()),
    "npg": Algorithm(trpo_step, "natural_gradient", strategies=()),
    "dpo": Algorithm(dpo_step, "preference", strategies=("ddp", "fsdp2"), reference="always", offline_data=True),
}
GROUP_ALGOS = tuple(name for name, algorithm in ALGORITHMS.items() if algorithm.family == "group")
