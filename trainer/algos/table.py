"""Every `algo=` that `rlvr train` runs, in one table: its update, its config family, the keys of that family
it does not read, the torchrun strategies it runs under (trainer.strategy=ddp|fsdp2), and what a run of it
needs besides the policy: a frozen reference model, a critic trained beside the policy, offline data. The
loop (trainer/setup.py, step.py) asks this table (`needs_reference`, `build_critic`, `offline_data`, `batch_of`)
instead of testing algorithm names, and so do validation, the `algo.*` key checks and checkpoints
(trainer/validate.py, algo_keys.py, checkpoint.py) and `--help`, which read names, families, unread keys and what
an update reads from it. A new algorithm is one row here, its `update(ctx: RunContext, batch)` in trainer/algos/
and its conf/algo/NAME.yaml (whose defaults list names the row's family); a new preset of an existing family is
its YAML and a row. The frame around the update (trainer/step.py's `train_step(ctx, step, algorithm)`: collect,
update, schedule, sync, metrics) is the same for every row.

The table is read where torch is not loaded (`rlvr train --help`, the command line's checks before Hydra runs):
a row names its functions with `Later("algos.grpo", "grpo_update")`, imported when first called, and a run
takes the row `loaded()` (trainer/setup.py), so its steps call the functions themselves.

Families, one per config schema (trainer/config.py ALGO_SCHEMAS, so `algo.KEY` means one thing per family):
  policy_gradient   GRPO and its presets (algos/grpo.py: group-normalised advantages, `groups=True`) and
                    REINFORCE with a batch or leave-one-out baseline (algos/reinforce.py); no critic
  ppo               PPO with a value head or a separate critic (algos/ppo.py)
  natural_gradient  TRPO and NPG: conjugate gradient on the KL's Hessian (algos/trpo.py)
  dpo               DPO on pairs built from verified groups, or from a file (algos/dpo.py)
  sft               supervised fine-tuning from a file, the references, or RFT's verified samples (algos/sft.py)
  distill           on-policy distillation from a frozen teacher with the student's tokenizer (algos/distill.py)

Under torchrun: the GRPO presets, REINFORCE and DPO with ddp or fsdp2; PPO with ddp and its value
head (the separate critic and FSDP2's sharded optimizer state are not arranged for its extra
parameters). distill with ddp (its frozen teacher whole on every rank). TRPO/NPG's conjugate gradient (extra full-batch backward passes) is one-process only
(trainer/distributed.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from importlib import import_module
from typing import Callable


@dataclass(frozen=True)
class Later:
    """A function of rlvr.trainer named by its module and name, imported on its first call: the files of the
    algorithms import torch, which `rlvr train --help` and the command line's checks must not pay for. (vLLM's
    model registry names its models the same way, `_LazyRegisteredModel`, for the same reason.)"""

    module: str  # under rlvr.trainer: "algos.grpo"
    name: str

    @property
    def __name__(self) -> str:
        return self.name

    def load(self) -> Callable:
        return getattr(import_module(f"rlvr.trainer.{self.module}"), self.name)

    def __call__(self, *args, **kwargs):
        return self.load()(*args, **kwargs)



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
    reads_data: bool = False  # reads `data=FILE` (offline DPO's pairs, SFT's examples); refused for the others
    validate: Callable | None = None  # (cfg) -> None: checks of its own keys and data that span several (sft's)
    check_keys: Callable | None = None  # (cfg) -> None: its family's checks across keys (algos/key_checks.py)
    # (ctx, step, collect) -> the step's batch, made by the algorithm instead of trainer/experience/collect.py's
    # (sft's); `collect` is handed over for one that samples (RFT), since no algorithm imports the collection
    batch_of: Callable | None = None
    # trains on samples up to rollout.max_staleness versions old (experience/async_rollouts.py): its loss corrects
    # them with the engine's logprobs (rollout.importance_cap's truncated importance weights)
    corrects_staleness: bool = False
    optimizer: bool = True  # False: the update takes its own step (TRPO, NPG), so the lr schedule does not advance
    # its update reads whole distributions over train.micro_batch_size rows (TRPO and NPG: the KL's Hessian), so
    # neither token-budget micro-batches (train.max_tokens_per_micro_batch) nor chunked logprobs apply
    whole_distributions: bool = False
    # (cfg, tokenizer, device, world_size, log) -> a frozen teacher, loaded at start into ctx.cache["teacher"]
    # (distill's: trainer/algos/distill.py)
    teacher: Callable | None = None

    def needs_reference(self, algo_cfg) -> bool:
        return self.reference == "always" or bool(algo_cfg.get("beta", 0))

    def needs_groups(self, algo_cfg) -> bool:
        """Needs >= 2 completions per prompt: its advantages are group-relative, or its baseline leaves one out."""
        return self.groups or algo_cfg.get("baseline") == "rloo"

    def loaded(self) -> "Algorithm":
        """This row with its functions imported (a run's steps then call them, not `Later`)."""
        return replace(self, **{f.name: getattr(self, f.name).load() for f in fields(self)
                                if isinstance(getattr(self, f.name), Later)})


_GRPO_UPDATE = Later("algos.grpo", "grpo_update")
# TRPO and NPG: the natural-gradient family, one process, their own step
_NATURAL = dict(family="natural_gradient", strategies=(), optimizer=False, whole_distributions=True,
                check_keys=Later("algos.key_checks", "natural_gradient_keys"))
_POLICY_GRADIENT_KEYS = Later("algos.key_checks", "policy_gradient_keys")
# A GRPO preset: the policy-gradient family's keys except REINFORCE's baseline (the group is its baseline).
_GROUP = dict(family="policy_gradient", strategies=("ddp", "fsdp2"), unread=("baseline",), groups=True,
              corrects_staleness=True, check_keys=_POLICY_GRADIENT_KEYS)
ALGORITHMS = {
    "grpo": Algorithm(_GRPO_UPDATE, **_GROUP),
    "dr_grpo": Algorithm(_GRPO_UPDATE, **_GROUP),
    "dapo": Algorithm(_GRPO_UPDATE, **_GROUP),
    "gspo": Algorithm(_GRPO_UPDATE, **_GROUP),
    "reinforce": Algorithm(Later("algos.reinforce", "reinforce_update"), "policy_gradient",
                           strategies=("ddp", "fsdp2"), check_keys=_POLICY_GRADIENT_KEYS,
                           unread=("clip_eps_low", "clip_eps_high", "scale_advantages_by_std",
                                   "filter_zero_variance_groups", "max_resample_rounds", "mu", "importance_level",
                                   "overlong_buffer", "overlong_penalty")),
    "ppo": Algorithm(Later("algos.ppo", "ppo_update"), "ppo", strategies=("ddp",),
                     build_critic=Later("models.critic", "build_critic")),
    "trpo": Algorithm(Later("algos.trpo", "trpo_update"), **_NATURAL),
    # the full natural-gradient step: no line search
    "npg": Algorithm(Later("algos.trpo", "npg_update"), **_NATURAL, unread=("line_search_steps", "backtrack_ratio")),
    "dpo": Algorithm(Later("algos.dpo", "dpo_update"), "dpo", strategies=("ddp", "fsdp2"), reference="always",
                     offline_data=Later("algos.dpo_offline", "read_offline_pairs"), reads_data=True),
    # its batch: data=FILE's examples, the references, or sampled and verified (rft): algos/sft.py
    "sft": Algorithm(Later("algos.sft", "sft_update"), "sft", strategies=("ddp", "fsdp2"),
                     batch_of=Later("algos.sft", "sft_batch"), reads_data=True,
                     validate=Later("algos.sft_data", "validate_sft")),
    "distill": Algorithm(Later("algos.distill", "distill_update"), "distill", strategies=("ddp",),
                         teacher=Later("algos.distill", "load_distill_teacher"),
                         check_keys=Later("algos.key_checks", "distill_keys")),
}
