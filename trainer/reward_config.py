"""`reward.*`: what the trainer does with the environment's reward (conf/reward/*.yaml).

    reward.kind         env (the environment's verifiers; the default) | random | format_only
    reward.rate         random: the probability of reward 1 (a seeded Bernoulli per completion)
    reward.screen       true: flagged completions (hack signatures, trainer/experience/rewards.py) are screened
    reward.screen_mode  zero | drop_group
`reward=random` and `reward=format_only` are the control presets (trainer/experience/rewards.py, stage 3).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.errors import ConfigError

REWARD_KINDS = ("env", "random", "format_only")


@dataclass
class RewardConfig:
    kind: str = "env"
    """The reward: reward=env (the env's verifiers) | random | format_only."""
    rate: float = 0.5
    """reward=random: the probability of reward 1 per completion."""
    screen: bool = False
    """true: completions with hack signatures are screened (experience/rewards.py)."""
    screen_mode: str = "zero"
    """With screen: zero (the flagged completion) | drop_group (its group)."""


def check_reward_config(cfg) -> None:
    """ConfigError naming the key for a bad `reward.*` value."""
    from rlvr.trainer.experience.rewards import SCREEN_MODES

    if cfg.kind not in REWARD_KINDS:
        raise ConfigError(f"reward.kind={cfg.kind!r}; choose one of {', '.join(REWARD_KINDS)}")
    if isinstance(cfg.rate, bool) or not isinstance(cfg.rate, (int, float)) or not 0 <= cfg.rate <= 1:
        raise ConfigError(f"reward.rate={cfg.rate!r}; it must be a number in [0, 1]")
    if not isinstance(cfg.screen, bool):
        raise ConfigError(f"reward.screen={cfg.screen!r}; it must be true or false")
    if cfg.screen_mode not in SCREEN_MODES:
        raise ConfigError(f"reward.screen_mode={cfg.screen_mode!r}; choose one of {', '.join(SCREEN_MODES)}")
