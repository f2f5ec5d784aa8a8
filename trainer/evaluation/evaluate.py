"""Generate and score held-out rows: one helper for the trainer's held-out eval and `rlvr eval`.

`generate_and_score` is the whole of "sample, verify, apply the truncation rule" for a chunk of
rows; `evaluate_greedy` (the trainer's held-out eval, run.py, and the warm start's stopping rule,
trainer/warm_start.py) and `rlvr eval` (eval_run.py) both call it, so their numbers agree exactly
for the same rows and length (tests/trainer/evaluation/test_eval_cmd.py)."""

from __future__ import annotations

from collections import Counter

from rlvr.envs.multi_turn import is_multi_turn
from rlvr.trainer.rollout.agent_loop import run_trajectories
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import Rollout, SamplingParams
from rlvr.trainer.experience.rewards import no_credit_when_truncated
from rlvr.verifiers.compose import hacks_in


def generate_and_score(engine, env, rows: list[dict], params: SamplingParams,
                       truncated_reward: str = "keep") -> tuple[Rollout, list[dict], list]:
    """`params.n` completions per row, scored by the env's verifiers, a truncated one's reward per
    `truncated_reward` (trainer/experience/rewards.py, stage 2). Returns (rollout, the rows repeated prompt-major as
    the rollout's rows are, one VerifyResult per completion). A multi-turn environment's rows are whole
    trajectories (rollout/agent_loop.py), scored as such."""
    repeated = [row for row in rows for _ in range(params.n)]  # [B*G]
    if is_multi_turn(env):
        rollout = run_trajectories(engine, env, rows, params)
        scored = env.score_trajectories([t["messages"] for t in rollout.trajectories], repeated)
    else:
        rollout = engine.generate(render_prompts(engine.tokenizer, env, rows), params)
        scored = env.score(rollout.texts, repeated)
    results = no_credit_when_truncated(scored, rollout.truncated, truncated_reward)
    return rollout, repeated, results


def evaluate_greedy(engine, env, rows: list[dict], max_new_tokens: int, batch_size: int = 256,
                    truncated_reward: str = "keep", settings: dict | None = None) -> dict:
    """One greedy completion per row. Returns `{"accuracy", "reward_mean", "truncated_frac", "hack_rate",
    "status/<s>": rate, "n"}`; `truncated_reward` as `rollout.truncated_reward` (trainer/experience/rewards.py,
    stage 2).
    `accuracy` is the verifiers' verdict, so a completion a known hole pays counts as correct; `hack_rate` (the
    share whose details name a hack kind, as `rlvr eval` and the training loop's monitor count them) says how
    much of it was taken rather than earned.
    `settings`: the run's generation settings (rollout/generation_settings.py `generation_settings`: repetition
    penalty, min-p, generation_kwargs), so the policy is evaluated as it samples; None: none."""
    params = SamplingParams(n=1, max_new_tokens=max_new_tokens, greedy=True, **(settings or {}))
    results, truncated = [], []
    for start in range(0, len(rows), batch_size):
        rollout, _, scored = generate_and_score(engine, env, rows[start : start + batch_size], params, truncated_reward)
        results.extend(scored)
        truncated.extend(rollout.truncated)
    statuses = Counter(r.status.value for r in results)
    n = len(results)
    metrics = {
        "accuracy": statuses.get("correct", 0) / n,
        "reward_mean": sum(r.reward for r in results) / n,
        "truncated_frac": sum(truncated) / n,
        "hack_rate": sum(bool(hacks_in(r.details)) for r in results) / n,
        "n": n,
    }
    metrics.update({f"status/{s}": c / n for s, c in sorted(statuses.items())})
    return metrics
