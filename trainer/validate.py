"""Checks of `rlvr train`'s config that the schema's types cannot express; each names the field."""

from __future__ import annotations

from rlvr.trainer.losses import AGGREGATIONS, KL_ESTIMATORS
from rlvr.verifiers.registry import ConfigError

from rlvr.trainer.advantages import BASELINES

ALGOS = ("grpo", "dr_grpo", "dapo", "reinforce", "ppo", "trpo", "npg")  # dpo arrives with its issue
OBJECTIVES = ("clip", "penalty")
ENGINES = ("hf", "vllm", "auto")
SCHEDULES = ("constant", "linear", "cosine")


def validate_train_config(cfg) -> None:
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(message)

    need(cfg.algo.name in ALGOS, f"algo.name={cfg.algo.name!r} is not available; choose one of {', '.join(ALGOS)}")
    need(cfg.algo.kl_estimator in KL_ESTIMATORS,
         f"algo.kl_estimator={cfg.algo.kl_estimator!r}; choose one of {', '.join(KL_ESTIMATORS)}")
    need(cfg.algo.aggregation in AGGREGATIONS,
         f"algo.aggregation={cfg.algo.aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")
    need(cfg.algo.beta >= 0, f"algo.beta={cfg.algo.beta} must be >= 0")
    need(0 <= cfg.algo.clip_eps_low < 1, f"algo.clip_eps_low={cfg.algo.clip_eps_low} must be in [0, 1)")
    need(cfg.algo.clip_eps_high >= 0, f"algo.clip_eps_high={cfg.algo.clip_eps_high} must be >= 0")
    need(cfg.algo.mu >= 1, f"algo.mu={cfg.algo.mu} must be >= 1")
    need(cfg.algo.baseline in BASELINES, f"algo.baseline={cfg.algo.baseline!r}; choose one of {', '.join(BASELINES)}")
    need(cfg.algo.objective in OBJECTIVES,
         f"algo.objective={cfg.algo.objective!r}; choose one of {', '.join(OBJECTIVES)}")
    need(0 <= cfg.algo.gamma <= 1 and 0 <= cfg.algo.lam <= 1,
         f"algo.gamma={cfg.algo.gamma} and algo.lam={cfg.algo.lam} must be in [0, 1]")
    need(cfg.algo.kl_target > 0 and cfg.algo.penalty_beta >= 0,
         f"algo.kl_target={cfg.algo.kl_target} must be > 0 and algo.penalty_beta={cfg.algo.penalty_beta} >= 0")
    need(cfg.algo.max_kl > 0 and cfg.algo.cg_iters >= 1 and 0 < cfg.algo.backtrack_ratio < 1,
         f"algo.max_kl={cfg.algo.max_kl} must be > 0, algo.cg_iters={cfg.algo.cg_iters} >= 1 and "
         f"algo.backtrack_ratio={cfg.algo.backtrack_ratio} in (0, 1)")
    need(cfg.rollout.engine in ENGINES, f"rollout.engine={cfg.rollout.engine!r}; choose one of {', '.join(ENGINES)}")
    need(cfg.rollout.max_new_tokens >= 1, f"rollout.max_new_tokens={cfg.rollout.max_new_tokens} must be >= 1")
    need(cfg.rollout.temperature > 0, f"rollout.temperature={cfg.rollout.temperature} must be > 0")
    need(0 < cfg.rollout.top_p <= 1, f"rollout.top_p={cfg.rollout.top_p} must be in (0, 1]")
    need(cfg.rollout.importance_cap is None or cfg.rollout.importance_cap >= 1,
         f"rollout.importance_cap={cfg.rollout.importance_cap} must be >= 1 (or null to turn the correction off)")
    need(0 < cfg.rollout.gpu_memory_utilization <= 1,
         f"rollout.gpu_memory_utilization={cfg.rollout.gpu_memory_utilization} must be in (0, 1]")
    need(cfg.rollout.tensor_parallel_size >= 1,
         f"rollout.tensor_parallel_size={cfg.rollout.tensor_parallel_size} must be >= 1")
    need(cfg.optim.schedule in SCHEDULES, f"optim.schedule={cfg.optim.schedule!r}; choose one of {', '.join(SCHEDULES)}")
    need(cfg.optim.lr > 0, f"optim.lr={cfg.optim.lr} must be > 0")
    train = cfg.train
    for name in ("steps", "prompts_per_step", "micro_batch_size", "save_every", "eval_every", "eval_prompts"):
        need(train[name] >= 1, f"train.{name}={train[name]} must be >= 1")
    group_baseline = cfg.algo.name in ("grpo", "dr_grpo", "dapo") or (
        cfg.algo.name != "ppo" and cfg.algo.baseline == "rloo")
    need(train.completions_per_prompt >= 2 or not group_baseline,
         f"train.completions_per_prompt={train.completions_per_prompt}: algo={cfg.algo.name} needs >= 2 "
         f"(the group is the baseline)")
    completions = train.prompts_per_step * train.completions_per_prompt
    need(train.micro_batch_size >= completions or completions % train.micro_batch_size == 0,
         f"train.micro_batch_size={train.micro_batch_size} must divide prompts_per_step x completions_per_prompt "
         f"= {completions}")
    need(cfg.model.name == "tiny" or bool(cfg.model.name_or_path),
         f"model.name_or_path is required for model={cfg.model.name!r} (a local directory or Hub name)")
    band = list(cfg.model.warm_start.target_accuracy)
    need(len(band) == 2 and 0 <= band[0] <= band[1] <= 1,
         f"model.warm_start.target_accuracy={band} must be [low, high] with 0 <= low <= high <= 1")
