"""Every `algo=` that `rlvr train` runs, in one table: its update, its config family, the keys of that family
it does not read, the torchrun strategies it runs under (trainer.strategy=ddp|fsdp2), and what a run of it
needs besides the policy: a frozen reference model, a critic trained beside the policy, offline data. The
loop (trainer/setup.py, run.py) asks this table (`needs_reference`, `build_critic`, `offline_data`, `step`)
instead of testing algorithm names; validation and the `algo.*` key checks (validate.py, algo_keys.py) and
`--help` read their names, families and unread keys from it. A new algorithm is one row here, its
`update(ctx, batch)` in trainer/algos/ and its conf/algo/NAME.yaml (whose defaults list names the row's
family); a new preset of an existing family is its YAML and a row. `step`, the frame around the update
(trainer/step.py: collect, update, schedule, sync, metrics), is the same for every row.

Families, one per config schema (trainer/config.py ALGO_SCHEMAS, so `algo.KEY` means one thing per family):
  policy_gradient   GRPO and its presets (algos/grpo.py: group-normalised advantages, `groups=True`) and
                    REINFORCE with a batch or leave-one-out baseline (algos/reinforce.py); no critic
  ppo               PPO with a value head or a separate critic (algos/ppo.py)
  natural_gradient  TRPO and NPG: conjugate gradient on the KL's Hessian (algos/trpo.py)
  dpo               DPO on pairs built from verified groups, or from a file (algos/dpo.py)

Under torchrun: the GRPO presets, REINFORCE and DPO with ddp or fsdp2; PPO with ddp and its value
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
from rlvr.trainer.algos.ppo import ppo_update
from rlvr.trainer.models.critic import build_critic
from rlvr.trainer.algos.reinforce import reinforce_update
from rlvr.trainer.algos.trpo import trpo_update
from rlvr.trainer.step import train_step


@dataclass(frozen=True)
class Algorithm:
    update: Callable  # (ctx, batch) -> metrics: the algorithm itself (trainer/experience/batch.py says what a batch is)
    family: str  # its config schema's key in trainer/config.py ALGO_SCHEMAS
    strategies: tuple[str, ...]  # the trainer.strategy values besides none it runs under
    # keys of its family's schema it never reads: set away from their defaults, validation refuses them, naming
    # the algorithms that do read them (algo_keys.py), and `--help` leaves them out
    unread: tuple[str, ...] = ()
    groups: bool = False  # normalises advantages within each prompt's group: needs >= 2 completions per prompt
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


# A GRPO preset: the policy-gradient family's keys except REINFORCE's baseline (the group is its baseline).
_GROUP = dict(family="policy_gradient", strategies=("ddp", "fsdp2"), unread=("baseline",), groups=True,
              corrects_staleness=True)
ALGORITHMS = {
    "grpo": Algorithm(grpo_update, **_GROUP),
    "dr_grpo": Algorithm(grpo_update, **_GROUP),
    "dapo": Algorithm(grpo_update, **_GROUP),
    "gspo": Algorithm(grpo_update, **_GROUP),
    "reinforce": Algorithm(reinforce_update, "policy_gradient", strategies=("ddp", "fsdp2"),
                           unread=("clip_eps_low", "clip_eps_high", "scale_advantages_by_std",
                                   "filter_zero_variance_groups", "max_resample_rounds", "mu", "importance_level",
                                   "overlong_buffer", "overlong_penalty")),
    "ppo": Algorithm(ppo_update, "ppo", strategies=("ddp",), build_critic=build_critic),
    "trpo": Algorithm(trpo_update, "natural_gradient", strategies=(), optimizer=False),
    # the full natural-gradient step: no line search
    "npg": Algorithm(trpo_update, "natural_gradient", strategies=(), optimizer=False,
                     unread=("line_search_steps", "backtrack_ratio")),
    "dpo": Algorithm(dpo_update, "dpo", strategies=("ddp", "fsdp2"), reference="always",
                     offline_data=read_offline_pairs),
}
GROUP_ALGOS = tuple(name for name, algorithm in ALGORITHMS.items() if algorithm.groups)
