"""Each family's checks of `algo.*` values that span several keys (or a key and another section's), named by
the algorithm table's rows (`check_keys`, table.py) and run by trainer/algo_keys.py's `validate_algo`. A key's own
range or choices is on its field in trainer/config.py. Standard library only: validation runs before torch loads.
"""

from __future__ import annotations

from rlvr.errors import ConfigError


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def policy_gradient_keys(cfg) -> None:
    """GRPO's presets and REINFORCE: GSPO's aggregation, DAPO's overlong buffer, resampling's filter."""
    algo = cfg.algo
    _need(algo.importance_level == "token" or algo.aggregation == "seq_mean_token_mean",
          f"algo.importance_level=sequence (GSPO) needs algo.aggregation=seq_mean_token_mean, not "
          f"{algo.aggregation!r}: GSPO averages one loss per sequence; a token sum would weight each sequence by "
          f"its length")
    _need(cfg.rollout.max_new_tokens is None or algo.overlong_buffer < cfg.rollout.max_new_tokens,
          f"algo.overlong_buffer={algo.overlong_buffer} must be < rollout.max_new_tokens="
          f"{cfg.rollout.max_new_tokens} (the buffer is the last tokens before the length limit)")
    _need(algo.max_resample_rounds == 0 or algo.filter_zero_variance_groups,
          f"algo.max_resample_rounds={algo.max_resample_rounds} refills the batch after "
          f"algo.filter_zero_variance_groups drops groups, so it needs that set to true")


def distill_keys(cfg) -> None:
    """On-policy distillation (algos/distill.py); algo.teacher is checked where it loads (models/teacher.py)."""
    algo = cfg.algo
    _need(not algo.reward_weight or cfg.train.completions_per_prompt >= 2,
          f"algo.reward_weight={algo.reward_weight} adds the reward's group advantage, which needs "
          f"train.completions_per_prompt >= 2, not {cfg.train.completions_per_prompt}")


def natural_gradient_keys(cfg) -> None:
    """TRPO and NPG (algos/trpo.py): the Fisher's sample is taken from the step's completions."""
    completions = cfg.train.prompts_per_step * cfg.train.completions_per_prompt
    _need(cfg.algo.fisher_every <= completions,
          f"algo.fisher_every={cfg.algo.fisher_every} must be at most the step's completions ({completions})")
