"""Code with test feedback: write a stdin/stdout program; a failed attempt gets the failing test back, and another turn.

Problems are code_stdio's (envs/code_stdio.py: the same files, fields and `hidden_tests` split). Each
assistant message is an attempt: its last ```python block runs in the sandbox (the code verifier's,
verifiers/code/verifier.py, never on the host) against the tests the prompt shows. All pass: the trajectory ends.
A test fails: the reply, role "user" (the feedback is the task giver's, not a tool the policy called),
gives the first failing test's input, expected output and the program's output, or its status (runtime
error with the end of stderr, timeout, memory limit), cut to `max_tool_output_chars` (a note says how much
was dropped), then asks for the whole corrected program. `max_turns` attempts at most.

Reward: the code verifier on the last attempt, as code_stdio scores its one completion (the fraction of
tests passed), with the feedback runs' limits (`test_timeout_s`, `test_memory_mb`).

Choices:
  * One case of each problem is held back by default (`hidden_tests=1`, at least one case stays shown) and the
    reward counts every case (`hidden_reward=both`): the feedback reveals every shown case, so a reward on the
    shown cases alone would pay a program that prints the outputs it was told.
  * The reward's runs have the feedback runs' limits, so a program cannot tell a scored run from a feedback
    run by its limits (and fail on purpose only where it is not scored).
  * The prompt always lists the shown tests as examples (code_stdio lists them only when some are held
    back): the feedback reveals them anyway, and a policy should not learn about a test from a failure first.
  * Feedback runs only the shown cases and stops at the first failure (`stop_at_first_failure`), so the
    held-back ones never reach the conversation (with per-turn rewards on, it runs every shown case).
  * Per-turn reward (`turn_reward_weight` > 0, envs/multi_turn.py): each attempt's fraction of the shown tests
    passed, so a trajectory that fixes its program step by step earns more than one that stays wrong until
    the last turn; off by default (weight 0.0: the reward is the verifiers' alone). The feedback run then
    runs every shown case instead of stopping at the first failure.
  * The last attempt runs twice: once for feedback, once when the verifiers score the trajectory (they are
    independent: `env.reward` may name other verifiers). `tool/time` counts the feedback runs' seconds.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, ClassVar

from rlvr.envs.code_stdio import DEFAULT_TEMPLATE, CodeStdioEnv
from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.envs.registry import register_env
from rlvr.errors import ConfigError
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.result import Status

RETRY = "Fix the program and reply with the whole program in a ```python code block."


@register_env("code_feedback")
class CodeFeedbackEnv(MultiTurnEnv):
    name: ClassVar[str] = "code_feedback"
    default_max_new_tokens: ClassVar[int] = 1024
    truncated_reward: ClassVar[str] = "zero"
    procedural: ClassVar[bool] = False

    def __init__(self, *, train_file: str | None = None, test_file: str | None = None, hub: str | None = None,
                 hub_config: str | None = None, statement_field: str = "statement", tests_field: str = "tests",
                 backend: str = "docker", prompt_template: str = DEFAULT_TEMPLATE, hidden_tests: int = 1,
                 hidden_reward: str = "both", max_turns: int = 3, max_total_tokens: int | None = None,
                 max_tool_output_chars: int = 600, test_timeout_s: float = 5.0, test_memory_mb: int = 256,
                 turn_reward_weight: float = 0.0, reward: list[dict] | None = None, system_prompt: str | None = None):
        for field, value in (("test_timeout_s", test_timeout_s), ("test_memory_mb", test_memory_mb)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"code_feedback: {field!r} must be a positive number, got {value!r}")
        if reward is not None and hidden_reward != "both":
            raise ConfigError("code_feedback: 'hidden_reward' applies to the default reward; with env.reward, "
                              "set the code verifier's params.hidden_reward instead")
        # the problems, their split and the default reward are code_stdio's; this env only adds the turns
        limits = {"timeout_s": test_timeout_s, "memory_mb": test_memory_mb}
        default = [{"verifier": "code", "params": {"backend": backend, "hidden_reward": hidden_reward, **limits}}]
        with _as_code_feedback():
            self.problems = CodeStdioEnv(train_file=train_file, test_file=test_file, hub=hub, hub_config=hub_config,
                                         statement_field=statement_field, tests_field=tests_field, backend=backend,
                                         prompt_template=prompt_template, reward=reward if reward is not None else default,
                                         hidden_tests=hidden_tests)
        super().__init__(max_turns=max_turns, max_total_tokens=max_total_tokens,
                         max_tool_output_chars=max_tool_output_chars, turn_reward_weight=turn_reward_weight,
                         system_prompt=system_prompt, reward=reward if reward is not None else default)
        self.backend, self.test_timeout_s, self.test_memory_mb = backend, float(test_timeout_s), test_memory_mb
        self._runner: CodeVerifier | None = None
        self._lock = threading.Lock()

    @property
    def data_source(self) -> str:
        return self.problems.data_source

    @property
    def num_rows(self) -> int | None:
        return self.problems.num_rows

    def test_size(self) -> int:
        with _as_code_feedback():
            return self.problems.test_size()

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        with _as_code_feedback():
            return [self._with_examples(r) for r in self.problems.rows(split, n, seed)]

    @staticmethod
    def _with_examples(row: dict) -> dict:
        """The row with code_feedback's id and, when code_stdio did not list them (nothing held back), its tests
        as examples in the prompt."""
        row = {**row, "id": row["id"].replace("code_stdio/", "code_feedback/", 1)}
        if "hidden_tests" not in row:
            prompt = row["messages"][0]["content"] + "\n\n" + "\n\n".join(
                f"Example input:\n{c['stdin']}\nExample output:\n{c['stdout']}" for c in row["tests"]["cases"])
            row["messages"] = [{"role": "user", "content": prompt}]
        return row

    @property
    def runner(self) -> CodeVerifier:
        """The verifier that runs attempts for feedback (its sandbox starts on the first attempt)."""
        with self._lock:
            if self._runner is None:
                self._runner = CodeVerifier(backend=self.backend, timeout_s=self.test_timeout_s,
                                            memory_mb=self.test_memory_mb,
                                            stop_at_first_failure=self.turn_reward_weight == 0)
            return self._runner

    def shutdown(self) -> None:
        super().shutdown()
        self.close_sandbox()

    def close_sandbox(self) -> None:
        """Stop the feedback sandbox (the reward's code verifier owns its own)."""
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()

    def step(self, row: dict, state: dict[str, Any], assistant_text: str) -> Reply:
        started = time.perf_counter()
        # only the shown cases: the held-back ones (row["hidden_tests"]) never reach the conversation
        result = self.runner(assistant_text, {"tests": row["tests"]})
        seconds = time.perf_counter() - started
        cases = row["tests"]["cases"]
        per_test = result.details.get("tests", [])
        # the turn's reward: the fraction of shown cases passed (0 for no program), only when it is weighted
        turn_reward = sum(t["passed"] for t in per_test) / len(cases) if self.turn_reward_weight else None
        if result.status is Status.CORRECT:
            return Reply([], done=True, tool_seconds=seconds, reward=turn_reward)
        if result.status is Status.UNPARSABLE:
            text = "No program found in your reply."
        else:
            k = next((i for i, t in enumerate(per_test) if not t["passed"]), None)
            text = (failure_text(k, cases[k], per_test[k], len(cases)) if k is not None
                    else f"Your program could not be run ({result.status.value}: {result.details.get('error', '')}).")
        text, cut = self.truncate_output(text)  # the report is cut, never the request that follows it
        return Reply([{"role": "user", "content": text + "\n" + RETRY}], output_truncated=int(cut), tool_seconds=seconds,
                     reward=turn_reward)


@contextlib.contextmanager
def _as_code_feedback():
    """code_stdio's config and row errors (a bad field, a malformed row with its number) under this env's name,
    the one the user wrote."""
    try:
        yield
    except ValueError as error:  # ConfigError, and DataEnv's "no test data" ValueError
        if not str(error).startswith("code_stdio:"):
            raise
        raise type(error)(str(error).replace("code_stdio:", "code_feedback:", 1)) from None


def failure_text(k: int, case: dict, outcome: dict, n: int) -> str:
    """What the policy is told about shown test `k` (of `n`) that failed: input, expected, and what happened."""
    status = outcome.get("status", "incorrect")
    head = f"Your program failed test {k + 1} of {n}.\nInput:\n{case['stdin']}\nExpected output:\n{case['stdout']}\n"
    if status == Status.INCORRECT.value:
        return head + f"Your output:\n{outcome.get('stdout', '')}"
    what = {"timeout": "it ran out of time", "memory_limit": "it ran out of memory",
            "output_limit": "it wrote too much output"}.get(status, f"it exited with code {outcome.get('exit_code')}")
    stderr = outcome.get("stderr", "")
    return head + f"Your program did not finish: {what}." + (f"\nError output:\n{stderr}" if stderr else "")
