"""A difficulty curriculum: move a procedural task's difficulty so that each step's pass rate stays in a band.

A group whose G completions all pass, or all fail, has zero advantage and teaches GRPO nothing
(algos/advantages.py `zero_variance_groups`). On a fixed task that share is high wherever the task is
too easy or too hard for the current policy. With `curriculum.enabled=true` the training prompts come
from a ladder of difficulty levels, easiest first (`curriculum.levels`, or the environment's own
`difficulty_ladder()`); each level sets some of the environment's `difficulty_params` (envs/base.py)
and keeps the rest of its configuration. After every step the controller reads the step's pass rate
(`status/correct`: the share of completions the verifiers call correct, which is the mean of the groups'
pass rates) and, once `window` steps have been seen at the current level, moves one level up when their
mean is above the band, one level down when it is below, and stays otherwise. Hysteresis: after a move
the window starts empty, so every level is held for at least `window` steps, and a single noisy step
cannot move it. The run starts at `start_level`, by default the level that is the configured task (so a
policy warm-started there stays there while its pass rate is in the band), else the easiest.

Target share (`curriculum.target_share`, 0 by default): a share of every step's prompts is always drawn from the
configured environment (the target task), whatever the level; the rest from the controller's level. Of a step's B
prompts, floor(B x target_share) come from the target, spread evenly through the step (prompt i is a target
prompt when floor((i + 1) x share) > floor(i x share), so with ranks every rank's contiguous share holds its part
of them); at the level that is the configured task every prompt is a target prompt. The band applies to the
whole step's pass rate, target prompts included: that is the pass rate the step's groups have, so it is what the
share of zero-variance groups follows, and it needs no per-prompt bookkeeping. It was added because, on countdown
from the tiny warm start, countdown's first ladder (operators) stepped down to sums and stayed there, and what it
learnt there did not carry over to the target; with the share it did no better (docs/training/curricula.md has the
measurements).

What does not move: the held-out test prompts, the scoring and the prompt text are those of the configured
environment (the target difficulty), so the eval measures the same task with or without a curriculum; the
train/test split is a hash of each problem (envs/split.py), so no level draws a test problem.

Deterministic: the controller has no randomness, its level depends only on the logged pass rates, the target and
level parts of a step are drawn from seeds derived from the step's seed, and the controller's state (level, window)
is saved in each checkpoint's trainer_state.pt and restored on resume.
With ranks it reads the pass rate after the metrics are reduced over them, so every rank moves alike.

Learned from: reasoning-gym's `coaching` curricula (per-task attribute levels, which envs/reasoning_gym_env.py
turns into a ladder) and the target-pass-rate idea of adaptive curricula for RL fine-tuning (AdaRFT, Shi et al.
2025); the step rule here (a banded window mean, one level at a time) is ours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from omegaconf import OmegaConf

from rlvr.errors import ConfigError
from rlvr.trainer.seeding import derive_seed


class DifficultyController:
    """A level in 0..num_levels-1, moved by the mean pass rate of the last `window` steps at that level."""

    def __init__(self, num_levels: int, low: float, high: float, window: int, level: int = 0):
        self.num_levels, self.low, self.high, self.window = num_levels, low, high, window
        self.level = level
        self.recent: list[float] = []  # pass rates of the latest steps at this level, at most `window`

    def observe(self, pass_rate: float) -> int:
        """Record one step's pass rate; returns the move made (+1, -1 or 0)."""
        self.recent = (self.recent + [float(pass_rate)])[-self.window:]
        if len(self.recent) < self.window:
            return 0
        mean = sum(self.recent) / len(self.recent)
        move = 1 if mean > self.high and self.level < self.num_levels - 1 else -1 if mean < self.low and self.level > 0 else 0
        if move:
            self.level += move
            self.recent = []
        return move

    def state_dict(self) -> dict:
        return {"level": self.level, "recent": list(self.recent)}

    def load_state_dict(self, state: Mapping) -> None:
        level = int(state["level"])
        if not 0 <= level < self.num_levels:
            raise ConfigError(f"the checkpoint's curriculum level {level} is outside this run's {self.num_levels} "
                              f"levels; resume with the run's curriculum.levels")
        self.level, self.recent = level, [float(x) for x in state["recent"]]


