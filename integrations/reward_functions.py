"""rlvr's verifiers as reward functions for other trainers: TRL's `GRPOTrainer` and verl.

TRL (`reward_funcs=[...]`, trl 1.x): a `RewardFunction` is called with the batch's `prompts`,
`completions` (strings, or chat messages for a conversational dataset: the last message's content is
scored), `completion_ids` and every other dataset column as a keyword argument holding one value per
completion. Those columns are the record `rlvr verify` reads (docs/verify.md): `answer` for
`math`/`exact`, `tests` for `code` (a dict, or its JSON string: Arrow stores nested dicts with varying
keys badly), anything a plugin verifier reads. A dataset that names them otherwise (TRL's examples and open-r1
call the reference `solution`) passes `columns={"solution": "answer"}`; a built-in verifier's field missing
from the columns is a ValueError naming the columns given and the field needed, never a silent 0 reward.
It returns one float per completion and, through TRL's
`log_metric`, logs the share of each status (`rlvr_math/correct_frac`, `rlvr_math/timeout_frac`, ...:
the function's name, then the status) and the hack rate (`rlvr_math/hack_rate`), so a TRL run shows
what its verifier saw.

    from trl import GRPOTrainer
    from rlvr.integrations.reward_functions import RewardFunction

    math_reward = RewardFunction("math")                           # one verifier
    gsm8k_reward = RewardFunction(env="gsm8k")                     # an environment's composite reward
    code_reward = RewardFunction([{"verifier": "code", "params": {"timeout_s": 5}}])
    trainer = GRPOTrainer(model=..., reward_funcs=[math_reward], train_dataset=dataset_with_answer_column)
    ...
    math_reward.close()                                            # or `with RewardFunction(...) as f:`

verl (`custom_reward_function.path=<this file>`, `name=compute_score`, or `compute_score_batch` with
verl's batch reward manager): `compute_score(data_source, solution_str, ground_truth, extra_info)`.
The verifier is `extra_info["verifier"]` when given, else `data_source` when it names an rlvr
verifier, else `math`; the record is `extra_info` plus `answer=ground_truth` (and, for `code`,
`tests=ground_truth` when `extra_info` has no `tests`). It returns `{"score": reward, "acc": 1.0 if
correct}` (numbers only: verl averages every key). One RewardFunction per verifier name is kept for
the process, so the sandbox pool and the math workers are shared across calls; they close at exit.

Where the work runs is the verifiers' own business (the math verifier's worker processes, the code
verifier's Docker sandbox), so both adapters give the same verdicts as `rlvr verify` on the same
records (tests/envs/test_reward_functions.py checks it, and TRL's logged rewards, on a two-step TRL run).
Multi-turn environments are refused: their reward scores a whole trajectory, which TRL's and verl's
single-turn reward functions never see.
"""

from __future__ import annotations

import atexit
import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.envs.multi_turn import is_multi_turn
from rlvr.envs.registry import load_env
from rlvr.errors import ConfigError
from rlvr.verifiers.compose import Composite, build_reward, hacks_in
from rlvr.verifiers.registry import RECORD_FIELDS, verifier_registry
from rlvr.verifiers.result import Status

# what TRL passes besides the dataset's columns; none of it is part of the record a verifier reads
_TRL_ARGUMENTS = ("trainer_state", "log_extra", "log_metric", "environments")


