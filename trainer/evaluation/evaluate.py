"""Greedy evaluation on held-out rows: accuracy (status `correct`) and mean reward."""

from __future__ import annotations

from collections import Counter

from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.truncation import no_credit_when_truncated


def evaluate_greedy(engine, env, rows: list[dict], max_new_tokens: int, batch_size: int = 256,
                    truncated_reward: str = "keep") -> dict:
    """One greedy completion per row. Returns `{"accuracy", "reward_mean", "truncated_frac", "status/<s>": rate,
    "n"}`; `truncated_reward` as `rollout.truncated_reward` (trainer/truncation.py)."""
    params = SamplingParams(n=1, max_new_tokens=max_new_tokens, greedy=True)
    results, truncated = [], []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        rollout = engine.generate(render_prompts(engine.tokenizer, env, chunk), params)
        results.extend(no_credit_when_truncated(env.score(rollout.texts, chunk), rollout.truncated, truncated_reward))
        truncated.extend(rollout.truncated)
    statuses = Counter(r.status.value for r in results)
    n = len(results)
    metrics = {
        "accuracy": statuses.get("correct", 0) / n,
        "reward_mean": sum(r.reward for r in results) / n,
        "truncated_frac": sum(truncated) / n,
        "n": n,
    }
    metrics.update({f"status/{s}": c / n for s, c in sorted(statuses.items())})
    return metrics
