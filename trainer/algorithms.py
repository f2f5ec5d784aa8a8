"""Every `algo=` that `rlvr train` runs, in one table: its update, its family, the torchrun
strategies it runs under (trainer.strategy=ddp|fsdp2), and what a run of it needs besides the policy:
a frozen reference model, a critic trained beside the policy, offline data. The loop (trainer/setup.py,
run.py) asks this table (`needs_reference`, `build_critic`, `offline_data`, `step`) instead of testing
algorithm names; validate.py checks names and combinations against it. A new algorithm is one row here,
its `update(ctx, batch)` in trainer/algos/ and its conf/algo/NAME.yaml; `step`, the frame around the
update (trainer/step.py: collect, update, schedule, sync, metrics), is the same for every row.

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
from functools import partial
from typing import Callable

from rlvr.trainer.algos.dpo import dpo_update, read_offline_pairs
from rlvr.trainer.algos.grpo import grpo_update
from rlvr.trainer.algos.ppo import build_critic, ppo_update
from rlvr.trainer.algos.reinforce import reinforce_update
from rlvr.trainer.algos.trpo import trpo_update
from rlvr.trainer.step import train_step


@dataclass(frozen=True)
class Algorithm:
    update: Callable  # (ctx, batch) -> metrics: the algorithm itself (trainer/experience/batch.py says what a batch is)
    family: str
    strategies: tuple[str, ...]  # the trainer.strategy values besides none it runs under
    # "kl": a reference only when algo.beta > 0 adds a KL term; "always": the loss itself compares with
    # the frozen reference (DPO's log-ratios, where algo.beta is a temperature and never 0)
    reference: str = "kl"
    build_critic: Callable | None = None  # (policy, algo.critic) -> the module trained beside it (PPO's)
    # (ctx, step) -> the step's batch from `data=FILE` (scored completions), read instead of sampling when given
    offline_data: Callable | None = None
    # trains on samples up to rollout.max_staleness versions old (experience/async_rollouts.py): its loss corrects
    # them with the engine's logprobs (rollout.importance_cap's truncated importance weights)
    corrects_staleness: bool = False
    optimizer: bool = True  # False: the update takes its own step (TRPO, NPG), so the lr schedule does not advance
    step: Callable | None = None  # (ctx, step) -> (metrics, samples): `update` in trainer/step.py's frame

    def __post_init__(self):
        if self.step is None:
            object.__setattr__(self, "step", partial(train_step, update=self.update, offline_data=self.offline_data,
                                                     optimizer=self.optimizer))

    def needs_reference(self, algo_cfg) -> bool:
        return self.reference == "always" or bool(algo_cfg.get("beta", 0))


_GROUP = dict(family="group", strategies=("ddp", "fsdp2"), corrects_staleness=True)
ALGORITHMS = {
    "grpo": Algorithm(grpo_update, **_GROUP),
    "dr_grpo": Algorithm(grpo_update, **_GROUP),
    "dapo": Algorithm(grpo_update, **_GROUP),
    "gspo": Algorithm(grpo_update, **_GROUP),
    "reinforce": Algorithm(reinforce_update, "policy_gradient", strategies=("ddp", "fsdp2")),
    "ppo": Algorithm(ppo_update, "actor_critic", strategies=("ddp",), build_critic=build_critic),
    "trpo": Algorithm(trpo_update, "natural_gradient", strategies=(), optimizer=False),
    "npg": Algorithm(trpo_update, "natural_gradient", strategies=(), optimizer=False),
    "dpo": Algorithm(dpo_update, "preference", strategies=("ddp", "fsdp2"), reference="always",
                     offline_data=read_offline_pairs),
}
GROUP_ALGOS = tuple(name for name, algorithm in ALGORITHMS.items() if algorithm.family == "group")
