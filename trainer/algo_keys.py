"""Which `algo.*` keys each algorithm reads, so that a key another algorithm reads is refused, not ignored.

`algo=grpo algo.loss_type=ipo` would otherwise train GRPO and never look at `loss_type` (DPO's). A key
counts as set when its value differs from the schema's default (trainer/config.py `AlgoConfig`); the
presets in conf/algo/ set only keys their algorithm reads. A new algorithm adds its row here.
"""

from __future__ import annotations

from dataclasses import fields

from rlvr.trainer.config import AlgoConfig

_KL = ("beta", "kl_estimator")
_CLIP = ("clip_eps_low", "clip_eps_high")
GROUP = (*_KL, *_CLIP, "aggregation", "scale_advantages_by_std", "filter_zero_variance_groups",
         "max_resample_rounds", "mu", "importance_level", "overlong_buffer", "overlong_penalty")
READS = {
    **{name: GROUP for name in ("grpo", "dr_grpo", "dapo", "gspo")},  # grpo.py, dynamic_sampling.py
    "reinforce": (*_KL, "aggregation", "baseline"),  # reinforce.py: no ratio, so no clip range and no mu
    "ppo": ("beta", *_CLIP, "aggregation", "mu", "objective", "gamma", "lam", "critic", "vf_coef", "clip_eps_value",
            "penalty_beta", "kl_target"),  # ppo.py: its KL is in the reward, k1 per token
    "trpo": ("aggregation", "baseline", "max_kl", "cg_iters", "cg_damping", "line_search_steps", "backtrack_ratio"),
    "npg": ("aggregation", "baseline", "max_kl", "cg_iters", "cg_damping"),  # the full step: no line search
    "dpo": ("beta", "loss_type", "label_smoothing", "pair_strategy", "max_pairs_per_prompt", "min_margin",
            "length_match", "dpo_updates_per_round", "pairs_per_step"),
}


def unread_algo_keys(algo) -> list[str]:
    """'algo.KEY=VALUE is read by algo=A|B' for each key set away from its default that `algo.name` never reads."""
    defaults = AlgoConfig()
    reads = set(READS.get(algo.name, ())) | {"name"}
    problems = []
    for f in fields(AlgoConfig):
        if f.name in reads or algo[f.name] == getattr(defaults, f.name):
            continue
        readers = [name for name, keys in READS.items() if f.name in keys]
        problems.append(f"algo.{f.name}={algo[f.name]!r} is read by algo={'|'.join(readers)}")
    return problems