def target_positions(n: int, share: float) -> list[bool]:
    """Which of a step's n prompts come from the target task: floor(n x share) of them, spread evenly
    (prompt i when floor((i + 1) x share) > floor(i x share))."""
    return [math.floor((i + 1) * share + 1e-9) > math.floor(i * share + 1e-9) for i in range(n)]  # 1e-9: 0.29 x 100


class CurriculumEnv:
    """The environment as the training loop sees it under a curriculum: train rows from the current level's
    environment (with `target_share`, that share of them from the configured one), everything else (test rows,
    scoring, prompts, attributes) from the configured one."""

    def __init__(self, env, level_envs: list, controller: DifficultyController, target_level: int | None = None,
                 target_share: float = 0.0):
        self.env, self.level_envs, self.controller = env, level_envs, controller
        self.target_level, self.target_share = target_level, target_share  # target_level: None when no level is

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        if split != "train":
            return self.env.rows(split, n, seed=seed)
        level_env = self.level_envs[self.controller.level]
        at_target = self.target_positions(n, self.controller.level)
        k = sum(at_target)
        if k in (0, n):  # one draw, as without a share
            return (self.env if k else level_env).rows(split, n, seed=seed)
        target = iter(self.env.rows(split, k, seed=derive_seed("curriculum-target", seed)))
        level = iter(level_env.rows(split, n - k, seed=derive_seed("curriculum-level", seed)))
        return [next(target) if t else next(level) for t in at_target]

    def target_positions(self, n: int, level: int) -> list[bool]:
        """Which of n prompts drawn at `level` come from the configured environment: all of them at its own level,
        else floor(n x target_share)."""
        return [True] * n if level == self.target_level else target_positions(n, self.target_share)

    def __getattr__(self, name):
        return getattr(self.env, name)


class Curriculum:
    """The controller, the environment it steers, and the per-step log lines."""

    def __init__(self, env: CurriculumEnv, levels: list[dict], prompts_per_step: int = 1):
        self.env, self.levels, self.controller = env, levels, env.controller
        self.prompts_per_step = prompts_per_step  # the whole step's, over all ranks

    @property
    def level(self) -> int:
        return self.controller.level

    def observe(self, metrics: Mapping) -> dict:
        """The step's `curriculum/*` metrics (the level its prompts came from, the pass rate the controller read,
        the move it made); moves the level for the next step."""
        level, pass_rate = self.controller.level, float(metrics.get("status/correct", 0.0))  # absent: none correct
        move = self.controller.observe(pass_rate)
        return {"curriculum/level": level, "curriculum/pass_rate": pass_rate, "curriculum/move": move,
                "curriculum/target_frac": sum(self.env.target_positions(self.prompts_per_step, level))
                / self.prompts_per_step}

    def describe(self) -> str:
        lines = [f"curriculum: {len(self.levels)} levels, pass-rate band [{self.controller.low}, {self.controller.high}], "
                 f"window {self.controller.window} steps; starting at level {self.level}"
                 + (f"; below or above the target, {sum(target_positions(self.prompts_per_step, self.env.target_share))}"
                    f" of a step's {self.prompts_per_step} prompts come from the target task (curriculum.target_share="
                    f"{self.env.target_share})" if self.env.target_share else "")]
        lines += [f"  level {i}: {_brief(level)}" for i, level in enumerate(self.levels)]
        return "\n".join(lines)

    def state_dict(self) -> dict:
        return {**self.controller.state_dict(), "levels": self.levels, "target_share": self.env.target_share}

    def load_state_dict(self, state: Mapping) -> None:
        if list(state.get("levels", [])) != self.levels:
            raise ConfigError("resume: the checkpoint's curriculum levels differ from this run's "
                              f"({state.get('levels')} in the run, {self.levels} now); resume with the run's levels")
        share = float(state.get("target_share", 0.0))  # checkpoints saved before the share: none
        if share != self.env.target_share:
            raise ConfigError(f"resume: the run drew curriculum.target_share={share} of its prompts from the target "
                              f"task, this command {self.env.target_share}; resume with the run's value")
        self.controller.load_state_dict(state)


