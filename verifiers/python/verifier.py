"""`verifier=python`: your own reward function, written as for TRL's `GRPOTrainer(reward_funcs=[fn])`.

    env.reward=[{verifier: python, params: {function: "my_rewards:accuracy"}}]

`function` is "module:function", importable from the working directory or PYTHONPATH. It is called as TRL calls
it, with keyword arguments holding one value per completion:

    fn(prompts=[...], completions=[...], **columns) -> list[float | None]

- `prompts`: each record's `prompt` (env=dataset: the dataset's prompt, a string or a list of chat messages),
  else its `messages`.
- `completions`: the model's text; for a conversational prompt (a list of messages) TRL's form,
  `[{"role": "assistant", "content": text}]`.
- `columns`: every other column of the row (env=dataset rows carry them under `columns`; a record without that
  mapping, such as an `rlvr verify` line, passes its own fields). A function without `**kwargs` gets only the
  columns it names.
- Not passed: `completion_ids`, `trainer_state`, `log_extra`, `log_metric` (rlvr's rewards score text, outside a
  TRL run); a function that requires one is refused when the reward is built. An async function is awaited.

Where it runs: a `TimeLimitPool` worker process (verifiers/pool.py), as every verifier's work that may hang; a call
that overruns `timeout` seconds is killed. A call scores `batch_size` completions (null: the whole batch in one
call, as TRL does, so a function that looks across the batch sees the same inputs); with a batch size the calls
run on up to `workers` processes at once. A worker's first call also imports the module. `memory_limit_mb` caps
each worker's address space (none by default: a reward function may import torch or load a model). When the
reward is built, a worker imports the function once and checks its signature, so a bad path stops the run at
start with one line naming it.

Values: one number or None per completion. A number is the reward, status `correct` when it reaches `correct_at`
(default 1.0), else `incorrect`. None (or NaN) means "does not apply" in TRL: there it is NaN, which the weighted
sum of the reward functions skips (`nansum`); here it is 0.0 with status `incorrect` and `details["value"] = None`,
the same sum, though the per-verifier mean (`reward/NAME`) counts it as 0 where TRL's leaves it out. A value that
is not a number (or is infinite) gives its own completion status `error`, naming the value; the others keep
theirs. A call of several completions that raises (or whose worker dies) is made again once per completion, so
one completion that makes the function raise costs only its own score: the completions whose own call raised
get status `error` with one line saying what happened (and where in your file), the rest their real scores,
with `details["batch_error"]` saying why they were scored alone (a function that looks across the batch saw
only one completion there). These calls run a few at a time (one per worker) and stop starting once they have
taken `timeout` seconds, so a batch of completions that each hang costs at most about twice `timeout`, not one
`timeout` each; a completion not reached is `error`, saying so. A call that overruns (status `timeout`, not made
again: each completion could overrun in turn) or returns the wrong number of values gives each of its completions
that status, never a silent 0.

Name: the component is named after the function (`reward/accuracy` in the metrics, as TRL's `rewards/accuracy`),
unless the reward entry gives a `name`; a `gate` refers to that name.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlvr.errors import ConfigError
from rlvr.verifiers.pool import PooledWorkers, default_workers
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

_WORKER = "rlvr.verifiers.python.worker"
_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NOT_COLUMNS = ("prompt", "completion", "verifier", "prompts", "completions")  # a record's own fields, not data
_RESERVED = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments")
CHECK_SECONDS = 120.0  # the first import of the function's module (torch, a reward model) may take a while


@register_verifier("python")
class PythonReward(PooledWorkers):
    """A TRL-style reward function `fn(prompts, completions, **columns)`; see the module docstring."""

    name = "python"
    pool_preload = (_WORKER,)

    def __init__(self, function: str, timeout: float = 60.0, batch_size: int | None = None, correct_at: float = 1.0,
                 workers: int | None = None, memory_limit_mb: int | None = None):
        if not isinstance(function, str) or not _PATH.match(function):
            raise ConfigError(f"python verifier: 'function' must be 'module:function' (e.g. my_rewards:accuracy), "
                              f"got {function!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"python verifier: 'timeout' must be seconds > 0, got {timeout!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
            raise ConfigError(f"python verifier: 'batch_size' must be an int >= 1 or null (the whole batch), "
                              f"got {batch_size!r}")
        if isinstance(correct_at, bool) or not isinstance(correct_at, (int, float)) or not math.isfinite(correct_at):
            raise ConfigError(f"python verifier: 'correct_at' must be a number, got {correct_at!r}")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"python verifier: 'workers' must be an int >= 1 or null, got {workers!r}")
        if memory_limit_mb is not None and (isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, int)
                                            or memory_limit_mb < 1):
            raise ConfigError(f"python verifier: 'memory_limit_mb' must be an int >= 1 or null, got {memory_limit_mb!r}")
        self.function, self.timeout, self.batch_size = function, float(timeout), batch_size
        self.correct_at, self.workers, self.memory_limit_mb = float(correct_at), workers, memory_limit_mb
        self.component_name = function.rpartition(":")[2].rpartition(".")[2]  # the composite's name for it
        self._check()

    def _check(self) -> None:
        """Import the function in a worker and check its signature: a bad path is a ConfigError now, not an
        error status on every completion later."""
        outcome = self.worker_pool(self._workers(None)).map(f"{_WORKER}:check", [(self.function,)],
                                                            max(CHECK_SECONDS, self.timeout))[0]
        if outcome.status == "timeout":
            problem = f"importing it took over {max(CHECK_SECONDS, self.timeout):g} s"
        elif outcome.status != "ok":
            problem = f"the worker failed: {outcome.error}"
        else:
            problem = outcome.value
        if problem:
            self.close()
            raise ConfigError(f"python verifier: function {self.function!r}: {problem}")

    def verify_batch(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]], workers: int | None = None,
                     progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
        self.check_batch(completions, records)
        if not completions:
            return []
        size = self.batch_size or len(completions)
        chunks = [range(start, min(start + size, len(completions))) for start in range(0, len(completions), size)]
        items = [trl_arguments([completions[i] for i in chunk], [records[i] for i in chunk]) for chunk in chunks]
        n_workers = self._workers(workers)
        pool = self.worker_pool(n_workers)  # it starts no more processes than there are calls
        outcomes = pool.map(f"{_WORKER}:call", [(self.function, *item) for item in items], self.timeout)
        # a call of several completions that raised: each completion alone, so one cannot fail the others
        again = [k for k, (chunk, outcome) in enumerate(zip(chunks, outcomes)) if len(chunk) > 1 and _raised(outcome)]
        singles = self._alone(pool, n_workers, [i for k in again for i in chunks[k]], completions, records)
        results: list[VerifyResult] = []
        for k, (chunk, outcome) in enumerate(zip(chunks, outcomes)):
            if k not in again:
                results.extend(self._results(outcome, len(chunk)))
                continue
            why = self._results(outcome, len(chunk))[0].details["error"]
            for i in chunk:
                result = self._results(singles[i], 1)[0] if i in singles else VerifyResult(0.0, Status.ERROR, {
                    "error": f"{self.function}: not scored: scoring this batch one completion at a time ran past "
                             f"{self.timeout:g} s"})
                results.append(VerifyResult(result.reward, result.status, {**result.details, "batch_error": why}))
        if progress is not None:
            progress(len(results))
        return results

    def _alone(self, pool, n_workers: int, indices: list[int], completions, records) -> dict[int, Any]:
        """The outcome of a call of each completion alone, `n_workers` at a time, until `timeout` seconds have passed
        (each call under its own `timeout`): completions that each hang cannot multiply the batch's time."""
        outcomes: dict[int, Any] = {}
        start = time.monotonic()
        for lo in range(0, len(indices), n_workers):
            if time.monotonic() - start >= self.timeout:
                break
            part = indices[lo: lo + n_workers]
            outcomes.update(zip(part, pool.map(f"{_WORKER}:call", [
                (self.function, *trl_arguments([completions[i]], [records[i]])) for i in part], self.timeout)))
        return outcomes

    def _results(self, outcome, n: int) -> list[VerifyResult]:
        if outcome.status == "timeout":
            status, details = Status.TIMEOUT, {"reason": f"{self.function} took over {self.timeout:g} s for {n} "
                                                         f"completion(s); worker killed"}
        elif outcome.status != "ok":
            status, details = Status.ERROR, {"error": f"{self.function}: the worker failed: {outcome.error}"}
        elif "problem" in outcome.value:
            status, details = Status.ERROR, {"error": f"{self.function} {outcome.value['problem']}"}
        else:
            bad = outcome.value.get("bad", {})
            return [VerifyResult(0.0, Status.ERROR, {"error": f"{self.function} returned {bad[i]}"}) if i in bad
                    else self._result(v) for i, v in enumerate(outcome.value["values"])]
        return [VerifyResult(0.0, status, dict(details)) for _ in range(n)]

    def _result(self, value: float | None) -> VerifyResult:
        if value is None:
            return VerifyResult(0.0, Status.INCORRECT, {"value": None, "note": "the function returned None (does "
                                                                               "not apply): 0 in the reward"})
        return VerifyResult(value, Status.CORRECT if value >= self.correct_at else Status.INCORRECT, {"value": value})

    def _workers(self, workers: int | None) -> int:
        return max(1, workers if workers is not None else self.workers if self.workers is not None
                   else min(2, default_workers()))


