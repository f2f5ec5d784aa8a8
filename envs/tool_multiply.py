"""Multi-digit multiplication with a sandboxed `python` tool: a task a tiny model cannot do in its head.

The policy may call `<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>`
(envs/tool_calls.py: parsed strictly; a malformed call, an unknown tool or a failed program comes
back as the tool's observation and counts as a tool error) and answers with `<answer>N</answer>`.
A message without a tool call ends the trajectory; the verifiers score its answer (exact match).

Each trajectory holds its own `PythonSession` (sandboxes/session.py) on the environment's sandbox,
opened in `start` and closed in `close`: variables persist across its calls and never reach another
trajectory. The sandbox (Docker by default, `sandbox_backend=local` without Docker) starts on the
first tool call, so building the environment never touches Docker.

Caps per assistant message: at most `max_tool_calls_per_turn` calls run, and a call starts only while the
message's calls so far took less than `max_tool_seconds_per_turn` seconds; every call beyond a cap is not run, is
answered saying which cap, and counts as a tool error. Without them one message could queue calls without end,
each holding a sandbox. A call runs within what is left of that budget (PythonSession.run `within_s`: its wall
limit at most that, and it ends at that much elapsed time however long it waited for a CPU), so a message's tool
time is the cap plus a call's start-up, never a call's limit, nor the run clock's backstop (30 x the wall limit,
which a call waiting on a loaded machine could reach before: 50 s against a 20 s cap).

`tools_enabled=false` is the no-tool baseline of the same task: the prompt is unchanged (the policy sees
the same input), but every tool call comes back as a "no tools available" observation (a tool error) and
nothing runs, so only answering directly can earn reward.

`reference_trajectory(row)` is the multi-turn warm start's transcript (trainer/models/transcripts.py).
Choice: on a `reference_tool_fraction` share of the rows (picked by a hash of the row's id, a feature the
model cannot read) it is [assistant tool call `print(a*b)`, the tool's output, assistant `<answer>`]; on
the rest, and on every row when `tools_enabled` is false, it is the one-turn direct answer. A warm start
that always called the tool would leave RL nothing to learn; one that never did would give GRPO no tool
call to reinforce. A tiny model cannot multiply 3-digit numbers in its head, so its direct answers are
mostly wrong and its tool answers mostly right: sampled groups mix both and GRPO raises the tool's share.
With `reference_tool_mechanics` the warm start also learns the tool transcript of every row that answers
directly, all but its first token (`reference_mechanics`): how to call the tool is then taught on every row,
whether to call it on the `reference_tool_fraction` share alone, so a small share (greedy decoding answers
directly) still comes with a call that copies its operands and its output right when sampling picks it.
The observation is computed exactly (`str(a * b)`, what the sandbox prints for that code; a sandbox test
checks the two agree) so that building the warm start never starts a sandbox.
"""

from __future__ import annotations

import hashlib
import json
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

