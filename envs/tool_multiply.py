"""Multi-digit multiplication with a sandboxed `python` tool: a task a tiny model cannot do in its head.

The policy may call `<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>`
(envs/tool_calls.py: parsed strictly; a malformed call, an unknown tool or a failed program comes
back as the tool's observation and counts as a tool error) and answers with `<answer>N</answer>`.
A message without a tool call ends the trajectory; the verifiers score its answer (exact match).

Each trajectory holds its own `PythonSession` (sandboxes/session.py) on the environment's sandbox,
opened in `start` and closed in `close`: variables persist across its calls and never reach another
trajectory. The sandbox (Docker by default, `sandbox_backend=local` without Docker) starts on the
first tool call, so building the environment never touches Docker.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.envs.registry import register_env
from rlvr.envs.split import check_fraction, draw_test, draw_train
from rlvr.envs.tool_calls import (PYTHON_TOOL_SCHEMA, TOOL_LIMITS, ToolCallError, open_python_session, parse_tool_calls,
                                  run_python_call)
from rlvr.errors import ConfigError
from rlvr.sandboxes.base import MiB
from rlvr.sandboxes.factory import BACKENDS, get_sandbox

PROMPT = ("Compute {a}*{b}. You can run Python: <tool_call>{{\"name\": \"python\", \"arguments\": "
          "{{\"code\": \"print(1+1)\"}}}}</tool_call>. Give the result as <answer>N</answer>.")


@register_env("tool_multiply")
class ToolMultiplyEnv(MultiTurnEnv):
    name: ClassVar[str] = "tool_multiply"
    tools: ClassVar[list[dict]] = [PYTHON_TOOL_SCHEMA]
    default_max_new_tokens: ClassVar[int] = 48
    truncated_reward: ClassVar[str] = "keep"
    default_reward: ClassVar[list[dict]] = [{"verifier": "exact", "weight": 1.0}]

    def __init__(self, *, digits: int = 4, test_fraction: float = 0.2, max_turns: int = 3,
                 max_total_tokens: int | None = None, max_tool_output_chars: int = 200, sandbox_backend: str = "docker",
                 tool_timeout_s: float = 5.0, tool_memory_mb: int = 256,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
            raise ConfigError(f"tool_multiply: 'digits' must be an int >= 1, got {digits!r}")
        if sandbox_backend not in BACKENDS:
            raise ConfigError(f"tool_multiply: 'sandbox_backend' must be one of {', '.join(BACKENDS)}, got {sandbox_backend!r}")
        for field, value in (("tool_timeout_s", tool_timeout_s), ("tool_memory_mb", tool_memory_mb)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"tool_multiply: {field!r} must be a positive number, got {value!r}")
        self.tool_limits = TOOL_LIMITS.with_(wall_s=float(tool_timeout_s), cpu_s=float(tool_timeout_s),
                                             memory_bytes=int(tool_memory_mb * MiB))
        self.digits, self.sandbox_backend = digits, sandbox_backend
        self.test_fraction = check_fraction(test_fraction, "tool_multiply")
        self._sandbox = None
        self._lock = threading.Lock()
        super().__init__(max_turns=max_turns, max_total_tokens=max_total_tokens,
                         max_tool_output_chars=max_tool_output_chars, reward=reward, system_prompt=system_prompt)

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        size = 10 ** self.digits

        def draw(rng):
            return rng.randrange(size // 10 if self.digits > 1 else 0, size), rng.randrange(size // 10 if self.digits > 1 else 0, size)

        pick = draw_train if split == "train" else draw_test
        return [self._row(a, b) for a, b in pick(draw, _key, self.test_fraction, n, seed)]

    def _row(self, a: int, b: int) -> dict[str, Any]:
        return {"id": f"tool_multiply/{_key((a, b))}", "messages": [{"role": "user", "content": PROMPT.format(a=a, b=b)}],
                "answer": str(a * b), "reference": f"<think></think><answer>{a * b}</answer>", "a": a, "b": b}

    @property
    def sandbox(self):
        with self._lock:
            if self._sandbox is None:
                self._sandbox = get_sandbox(self.sandbox_backend)
            return self._sandbox

    def close_sandbox(self) -> None:
        """Remove the sandbox's containers (the next tool call starts a new one)."""
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def start(self, row: dict) -> dict[str, Any]:
        return {"session": None}  # opened on the first call: a trajectory without tool calls costs no sandbox

    def close(self, state: dict[str, Any]) -> None:
        if state.get("session") is not None:
            state.pop("session").close()

    def step(self, row: dict, state: dict[str, Any], assistant_text: str) -> Reply:
        calls = parse_tool_calls(assistant_text)
        if not calls:
            return Reply([], done=True)
        messages, errors, cut, seconds = [], 0, 0, 0.0
        for call in calls:
            if isinstance(call, ToolCallError):
                text, failed = call.message, True
            elif call.name != "python":
                text, failed = f"unknown tool {call.name!r}; available: python", True
            else:
                if state["session"] is None:
                    state["session"] = open_python_session(self.sandbox, self.tool_limits)
                text, failed, took = run_python_call(state["session"], call)
                seconds += took
            text, was_cut = self.truncate_output(text)
            errors, cut = errors + failed, cut + was_cut
            messages.append({"role": "tool", "name": "python", "content": text})
        return Reply(messages, tool_calls=len(calls), tool_errors=errors, output_truncated=cut, tool_seconds=seconds)


def _key(p: tuple[int, int]) -> str:
    return f"{p[0]}*{p[1]}"
