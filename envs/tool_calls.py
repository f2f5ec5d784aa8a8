"""Tool calls in the Hermes / Qwen format, parsed strictly, and the `python` tool on a sandbox session.

Format (what Qwen2.5's and Qwen3's chat templates declare when given `tools=`): each call is
`<tool_call>{"name": NAME, "arguments": {...}}</tool_call>` in the assistant's text. Strict means: the
body must be one JSON object with exactly the keys "name" (a string) and "arguments" (an object); a
`<tool_call>` without its closing tag, or a closing tag without an opening one, is malformed too. A
malformed call is not dropped and not guessed at: it becomes a `ToolCallError`, whose message the
environment returns as the tool's observation, so the policy sees what it got wrong.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from rlvr.sandboxes.base import ExecStatus, Limits, MiB, Sandbox
from rlvr.sandboxes.session import PythonSession

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_TAG = re.compile(r"</?tool_call>")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolCallError:
    message: str  # what the policy is told


def parse_tool_calls(text: str) -> list[ToolCall | ToolCallError]:
    """Every `<tool_call>` block of `text` in order, each a ToolCall or a ToolCallError; [] when there is none."""
    calls: list[ToolCall | ToolCallError] = []
    depth_open = None
    for tag in _TAG.finditer(text):
        if tag.group() == OPEN:
            if depth_open is not None:
                calls.append(ToolCallError("malformed tool call: <tool_call> opened again before </tool_call>"))
            depth_open = tag.end()
        elif depth_open is None:
            calls.append(ToolCallError("malformed tool call: </tool_call> without <tool_call>"))
        else:
            calls.append(_parse_body(text[depth_open : tag.start()]))
            depth_open = None
    if depth_open is not None:
        calls.append(ToolCallError("malformed tool call: <tool_call> without </tool_call>"))
    return calls


def _parse_body(body: str) -> ToolCall | ToolCallError:
    try:
        value = json.loads(body)
    except json.JSONDecodeError as error:
        return ToolCallError(f"malformed tool call: not valid JSON ({error.msg} at character {error.pos})")
    if not isinstance(value, dict) or set(value) != {"name", "arguments"}:
        keys = sorted(value) if isinstance(value, dict) else type(value).__name__
        return ToolCallError(f'malformed tool call: expected an object with exactly "name" and "arguments", got {keys}')
    if not isinstance(value["name"], str):
        return ToolCallError('malformed tool call: "name" must be a string')
    if not isinstance(value["arguments"], dict):
        return ToolCallError('malformed tool call: "arguments" must be an object')
    return ToolCall(value["name"], value["arguments"])


PYTHON_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python code. Variables persist between calls in this conversation; print what you want to see.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "Python source"}},
                       "required": ["code"]},
    },
}
# Per-call limits of the python tool by default: small, since a tool call sits inside a rollout (tool_multiply
# sets wall/CPU time and memory from its `tool_timeout_s` and `tool_memory_mb`).
TOOL_LIMITS = Limits(wall_s=5.0, cpu_s=5.0, memory_bytes=256 * MiB, output_bytes=64 * 1024)


def run_python_call(session: PythonSession, call: ToolCall, within_s: float | None = None) -> tuple[str, bool, float]:
    """Run a `python` call on `session`: (observation text, whether it failed, seconds taken); `within_s`: the
    caller's time left, which the call may not overrun (PythonSession.run)."""
    start = time.monotonic()
    code = call.arguments.get("code")
    if set(call.arguments) != {"code"} or not isinstance(code, str):
        return 'python tool error: arguments must be {"code": "<python source>"}', True, 0.0
    execution = session.run(code, within_s=within_s)
    seconds = time.monotonic() - start
    text = execution.stdout + execution.stderr
    if execution.status is not ExecStatus.EXITED:
        text += f"\n[{execution.status.value}]"
    return text.strip("\n") or "(no output)", not execution.ok, seconds


def open_python_session(sandbox: Sandbox, limits: Limits = TOOL_LIMITS) -> PythonSession:
    return PythonSession(sandbox, limits).open()