def _raised(outcome) -> bool:
    """Whether a call failed as one completion can make it fail: the function raised, or its worker died."""
    return outcome.status == "error" or (outcome.status == "ok" and bool(outcome.value.get("raised")))


def trl_arguments(completions: Sequence[str], records: Sequence[Mapping[str, Any]]) -> tuple[list, list, dict]:
    """(prompts, completions, columns) as TRL's `GRPOTrainer` passes them to a reward function, from rlvr's
    completion texts and records (see the module docstring)."""
    prompts = [_prompt(r) for r in records]
    texts = [[{"role": "assistant", "content": c}] if isinstance(p, list) else c for p, c in zip(prompts, completions)]
    rows = [_columns(r) for r in records]
    keys = list(dict.fromkeys(k for row in rows for k in row if k not in _RESERVED))
    return prompts, texts, {k: [row.get(k) for row in rows] for k in keys}


def _prompt(record: Mapping[str, Any]) -> Any:
    if not isinstance(record, Mapping):
        return None
    prompt = record.get("prompt", record.get("messages"))
    return list(prompt) if isinstance(prompt, (list, tuple)) else prompt


def _columns(record: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        return {}
    if isinstance(record.get("columns"), Mapping):  # env=dataset: the row of the data as it was read
        return record["columns"]
    return {k: v for k, v in record.items() if k not in _NOT_COLUMNS}