class RewardFunction:
    """An rlvr reward (one verifier, a composite spec, or an environment's reward) as TRL's reward function."""

    def __init__(self, reward: str | list[dict] = "math", *, env: str | None = None, workers: int | None = None,
                 columns: Mapping[str, str] | None = None, **env_params: Any):
        """`columns`: dataset column -> record field, for a dataset whose names differ from the record's
        (`{"solution": "answer"}`); the other columns pass under their own names."""
        if columns is not None and (not isinstance(columns, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in columns.items())):
            raise ConfigError(f"RewardFunction: columns must map dataset column names to record fields, got {columns!r}")
        self.columns = dict(columns or {})
        if env is not None:
            environment = load_env(env, **env_params)
            if is_multi_turn(environment):
                raise ConfigError(f"env={env} is multi-turn: its reward scores trajectories, which a single-turn "
                                  "reward function is never given")
            self.composite: Composite = environment.verifier
            label = env
        else:
            if env_params:
                raise ConfigError(f"RewardFunction: {sorted(env_params)} are environment parameters; pass env=NAME")
            self.composite = build_reward([{"verifier": reward}] if isinstance(reward, str) else reward)
            label = self.composite.name
        self.workers = workers
        self.__name__ = f"rlvr_{label}"  # TRL names the reward's log columns after it (rewards/<name>/mean)
        self.last_results = []

    def __call__(self, prompts: Sequence | None = None, completions: Sequence | None = None,
                 completion_ids: Sequence | None = None, **columns: Any) -> list[float]:
        if completions is None:
            raise TypeError(f"{self.__name__}: called without `completions`")
        log_metric = columns.get("log_metric")
        fields = {self.columns.get(k, k): v for k, v in columns.items() if k not in _TRL_ARGUMENTS}
        self._check_fields(fields)
        for name, values in fields.items():
            if not isinstance(values, Sequence) or isinstance(values, (str, bytes)) or len(values) != len(completions):
                raise ValueError(f"{self.__name__}: column {name!r} must hold one value per completion "
                                 f"({len(completions)}), got {values!r:.200}")
        records = [_record({k: v[i] for k, v in fields.items()}) for i in range(len(completions))]
        results = self.composite.verify_batch([_text(c, i) for i, c in enumerate(completions)], records,
                                              workers=self.workers)
        self.last_results = results
        if log_metric is not None:
            for name, value in status_metrics(results).items():
                log_metric(f"{self.__name__}/{name}", value)
        return [float(r.reward) for r in results]

    def _check_fields(self, fields: Mapping[str, Any]) -> None:
        """A ValueError when a built-in verifier's record field is not among the columns: the verifier would score
        every completion 0 (status error), which TRL shows only as a reward that never moves."""
        for name in self.composite.component_names:
            missing = [f for f in RECORD_FIELDS.get(name, ()) if f not in fields]
            if missing:
                raise ValueError(f"{self.__name__}: the {name} verifier reads the record field {missing[0]!r}, which "
                                 f"is not among the dataset's columns {sorted(fields)}"
                                 + (f" (after columns={self.columns})" if self.columns else "")
                                 + f"; rename the column, or pass RewardFunction(..., columns={{'COLUMN': "
                                 f"{missing[0]!r}}})")

    def close(self) -> None:
        """Stop what the verifiers hold (the code verifier's sandbox and its warm containers, math workers)."""
        self.composite.close()

    def __enter__(self) -> "RewardFunction":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def status_metrics(results) -> dict[str, float]:
    """`<status>_frac` for every status (0.0 when none had it: TRL averages what each call logs, so a status
    missing from some calls would be averaged over the others only) and `hack_rate` (details naming hacks)."""
    n = max(len(results), 1)
    counts = Counter(Status(r.status).value for r in results)
    metrics = {f"{status.value}_frac": counts[status.value] / n for status in Status}
    metrics["hack_rate"] = sum(bool(hacks_in(r.details)) for r in results) / n
    return metrics


def _text(completion: Any, index: int) -> str:
    """A completion as TRL passes it: a string, or (conversational) a list of messages ending with the model's."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping) \
            and isinstance(completion[-1].get("content"), str):
        return completion[-1]["content"]
    raise ValueError(f"completion {index}: expected a string or a list of chat messages, got {completion!r:.200}")


def _record(row: dict) -> dict:
    """A dataset row as a verifier record; `tests` stored as a JSON string (Arrow's choice) is decoded."""
    tests = row.get("tests")
    if isinstance(tests, str):
        try:
            row["tests"] = json.loads(tests)
        except json.JSONDecodeError as e:
            raise ValueError(f"column 'tests': not a dict nor valid JSON ({e}): {tests!r:.200}") from None
    return row


# ---- verl: compute_score(data_source, solution_str, ground_truth, extra_info) ----

_BY_VERIFIER: dict[str, RewardFunction] = {}
_LOCK = threading.Lock()


def _shared(verifier: str) -> RewardFunction:
    """One RewardFunction per verifier for the process (shared pools), closed at interpreter exit."""
    with _LOCK:
        if verifier not in _BY_VERIFIER:
            _BY_VERIFIER[verifier] = RewardFunction(verifier)
            atexit.register(_BY_VERIFIER[verifier].close)
        return _BY_VERIFIER[verifier]


def _verl_record(data_source: Any, ground_truth: Any, extra_info: Mapping | None) -> tuple[str, dict]:
    record = dict(extra_info or {})
    verifier = record.pop("verifier", None)
    if verifier is None:
        verifier = data_source if isinstance(data_source, str) and data_source in verifier_registry.names() else "math"
    record.setdefault("answer", ground_truth)
    if verifier == "code" and "tests" not in record:
        record["tests"] = ground_truth
    return str(verifier), _record(record)


def compute_score_batch(data_sources: Sequence, solution_strs: Sequence[str], ground_truths: Sequence,
                        extra_infos: Sequence[Mapping | None] | None = None, **_: Any) -> list[dict]:
    """verl's batch signature: one `{"score", "acc"}` per sample, samples grouped by verifier and scored together."""
    extra_infos = extra_infos if extra_infos is not None else [None] * len(solution_strs)
    if not (len(data_sources) == len(solution_strs) == len(ground_truths) == len(extra_infos)):
        raise ValueError(f"compute_score_batch: {len(data_sources)} data_sources, {len(solution_strs)} solution_strs, "
                         f"{len(ground_truths)} ground_truths and {len(extra_infos)} extra_infos; need one of each per sample")
    planned = [_verl_record(*args) for args in zip(data_sources, ground_truths, extra_infos)]
    out: list[dict | None] = [None] * len(solution_strs)
    for verifier in dict.fromkeys(v for v, _ in planned):
        rows = [i for i, (v, _) in enumerate(planned) if v == verifier]
        results = _shared(verifier).composite.verify_batch([solution_strs[i] for i in rows],
                                                           [planned[i][1] for i in rows])
        for i, result in zip(rows, results):
            out[i] = {"score": float(result.reward), "acc": float(result.status == Status.CORRECT)}
    return out


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Mapping | None = None,
                  **_: Any) -> dict:
    """verl's per-sample signature (its naive reward manager)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info])[0]
