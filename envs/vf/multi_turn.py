"""`env=vf:NAME` for a multi-turn `verifiers` package: one that exports an `Env` subclass beside its taskset.

rlvr's agent loop samples each assistant turn (token in, token out, trainer/rollout/agent_loop.py); the
package's `Env.run` answers it: what `run` passes to its next `interaction.turn(message)` becomes the user
message rlvr appends (loss mask 0), and `run` returning, the role's `max_turns` or a task's `@vf.stop` ends
the trajectory (`end/done`). The task's `@vf.reward` functions (and `Env.finalize`) then score the whole
conversation as verifiers records it. How a step is computed, what `run` must satisfy (determinism: it is
replayed) and what is refused: verifiers/vf/episode.py.

The package's code runs only in worker processes under limits the parent enforces by killing the worker:
each step under `step_timeout` seconds, each trajectory's scoring under `score_timeout`. A step that hangs
or raises ends that trajectory at once and it is scored as a failure: reward 0 and status `timeout` or
`error`, the reason and the turn in its details (`samples.jsonl`); the other trajectories go on.

Limits: `max_turns` (null: the role's `AgentConfig.max_turns`, else 8; when both are set the smaller ends it),
`max_total_tokens` as for every multi-turn env (envs/multi_turn.py). A task without a prompt is opened by the
environment (`run`'s first `turn(message)`): that message is computed in a worker once per task and becomes
the prompt; a `run` that does not open such a task with a message is an error naming the task (it stops the run,
as a broken prompt would). Steps go through one worker, one after another (`TimeLimitPool.map` takes one batch at
a time, and the agent loop steps each trajectory on its own).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.envs.vf.tasks import VerifiersTasks
from rlvr.errors import ConfigError
from rlvr.verifiers.pool import PooledWorkers
from rlvr.verifiers.result import Status, VerifyResult

_WORKER = "rlvr.verifiers.vf.episode"
DEFAULT_MAX_TURNS = 8
_POOL_LOCK = threading.Lock()  # the agent loop steps from several threads; one of them makes the pool


class _StepWorkers(PooledWorkers):
    pool_preload = (_WORKER,)
    memory_limit_mb = 4096


class VerifiersEpisodeEnv(VerifiersTasks, MultiTurnEnv):
    """A multi-turn `verifiers` environment's tasks, turns and rewards; see the module docstring."""

    name: ClassVar[str] = "vf"
    procedural: ClassVar[bool] = False
    default_reward: ClassVar[list[dict]] = [{"verifier": "vf"}]

    def __init__(self, *, taskset: str, taskset_args: Mapping[str, Any] | None = None,
                 env_args: Mapping[str, Any] | None = None, pool_size: int = 10_000, test_fraction: float = 0.2,
                 reference: str | None = None, score_timeout: float = 30.0, step_timeout: float = 30.0,
                 max_turns: int | None = None, max_total_tokens: int | None = None, reward: list[dict] | None = None,
                 system_prompt: str | None = None):
        if env_args is not None and not isinstance(env_args, Mapping):
            raise ConfigError(f"vf: 'env_args' must be a mapping of the environment's EnvConfig, got {env_args!r}")
        for field, value in (("step_timeout", step_timeout), ("score_timeout", score_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"vf: {field!r} must be seconds > 0, got {value!r}")
        from rlvr.verifiers.vf.episode import load_env

        self.env_args = dict(env_args or {})
        try:
            vf_env, role, agent, _ = load_env(taskset, dict(taskset_args or {}), self.env_args)
        except ValueError as error:
            raise ConfigError(str(error)) from error
        self.env_class, self.role = type(vf_env).__name__, role
        self.load_tasks(taskset, taskset_args, pool_size, test_fraction, reference)
        for row in self._rows:
            row["vf_env_args"] = json.dumps(self.env_args, sort_keys=True)
            row["vf_opens"] = not any(m["role"] == "user" for m in row["messages"])  # the environment opens
        limits = [n for n in (max_turns, agent.max_turns) if n is not None]
        self.step_timeout = float(step_timeout)
        self._steps = _StepWorkers()
        self._openings: dict[str, str] = {}
        self._failures: dict[tuple[str, tuple[str, ...]], VerifyResult] = {}
        if reward is None:
            reward = [{"verifier": "vf", "params": {"timeout": score_timeout}}]
        super().__init__(max_turns=min(limits) if limits else DEFAULT_MAX_TURNS, max_total_tokens=max_total_tokens,
                         reward=reward, system_prompt=system_prompt)

    def messages(self, row: dict) -> list[dict]:
        """The task's prompt; for a task without one, the environment's opening message (computed once per task)."""
        messages = super().messages(row)
        if not row.get("vf_opens"):
            return messages
        if row["vf_key"] not in self._openings:
            outcome = self._step(row, [])
            if outcome.status != "ok" or outcome.value["done"] or not outcome.value["message"]:
                why = outcome.error or ("it ended the exchange" if outcome.status == "ok" else outcome.status)
                raise RuntimeError(f"vf: {self.env_class}.run() did not open task {row['id']} with a user message "
                                   f"({why})")
            self._openings[row["vf_key"]] = outcome.value["message"]
        return messages + [{"role": "user", "content": self._openings[row["vf_key"]]}]

    def start(self, row: dict) -> dict[str, Any]:
        opening = self._openings.get(row["vf_key"]) if row.get("vf_opens") else None
        return {"replies": [], "said": [opening] if opening is not None else None}

    def step(self, row: dict, state: dict[str, Any], assistant_text: str) -> Reply:
        state["replies"].append(assistant_text)
        outcome = self._step(row, state["replies"], state["said"])
        if outcome.status == "ok":
            state["said"] = outcome.value["said"]
            if outcome.value["done"]:
                return Reply([], done=True)
            return Reply([{"role": "user", "content": outcome.value["message"]}])
        turn = len(state["replies"])
        if outcome.status == "timeout":
            failure = VerifyResult(0.0, Status.TIMEOUT, {"reason": f"{self.env_class}.run() took over "
                                                                   f"{self.step_timeout:g} s after turn {turn}; worker "
                                                                   f"killed", "turn": turn})
        else:
            failure = VerifyResult(0.0, Status.ERROR, {"error": f"{self.env_class}.run() failed after turn {turn}: "
                                                                f"{outcome.error}", "turn": turn})
        self._failures[(row["vf_key"], tuple(state["replies"]))] = failure
        return Reply([], done=True)

    def _step(self, row: dict, replies: list[str], said_before: list[str | None] | None = None):
        args = (row["vf_taskset"], row["vf_args"], row["vf_env_args"], int(row["vf_limit"]), row["vf_key"], list(replies),
                said_before)
        with _POOL_LOCK:
            pool = self._steps.worker_pool(1)
        return pool.map(_WORKER + ":step", [args], self.step_timeout)[0]

    def score_trajectories(self, trajectories: Sequence[list[dict]], rows: Sequence[dict]) -> list[VerifyResult]:
        """The verifiers' scores; a trajectory whose step failed is that failure (reward 0), not scored again."""
        if len(trajectories) != len(rows):
            raise ValueError(f"score_trajectories got {len(trajectories)} trajectories for {len(rows)} rows")
        keys = [(row["vf_key"], tuple(m["content"] for m in t if m["role"] == "assistant"))
                for t, row in zip(trajectories, rows)]
        failed = {i: self._failures[k] for i, k in enumerate(keys) if k in self._failures}
        rest = [i for i in range(len(rows)) if i not in failed]
        scored = super().score_trajectories([trajectories[i] for i in rest], [rows[i] for i in rest]) if rest else []
        results: list[VerifyResult | None] = [None] * len(rows)
        for i, result in zip(rest, scored):
            results[i] = result
        for i, failure in failed.items():
            results[i] = failure
        for key in keys:
            self._failures.pop(key, None)
        return results  # type: ignore[return-value]

    def shutdown(self) -> None:
        self._steps.close()
        super().shutdown()
