"""The part the single-turn (envs/vf/env.py) and the multi-turn (envs/vf/multi_turn.py) `verifiers`
environments share: a taskset package's tasks loaded, split by the stable hash of their key, handed out as rows.
Its own module so that neither environment imports the other's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rlvr.envs.data import take
from rlvr.envs.split import check_fraction, is_test
from rlvr.errors import ConfigError


class VerifiersTasks:
    """What the single-turn and the multi-turn (envs/vf/multi_turn.py) environments share: the tasks loaded, split
    by the hash of their key, and handed out as rows."""

    def load_tasks(self, taskset: str, taskset_args: Mapping[str, Any] | None, pool_size: int, test_fraction: float,
                   reference: str | None) -> None:
        if not isinstance(taskset, str) or not taskset.strip():
            raise ConfigError("vf: 'taskset' names an installed verifiers taskset package: env=vf:NAME "
                              "(or env=vf env.taskset=NAME)")
        if taskset_args is not None and not isinstance(taskset_args, Mapping):
            raise ConfigError(f"vf: 'taskset_args' must be a mapping of the taskset's config, got {taskset_args!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"vf: 'pool_size' must be an int >= 1, got {pool_size!r}")
        from rlvr.verifiers.vf.worker import load_tasks, prompt_messages

        self.taskset, self.taskset_args, self.pool_size = taskset, dict(taskset_args or {}), pool_size
        self.test_fraction = check_fraction(test_fraction, "vf")
        try:
            tasks = load_tasks(taskset, self.taskset_args, pool_size)
            self._rows = [self._row(task, prompt_messages(task.data), reference) for task in tasks]
        except ValueError as error:
            raise ConfigError(str(error)) from error
        self._train = [r for r in self._rows if not is_test(r["vf_key"], self.test_fraction)]
        self._test = [r for r in self._rows if is_test(r["vf_key"], self.test_fraction)]
        if not self._train:
            raise ConfigError(f"vf: all {len(self._rows)} tasks of {taskset!r} fell in the test split; "
                              f"lower 'test_fraction' or raise 'pool_size'")

    @property
    def data_source(self) -> str:
        return f"verifiers taskset {self.taskset}"

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """Test: distinct tasks, seed-shuffled; train: every train task once per pass, a new order each pass."""
        self.check_rows_args(split, n)
        try:
            return [dict(r) for r in take(self._train if split == "train" else self._test, split, n, seed, "vf")]
        except ValueError as error:
            raise ValueError(f"{error} (taskset {self.taskset!r}: {len(self._train)} train, {len(self._test)} test "
                             f"tasks of the first {len(self._rows)})") from None

    def test_size(self) -> int | None:
        return len(self._test)

    def messages(self, row: dict) -> list[dict]:
        """The task's own messages; `system_prompt`, when set, replaces the task's system prompt."""
        if self.system_prompt is None:
            return [dict(m) for m in row["messages"]]
        return [{"role": "system", "content": self.system_prompt}] + [dict(m) for m in row["messages"]
                                                                         if m["role"] != "system"]

    def _row(self, task: Any, messages: list[dict], reference: str | None) -> dict[str, Any]:
        data = task.data.model_dump(mode="json")
        if reference is not None:
            try:
                reference = reference.format(**data)
            except (KeyError, IndexError, ValueError) as error:
                raise ValueError(f"vf: 'reference' {reference!r} does not format with task {task.data.idx}'s fields "
                                 f"({', '.join(sorted(data))}): {error!r}") from error
        answer = data.get("answer")
        return {
            "id": f"vf/{self.taskset}/{task.key[:16]}",
            "messages": messages,
            "answer": "" if answer is None else str(answer),
            "reference": reference or "",
            "vf_taskset": self.taskset,
            "vf_args": json.dumps(self.taskset_args, sort_keys=True),
            "vf_limit": self.pool_size,
            "vf_key": task.key,
        }
