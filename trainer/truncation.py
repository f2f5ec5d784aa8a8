"""Completions cut at `rollout.max_new_tokens`: the length each environment needs, the rule for what a cut one
earns (applied by the reward pipeline, trainer/experience/rewards.py, stage 2), and the warnings when most are cut
or the model's context cannot hold a prompt and its completion.

`rollout.max_new_tokens=null` (the default) is the environment's `default_max_new_tokens` (arithmetic and
countdown 16, gsm8k and humaneval 512, math and code_stdio 1024, others 256). `rollout.truncated_reward=null`
is the environment's `truncated_reward`, zero or keep (what each does: trainer/experience/rewards.py, stage 2);
arithmetic and countdown keep (their anchored format gate already gives a cut-off answer nothing).
"""

from __future__ import annotations

from rlvr.errors import ConfigError

TRUNCATED_REWARDS = ("zero", "keep")
MOSTLY_TRUNCATED = 0.5  # above this share of truncated completions a run warns


def resolve_rollout_lengths(rollout_cfg, env) -> None:
    """Fix `max_new_tokens` and `truncated_reward` to values, in place: null takes `env`'s default, and the rollout
    presets' `${rlvr.env:...}` is resolved here once (the step reads plain values, not the resolver each time)."""
    max_new_tokens, truncated_reward = rollout_cfg.max_new_tokens, rollout_cfg.truncated_reward
    rollout_cfg.max_new_tokens = int(env.default_max_new_tokens if max_new_tokens is None else max_new_tokens)
    rollout_cfg.truncated_reward = env.truncated_reward if truncated_reward is None else truncated_reward
    if rollout_cfg.truncated_reward not in TRUNCATED_REWARDS:
        raise ConfigError(f"rollout.truncated_reward={rollout_cfg.truncated_reward!r}; choose one of "
                          f"{', '.join(TRUNCATED_REWARDS)} (or null: the environment's default)")


def truncation_warning(truncated_frac: float, max_new_tokens: int, where: str) -> str | None:
    """A loud line when most completions were cut, naming the knob; None otherwise."""
    if truncated_frac <= MOSTLY_TRUNCATED:
        return None
    return (f"WARNING: {truncated_frac:.0%} of {where} completions hit rollout.max_new_tokens={max_new_tokens} "
            f"without finishing: raise rollout.max_new_tokens if the answers need more, or the model has not "
            f"learned to stop (one that has not learned the task's format runs on to the limit, as the tiny model "
            f"does on code); truncated completions earn what rollout.truncated_reward says")


def context_warning(prompt_lengths: list[int], max_new_tokens: int, context: int | None) -> str | None:
    """A line at start when the model's context (`max_position_embeddings`) cannot hold the longest prompt plus
    `max_new_tokens`: generation stops at the context (trainer/rollout/hf.py, vLLM's max_model_len), so those
    completions end truncated however short the task's answers are. None when everything fits."""
    if not context or not prompt_lengths or max(prompt_lengths) + max_new_tokens <= context:
        return None
    longest = max(prompt_lengths)
    over = sum(n + max_new_tokens > context for n in prompt_lengths) / len(prompt_lengths)
    room = (f"prompts of up to {longest} tokens leave no room in it" if longest >= context else
            f"it leaves {context - longest} of rollout.max_new_tokens={max_new_tokens} after the longest prompt "
            f"({longest} tokens)")
    return (f"WARNING: the model's context is {context} positions and {room} ({over:.0%} of these prompts cannot "
            f"get {max_new_tokens} new tokens); completions stop at the context and count as truncated. The tiny "
            f"model: raise model.arch.max_positions; another model: one with a longer context, or a smaller "
            f"rollout.max_new_tokens")