NO_TOOLS = "no tools available in this task; answer directly with <answer>N</answer>"
TOO_MANY_CALLS = "tool call not run: at most {n} tool calls per assistant message"
TOO_MUCH_TIME = "tool call not run: this assistant message's tool calls already took {s:g} s, the most per message"
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
                 tool_timeout_s: float = 5.0, tool_memory_mb: int = 256, max_tool_calls_per_turn: int = 4,
                 max_tool_seconds_per_turn: float = 20.0, tools_enabled: bool = True,
                 reference_tool_fraction: float = 0.5, reference_tool_mechanics: bool = False,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
            raise ConfigError(f"tool_multiply: 'digits' must be an int >= 1, got {digits!r}")
        if sandbox_backend not in BACKENDS:
            raise ConfigError(f"tool_multiply: 'sandbox_backend' must be one of {', '.join(BACKENDS)}, got {sandbox_backend!r}")
        for field, value in (("tool_timeout_s", tool_timeout_s), ("tool_memory_mb", tool_memory_mb)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"tool_multiply: {field!r} must be a positive number, got {value!r}")
        calls_cap = max_tool_calls_per_turn
        if isinstance(calls_cap, bool) or not isinstance(calls_cap, int) or calls_cap < 1:
            raise ConfigError(f"tool_multiply: 'max_tool_calls_per_turn' must be an int >= 1, got {calls_cap!r}")
        if (isinstance(max_tool_seconds_per_turn, bool) or not isinstance(max_tool_seconds_per_turn, (int, float))
                or not 0 < max_tool_seconds_per_turn < float("inf")):
            raise ConfigError(f"tool_multiply: 'max_tool_seconds_per_turn' must be a positive number, "
                              f"got {max_tool_seconds_per_turn!r}")
        self.max_tool_calls_per_turn, self.max_tool_seconds_per_turn = calls_cap, float(max_tool_seconds_per_turn)
        for field, flag in (("tools_enabled", tools_enabled), ("reference_tool_mechanics", reference_tool_mechanics)):
            if not isinstance(flag, bool):
                raise ConfigError(f"tool_multiply: {field!r} must be true or false, got {flag!r}")
        if (isinstance(reference_tool_fraction, bool) or not isinstance(reference_tool_fraction, (int, float))
                or not 0.0 <= reference_tool_fraction <= 1.0):
            raise ConfigError(f"tool_multiply: 'reference_tool_fraction' must be a number in [0, 1], "
                              f"got {reference_tool_fraction!r}")
        self.tools_enabled, self.reference_tool_fraction = tools_enabled, float(reference_tool_fraction)
        self.reference_tool_mechanics = reference_tool_mechanics
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

    def reference_trajectory(self, row: dict) -> list[dict]:
        """The warm start's assistant and tool messages for `row` (module docstring: which rows use the tool)."""
        if not self._calls_tool(row):
            return [{"role": "assistant", "content": row["reference"]}]
        return self._tool_trajectory(row)

    def reference_mechanics(self, row: dict) -> list[dict] | None:
        """The tool transcript of a row whose reference answers directly, when `reference_tool_mechanics` is on: the
        warm start trains all of it but the first token, the choice `reference_trajectory` makes."""
        if not self.reference_tool_mechanics or not self.tools_enabled or self._calls_tool(row):
            return None
        return self._tool_trajectory(row)

    def _calls_tool(self, row: dict) -> bool:
        return self.tools_enabled and _unit_hash(row["id"]) < self.reference_tool_fraction

    def _tool_trajectory(self, row: dict) -> list[dict]:
        code = f"print({row['a']}*{row['b']})"
        call = json.dumps({"name": "python", "arguments": {"code": code}})
        return [{"role": "assistant", "content": f"<tool_call>{call}</tool_call>"},
                {"role": "tool", "name": "python", "content": str(row["a"] * row["b"])},
                {"role": "assistant", "content": f"<answer>{row['answer']}</answer>"}]

    @property
    def sandbox(self):
        with self._lock:
            if self._sandbox is None:
                self._sandbox = get_sandbox(self.sandbox_backend)
            return self._sandbox

    def shutdown(self) -> None:
        super().shutdown()
        self.close_sandbox()

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
        if not self.tools_enabled:  # the baseline: nothing runs, each call is told so
            return Reply([{"role": "tool", "name": "python", "content": NO_TOOLS} for _ in calls],
                         tool_calls=len(calls), tool_errors=len(calls))
        messages, errors, cut, seconds = [], 0, 0, 0.0
        for index, call in enumerate(calls):
            if index >= self.max_tool_calls_per_turn:
                text, failed = TOO_MANY_CALLS.format(n=self.max_tool_calls_per_turn), True
            elif seconds >= self.max_tool_seconds_per_turn:
                text, failed = TOO_MUCH_TIME.format(s=self.max_tool_seconds_per_turn), True
            elif isinstance(call, ToolCallError):
                text, failed = call.message, True
            elif call.name != "python":
                text, failed = f"unknown tool {call.name!r}; available: python", True
            else:
                if state["session"] is None:
                    state["session"] = open_python_session(self.sandbox, self.tool_limits)
                # the message's remaining tool time bounds the call itself, not only whether it starts
                text, failed, took = run_python_call(state["session"], call,
                                                     within_s=self.max_tool_seconds_per_turn - seconds)
                seconds += took
            text, was_cut = self.truncate_output(text)
            errors, cut = errors + failed, cut + was_cut
            messages.append({"role": "tool", "name": "python", "content": text})
        return Reply(messages, tool_calls=len(calls), tool_errors=errors, output_truncated=cut, tool_seconds=seconds)


def _unit_hash(text: str) -> float:
    """A number in [0, 1) fixed by `text` (not Python's salted `hash`)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2 ** 64


def _key(p: tuple[int, int]) -> str:
    return f"{p[0]}*{p[1]}"