def build_curriculum(cfg, env, build_env, world_size: int = 1) -> Curriculum | None:
    """The run's curriculum (None when `curriculum.enabled` is false), or a ConfigError naming the field.

    `env` is the configured environment, `build_env(env_cfg)` builds one from a config node: each level's
    environment is `cfg.env` with the level's parameters merged on (mappings merged, lists replaced)."""
    spec = cfg.curriculum
    if not spec.enabled:
        return None
    check_curriculum_config(cfg)
    params = tuple(getattr(env, "difficulty_params", ()))
    if not params:
        raise ConfigError(f"curriculum.enabled=true: environment {env.name!r} has no difficulty parameters to move "
                          f"(its difficulty_params is empty); the curriculum works on procedural tasks such as "
                          f"countdown, arithmetic and reasoning_gym")
    levels = (_plain(spec.levels, "curriculum.levels") if len(spec.levels) else env.difficulty_ladder())
    if not levels:
        raise ConfigError(f"curriculum.levels is empty and environment {env.name!r} has no default ladder; "
                          f"give the levels, e.g. curriculum.levels='[{{{params[0]}: ...}}, ...]'")
    base = OmegaConf.create(OmegaConf.to_container(cfg.env, resolve=True))  # unlocked: a level may add a key
    level_envs = []
    for i, level in enumerate(levels):
        if not isinstance(level, Mapping) or not level:
            raise ConfigError(f"curriculum.levels[{i}] must be a non-empty mapping of {env.name}'s difficulty "
                              f"parameters ({', '.join(params)}), got {level!r}")
        for key in level:
            if key not in params:
                raise ConfigError(f"curriculum.levels[{i}]: {key!r} is not a difficulty parameter of {env.name} "
                                  f"(those are: {', '.join(params)})")
        try:
            level_envs.append(build_env(OmegaConf.merge(base, OmegaConf.create(dict(level)))))
        except (ConfigError, ValueError, TypeError) as error:
            raise ConfigError(f"curriculum.levels[{i}] {_brief(level)}: {error}") from None
    start = configured_level(level_envs, env, params) if spec.start_level is None else spec.start_level
    if not 0 <= start < len(levels):
        raise ConfigError(f"curriculum.start_level={start} must be in 0..{len(levels) - 1} (the ladder has "
                          f"{len(levels)} levels)")
    controller = DifficultyController(len(levels), spec.band[0], spec.band[1], spec.window, start)
    env = CurriculumEnv(env, level_envs, controller, target_level(level_envs, env, params), float(spec.target_share))
    return Curriculum(env,
                      [dict(level) for level in levels], cfg.train.prompts_per_step * world_size)


def configured_level(level_envs: list, env, params: tuple[str, ...]) -> int:
    """The first level that is the configured task (the run starts at the target difficulty and moves only when
    the pass rate leaves the band), else 0."""
    target = target_level(level_envs, env, params)
    return 0 if target is None else target


def target_level(level_envs: list, env, params: tuple[str, ...]) -> int | None:
    """The first level whose environment has the configured one's difficulty parameters; None when none has."""
    for i, level_env in enumerate(level_envs):
        if all(getattr(level_env, p, None) == getattr(env, p, None) for p in params):
            return i
    return None


def check_curriculum_config(cfg) -> None:
    """The curriculum's own fields, and the run settings it cannot steer."""
    spec = cfg.curriculum
    band = list(spec.band)
    if len(band) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in band) \
            or not 0 <= band[0] < band[1] <= 1:
        raise ConfigError(f"curriculum.band={band} must be [low, high] with 0 <= low < high <= 1 (a pass-rate band)")
    share = spec.get("target_share", 0.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
        raise ConfigError(f"curriculum.target_share={share} must be a number in [0, 1) (the share of each step's "
                          f"prompts drawn from the configured task; 0: none beyond the level's own)")
    if spec.window < 1:
        raise ConfigError(f"curriculum.window={spec.window} must be >= 1 (steps averaged before a level moves)")
    if cfg.rollout.max_staleness:
        raise ConfigError(f"curriculum.enabled=true with rollout.max_staleness={cfg.rollout.max_staleness}: the "
                          f"asynchronous producer draws prompts steps ahead of the level the controller sets; "
                          f"use rollout.max_staleness=0")
    if cfg.data:
        raise ConfigError(f"curriculum.enabled=true with data={cfg.data}: offline DPO samples no prompts, so there "
                          f"is no pass rate to steer by")


def _plain(levels, field: str) -> list:
    try:
        return OmegaConf.to_container(levels, resolve=True) if OmegaConf.is_config(levels) else list(levels)
    except Exception as error:  # noqa: BLE001 - an unresolvable interpolation, named
        raise ConfigError(f"{field}: {error}") from None


def _brief(level: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in level.items()) if isinstance(level, Mapping) else repr(level)
