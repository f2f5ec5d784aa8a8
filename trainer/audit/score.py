"""The reward under audit, built and called as `rlvr train` builds and calls it.

The environment comes from `build_env` (trainer/env_config.py, what `rlvr train` and `rlvr eval` use), with
`verifier=NAME params=...` written into `env.reward` as a one-entry composition, so every reward `env.reward`
can name (rlvr's verifiers, `verifier=python` functions, a plugin's, a judge) is audited with no code of its
own here. Completions are scored by the trainer's stage 1 (`verifier_scores`, trainer/experience/rewards.py):
`env.score`, or for a multi-turn environment the trajectory (the prompt, then the completion as the one
assistant turn) through `score_trajectories` and the turn rewards. Stages 2-6 (truncation, controls, screening,
the overlong penalty, dynamic sampling) shape a run's rewards around the verifier's verdict; the audit asks what
the verdict itself pays for.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

from omegaconf import OmegaConf

from rlvr.trainer.env_config import build_env
from rlvr.trainer.experience.rewards import verifier_scores
from rlvr.verifiers.result import Status, VerifyResult


def audited_env(env_cfg, verifier: str | None, params: Mapping | None):
    """The environment of `env_cfg` (its rows), its reward replaced by `verifier` with `params` when one is named."""
    node = OmegaConf.create(OmegaConf.to_container(env_cfg, resolve=True))
    if verifier:
        node.reward = [{"verifier": verifier, "params": dict(params or {})}]
    return build_env(node)


def reward_spec(env) -> list[dict]:
    """The composition under audit, one entry per component: name, weight, gate (what the report prints)."""
    return [{"name": c.name, "weight": c.weight, **({"gate": c.gate} if c.gate else {})}
            for c in env.verifier.components]


def score(env, rows: list[dict], texts: list[str]) -> list[VerifyResult]:
    """One VerifyResult per (completion, row), through the trainer's scoring of a step's completions."""
    trajectories = [{"messages": env.messages(row) + [{"role": "assistant", "content": text}], "turn_rewards": []}
                    for row, text in zip(rows, texts)]
    rollout = SimpleNamespace(texts=list(texts), trajectories=trajectories)
    return verifier_scores(env, list(rows), rollout, group_size=1)


def accepted(result: VerifyResult, correct_at: float | None) -> bool:
    """Whether the reward counts `result` as solved: its status is `correct` (the reward's own threshold: a
    python function's `correct_at`, a rule verifier's full marks, a composite's first component), or, with
    `audit.correct_at` set, its reward reaches that number."""
    if correct_at is None:
        return result.status is Status.CORRECT
    return result.reward >= correct_at


def per_test(result: VerifyResult) -> list[bool] | None:
    """Pass or fail of each test a code verifier ran (`details["tests"]`, its own or a component's), else None."""
    found = [result.details] + [p.get("details") or {} for p in result.details.get("components", {}).values()]
    for details in found:
        tests = details.get("tests")
        if isinstance(tests, list) and tests and all(isinstance(t, dict) and "passed" in t for t in tests):
            return [bool(t["passed"]) for t in tests]
    return None
