"""Control rewards (`reward=random`, `reward=format_only`): the baselines a real run is compared with.

A gain in benchmark score can come from RL on any reward (Shao et al. 2025, "Spurious Rewards: Rethinking
Training Signals in RLVR": random rewards raised a 7B math model's MATH-500 score by 21.4 points against
29.1 from the true one), so a run is read beside its control. Both controls still run the environment's
verifiers, so the true reward is kept in each result's `details["reward_true"]` and logged as
`reward/true_mean`:
    random       reward 1 with probability `reward.rate`, else 0: a Bernoulli draw per completion, seeded
                 from (seed, step, round) so the same run draws the same rewards
    format_only  the reward of the environment's `format` component alone (1 when the format is right)
`rlvr eval 'models=[REAL/checkpoints/step_N,CONTROL/checkpoints/step_N]'` shows the two side by side, the
control's row marked `(reward=random)` (its run's config.yaml; trainer/evaluation/specs.py).
"""

from __future__ import annotations

import random
from dataclasses import replace

from rlvr.errors import ConfigError


def control_rewards(results: list, reward_cfg, env, texts: list[str], seed: int) -> list:
    """`results` with the control's reward (the verifiers' kept as details["reward_true"])."""
    if reward_cfg.kind == "random":
        draw = random.Random(seed)
        rewards = [float(draw.random() < reward_cfg.rate) for _ in results]
    elif reward_cfg.kind == "format_only":
        rewards = [format_reward(r, env) for r in results]
    else:
        raise ConfigError(f"reward.kind={reward_cfg.kind!r} is not a control (random, format_only)")
    return [replace(r, reward=x, details={**r.details, "control": reward_cfg.kind, "reward_true": r.reward})
            for r, x in zip(results, rewards)]


def format_reward(result, env) -> float:
    components = result.details.get("components", {})
    if "format" not in components:
        names = ", ".join(components) or "none"
        raise ConfigError(f"reward=format_only: environment {env.name!r} has no 'format' reward component "
                          f"(its components: {names}); give it one in env.reward")
    return float(components["format"]["reward"])
