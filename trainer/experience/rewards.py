"""The reward pipeline: what happens to a completion's reward between the verifiers and the advantages, in the
order it runs. `score_round` runs stages 1-4 on each sampling round; collect.py then applies 5 and 6 to the step.

  1. Verifier scores. `env.score` (the environment's verifiers; a multi-turn environment scores whole
     trajectories and adds its turn rewards, weighted by its `turn_reward_weight`). A reward that fails is
     never a quiet 0 (`check_reward_errors`, called by collect.py on every step and by trainer/setup.py on the
     environment's reference completions before anything is generated): a component whose verifier returned
     status `error` for every completion stops the run (`RewardFailed`, one line naming it and its first
     error, counted over all ranks); one that errored on some prints one warning line with the count.
  2. Truncation (`rollout.truncated_reward`; trainer/truncation.py resolves it from the environment):
       zero  a completion cut at `rollout.max_new_tokens` keeps no positive reward and a `correct` status becomes
             `incorrect` (details say `truncated` and what the verifiers gave): a GSM8K solution cut at
             `<<9*6=67` must not score on its last number. Negative rewards stay.
       keep  the verifiers' score as it is; with algo=dapo DAPO's soft overlong penalty (5) shapes long
             completions instead.
  3. Controls (`reward=random`, `reward=format_only`): the baselines a real run is compared with. A gain in
     benchmark score can come from RL on any reward (Shao et al. 2025, "Spurious Rewards: Rethinking Training
     Signals in RLVR": random rewards raised a 7B math model's MATH-500 score by 21.4 points against 29.1 from
     the true one), so a run is read beside its control. The verifiers still run and their reward is kept in
     `details["reward_true"]` (logged as `reward/true_mean`):
       random       reward 1 with probability `reward.rate`, else 0: a Bernoulli draw per completion, seeded
                    from (seed, step, round) so the same run draws the same rewards
       format_only  the reward of the environment's `format` component alone (1 when the format is right)
     `rlvr eval 'models=[REAL/checkpoints/step_N,CONTROL/checkpoints/step_N]'` shows the two side by side, the
     control's row marked `(reward=random)` (its run's config.yaml; trainer/evaluation/specs.py).
  4. Screening (`reward.screen=true`, trainer/config.py RewardConfig) of completions a verifier flagged in
     `details["hacks"]` (metrics.py logs the rates): `reward.screen_mode=zero` gives each flagged completion
     reward 0; `drop_group` marks every completion of a group with a flagged one (reward 0 too), and the step
     then removes those groups from the batch (`without_dropped_groups`, called by collect.py): they count in no baseline,
     whitening or normaliser; `kept_frac` is the share of rows trained on. Screened results say
     `screened: true` in their details. Negative rewards are left as they are (screening never raises a reward).
  5. Overlong penalty (`algo.overlong_buffer > 0`): DAPO's soft overlong punishment, added to the rewards the
     advantages see; `reward/mean` stays the verifiers' reward and the penalty's mean is logged as
     `reward/overlong_penalty`.
  6. Dynamic sampling (`algo.filter_zero_variance_groups`): groups whose rewards are all equal are dropped and,
     with `algo.max_resample_rounds > 0`, further prompts are sampled until the batch is full again. It judges
     the rewards of stage 4, before the penalty of 5 (DAPO eq. 11 is on accuracy). It samples more rounds, so it
     lives with the sampling, in collect.py (`sample_until_full`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor

from rlvr.envs.multi_turn import is_multi_turn
from rlvr.errors import ConfigError
from rlvr.trainer.context import RunContext
from rlvr.trainer.distributed import gather_from_ranks
from rlvr.trainer.experience.batch import Sampled
from rlvr.trainer.experience.metrics import hacks_of, timed
from rlvr.trainer.seeding import derive_seed
from rlvr.verifiers.result import Status

SCREEN_MODES = ("zero", "drop_group")


def score_round(ctx: RunContext, drawn, timings: dict, score=None) -> Sampled:
    """Stages 1-4 on one round's completions (collect.Drawn), then packed. `score(texts, rows)` replaces
    `ctx.env.score` (the asynchronous producer scores group by group on a thread pool)."""
    cfg, rows, rollout = ctx.cfg, drawn.rows, drawn.rollout
    group_size, reward_cfg = cfg.train.completions_per_prompt, cfg.get("reward")
    with timed(timings, "score"):
        results = verifier_scores(ctx.env, rows, rollout, group_size, score)
        results = no_credit_when_truncated(results, rollout.truncated, cfg.rollout.truncated_reward)
        if reward_cfg is not None and reward_cfg.kind != "env":  # a control: the stated reward, not the verifiers'
            results = control_rewards(results, reward_cfg, ctx.env, rollout.texts, derive_seed("control", *drawn.draw))
        if reward_cfg is not None and reward_cfg.screen:
            results = screen(results, group_size, reward_cfg.screen_mode)
    return Sampled.packed(rows, rollout, results, group_size, ctx.tokenizer.pad_token_id)


# ---- 1. verifier scores ------------------------------------------------------------------------------------

def verifier_scores(env, rows: list, rollout, group_size: int, score=None) -> list:
    """One VerifyResult per completion (row-major: prompt i's G completions at i*G..i*G+G-1)."""
    repeated = [row for row in rows for _ in range(group_size)]
    if is_multi_turn(env):  # the verifiers' score plus the env's weighted turn rewards (weight 0: the score alone)
        trajectories = rollout.trajectories
        return env.add_turn_rewards(env.score_trajectories([t["messages"] for t in trajectories], repeated),
                                    [t["turn_rewards"] for t in trajectories])
    return (score or env.score)(rollout.texts, repeated)


class RewardFailed(ConfigError):
    """A reward component returned status `error` for every completion it scored: nothing it gave is a reward."""


def reward_errors(results: list) -> dict[str, tuple[int, str]]:
    """{component: (completions it errored on, its first error message)}. A composite's components are read one by
    one (a second reward function that raises leaves the composite's status the first one's); a result without
    components that is itself `error` counts under "reward"."""
    errors: dict[str, tuple[int, str]] = {}
    for result in results:
        parts = result.details.get("components") or {}
        failed = [(name, part.get("details") or {}) for name, part in parts.items()
                  if part.get("status") == Status.ERROR.value]
        if not failed and result.status is Status.ERROR:
            failed = [("reward", result.details)]
        for name, details in failed:
            count, message = errors.get(name, (0, ""))
            errors[name] = (count + 1, message or _error_message(details))
    return errors


def _error_message(details: dict) -> str:
    message = details.get("error") or details.get("reason") or "its details give no message"
    return " ".join(str(message).split())  # one line


def check_reward_errors(results: list, env, where: str, log: Callable[[str], None]) -> None:
    """Stop the run (RewardFailed) when a reward component errored on every one of `results` (every rank's, under
    torchrun: all ranks decide alike); `log` one warning line when one errored on some. `where` says what was
    scored ("step 3's completions")."""
    errors = reward_errors(results)
    names = [*getattr(env, "verifier_names", []), "reward"]  # the same on every rank: the counts line up
    counts = torch.tensor([errors.get(name, (0, ""))[0] for name in names] + [len(results)])  # [C+1]
    counts = gather_from_ranks(counts).sum(dim=0).tolist()  # [C+1] over ranks
    total = counts[-1]
    failed = [(name, n) for name, n in zip(names, counts) if n]
    if not failed or not total:
        return
    local = {name: message for name, (_, message) in errors.items()}
    name, n = max(failed, key=lambda item: item[1])
    message = local.get(name) or "(the first error was on another rank)"
    if n == total:
        raise RewardFailed(f"reward {name!r} failed on all {n} of {where} (status error: no reward to learn "
                           f"from); its first error: {message}")
    others = "".join(f"; {other!r} on {k}" for other, k in failed if other != name)
    log(f"warning: reward {name!r} failed on {n} of {total} of {where} (status error, reward 0){others}; "
        f"its first error: {message}")


# ---- 2. truncation -------------------------------------------------------------------------------------------

def no_credit_when_truncated(results: list, truncated, mode: str) -> list:
    """`results` with mode=zero applied to the truncated ones; any other mode (keep; None from a config built by
    hand and never resolved) returns `results` itself, as scored."""
    if mode != "zero":
        return results
    out = []
    for result, cut in zip(results, truncated):
        if cut and (result.reward > 0 or result.status is Status.CORRECT):
            details = {**result.details, "truncated": True, "reward_before_truncation": result.reward,
                       "status_before_truncation": result.status.value}
            status = Status.INCORRECT if result.status is Status.CORRECT else result.status
            result = replace(result, reward=min(result.reward, 0.0), status=status, details=details)
        out.append(result)
    return out


# ---- 3. controls ---------------------------------------------------------------------------------------------

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


# ---- 4. screening --------------------------------------------------------------------------------------------

def screen(results: list, group_size: int, mode: str) -> list:
    """`results` with flagged completions (zero) or their whole groups (drop_group) at reward <= 0."""
    flagged = [bool(hacks_of(r)) for r in results]
    if mode == "drop_group":
        groups = [any(flagged[i:i + group_size]) for i in range(0, len(results), group_size)]
        flagged = [groups[i // group_size] for i in range(len(results))]
    return [replace(r, reward=min(r.reward, 0.0), details={**r.details, "screened": True, "reward_before_screen": r.reward})
            if f else r for r, f in zip(results, flagged)]


def without_dropped_groups(ctx: RunContext, sampled: Sampled) -> tuple[Sampled, torch.Tensor]:
    """(`sampled` without the groups `reward.screen_mode=drop_group` screened, [B*G] bool of the rows kept).

    drop_group removes such a group from the loss: its rows leave the batch, so they count in no
    baseline, whitening, token count or normaliser (zeroing their reward would still move a REINFORCE
    or PPO update, whose advantages are not group-relative). Without drop_group every row is kept and
    `sampled` is returned as it is."""
    reward_cfg = ctx.cfg.get("reward")
    keep = torch.ones(len(sampled.results), dtype=torch.bool)  # [B*G]
    if reward_cfg is None or not reward_cfg.screen or reward_cfg.screen_mode != "drop_group":
        return sampled, keep
    keep = torch.tensor([not r.details.get("screened") for r in sampled.results])  # [B*G] whole groups (screen())
    return sampled.select(keep), keep


# ---- 5. overlong penalty -------------------------------------------------------------------------------------

def overlong_penalty(lengths: Tensor, max_tokens: int, buffer: int, factor: float = 1.0) -> Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13) times `factor`, per completion (added to its reward):

        R_length(y) = 0                                       |y| <= L_max - L_cache
                    = ((L_max - L_cache) - |y|) / L_cache     L_max - L_cache < |y| <= L_max
                    = -1                                      L_max < |y|

    with L_max = `max_tokens`, L_cache = `buffer` (tokens), |y| = `lengths` [N] in tokens.
    buffer = 0 turns the shaping off (all zeros). Returns [N] floats <= 0.

    Departures from the paper: L_max is the generation limit itself (`rollout.max_new_tokens`); the paper
    generated up to 20,480 tokens and shaped with L_max = 20,480, L_cache = 4,096, so "expected" answers are at
    most 16,384 tokens. Its third case (|y| > L_max -> -1) cannot happen here, but is kept for callers whose
    lengths are not capped. The penalty is multiplied by `factor` (1 in the paper; verl calls it
    overlong_penalty_factor).
    """
    lengths = lengths.to(torch.float32)  # [N]
    if buffer == 0:
        return torch.zeros_like(lengths)  # [N]
    expected = max_tokens - buffer  # L_max - L_cache
    penalty = ((expected - lengths) / buffer).clamp(min=-1.0, max=0.0)  # [N]; -1 at and beyond L_max
    return factor * penalty  # [N]


def with_overlong_penalty(sampled: Sampled, max_tokens: int, buffer: int, factor: float) -> tuple[Sampled, Tensor]:
    """(`sampled` with the penalty added to its rewards, the penalty [R*B, G])."""
    lengths = torch.tensor([len(c) for c in sampled.rollout.completion_ids])  # [R*B*G]
    penalty = overlong_penalty(lengths, max_tokens, buffer, factor).view_as(sampled.rewards)  # [R*B, G]
    return replace(sampled, rewards=sampled.rewards + penalty), penalty
