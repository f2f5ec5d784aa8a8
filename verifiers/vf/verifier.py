"""`verifier=vf`: a `verifiers` task's own reward functions score the completion (envs/vf/env.py makes the records).

The record names the taskset package, its config and the task (`vf_taskset`, `vf_args`, `vf_limit`, `vf_key`);
a `TimeLimitPool` worker (verifiers/pool.py) loads that taskset once and runs the task's `score` on a trace of
the prompt and the completion (verifiers/vf/worker.py). The task's functions are the environment author's code,
not the policy's, but they may hang or crash on a strange completion: each item has `timeout` seconds, enforced
by the parent killing the worker (a worker's first item of a taskset also runs the taskset's `load()`, which is quick for generated tasks), and a failure is a `timeout` or `error` status with the reason, never a bare 0.

Reward: the trace's weighted sum of the task's rewards (`Trace.reward`), as verifiers computes it; status `correct`
when it reaches `correct_at` (default 1.0), else `incorrect`. `details` holds each reward function's score and
weight and the task's metrics.

A record of a multi-turn environment (envs/vf/multi_turn.py: it carries `vf_env_args` and `trajectory`) is scored
on the whole conversation: the worker replays the environment's `run` with the trajectory's assistant messages and
scores the trace it records (verifiers/vf/episode.py `score`); `details["stop"]` says how the exchange ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlvr.errors import ConfigError
from rlvr.verifiers.pool import PooledWorkers, default_workers
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

_WORKER = "rlvr.verifiers.vf.worker"  # episode.py (multi-turn) imports it: one preload serves both
_FIELDS = ("vf_taskset", "vf_args", "vf_limit", "vf_key")


@register_verifier("vf")
class VerifiersTaskReward(PooledWorkers):
    """Scores with the record's `verifiers` task; see the module docstring."""

    name = "vf"
    pool_preload = (_WORKER,)

    def __init__(self, timeout: float = 30.0, correct_at: float = 1.0, workers: int | None = None,
                 memory_limit_mb: int | None = 4096):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"vf verifier: 'timeout' must be seconds > 0, got {timeout!r}")
        if isinstance(correct_at, bool) or not isinstance(correct_at, (int, float)):
            raise ConfigError(f"vf verifier: 'correct_at' must be a number, got {correct_at!r}")
        self.timeout, self.correct_at = float(timeout), float(correct_at)
        self.workers, self.memory_limit_mb = workers, memory_limit_mb

    def verify_batch(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]], workers: int | None = None,
                     progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
        self.check_batch(completions, records)
        results: list[VerifyResult | None] = [None] * len(completions)
        items: dict[str, list[tuple[int, tuple]]] = {"worker:score": [], "episode:score": []}
        for i, (completion, record) in enumerate(zip(completions, records)):
            missing = [f for f in _FIELDS if not isinstance(record, Mapping) or f not in record]
            if missing:
                results[i] = VerifyResult(0.0, Status.ERROR, {"error": f"record has no {', '.join(missing)} "
                                                                       f"(made by env=vf:NAME)"})
            elif not isinstance(completion, str):
                results[i] = VerifyResult(0.0, Status.ERROR, {"error": f"completion must be a string, got "
                                                                       f"{type(completion).__name__}"})
            elif "vf_env_args" in record:  # a multi-turn environment's trajectory (envs/vf/multi_turn.py)
                if not isinstance(record.get("trajectory"), list):
                    results[i] = VerifyResult(0.0, Status.ERROR, {"error": "a multi-turn verifiers record needs its "
                                                                           "'trajectory' (the conversation)"})
                    continue
                replies = [m["content"] for m in record["trajectory"] if m.get("role") == "assistant"]
                items["episode:score"].append((i, (record["vf_taskset"], record["vf_args"], record["vf_env_args"],
                                                      int(record["vf_limit"]), record["vf_key"], replies)))
            else:
                items["worker:score"].append((i, (record["vf_taskset"], record["vf_args"], int(record["vf_limit"]),
                                                     record["vf_key"], completion)))
        for fn, batch in items.items():
            if batch:
                pool = self.worker_pool(self._workers(workers))
                outcomes = pool.map(f"rlvr.verifiers.vf.{fn}", [args for _, args in batch], self.timeout, progress)
                for (i, _), outcome in zip(batch, outcomes):
                    results[i] = self._result(outcome)
        return results  # type: ignore[return-value]

    def _result(self, outcome) -> VerifyResult:
        if outcome.status == "timeout":
            return VerifyResult(0.0, Status.TIMEOUT, {"reason": f"the task's scoring took over {self.timeout:g} s; "
                                                                f"worker killed"})
        if outcome.status != "ok":
            return VerifyResult(0.0, Status.ERROR, {"error": f"the task's scoring failed: {outcome.error}"})
        scored = outcome.value
        status = Status.CORRECT if scored["reward"] >= self.correct_at else Status.INCORRECT
        details = {"rewards": scored["rewards"], "metrics": scored["metrics"]}
        if "stop" in scored:  # a multi-turn conversation: how it ended (a @vf.stop's name, max_turns, ...)
            details["stop"] = scored["stop"]
        return VerifyResult(scored["reward"], status, details)

    def _workers(self, workers: int | None) -> int:
        return max(1, workers if workers is not None else self.workers if self.workers is not None
                   else min(2, default_workers()))
