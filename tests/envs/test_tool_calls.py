"""Hermes/Qwen tool calls parsed strictly (envs/tool_calls.py): a malformed call is an error the policy is told about."""

from __future__ import annotations

import pytest

from rlvr.envs.tool_calls import ToolCall, ToolCallError, parse_tool_calls

GOOD = '<tool_call>{"name": "python", "arguments": {"code": "print(2)"}}</tool_call>'


def test_well_formed_calls_in_order():
    text = f"let me check {GOOD} and {GOOD.replace('print(2)', 'x=1')} done"
    assert parse_tool_calls(text) == [ToolCall("python", {"code": "print(2)"}), ToolCall("python", {"code": "x=1"})]
    assert parse_tool_calls("<answer>4</answer>") == []


@pytest.mark.parametrize("text, says", [
    ('<tool_call>{"name": "python", "arguments": {"code": "1"}</tool_call>', "not valid JSON"),
    ("<tool_call>python(code='1')</tool_call>", "not valid JSON"),
    ('<tool_call>{"name": "python", "args": {}}</tool_call>', 'exactly "name" and "arguments"'),
    ('<tool_call>{"name": "python", "arguments": {}, "id": 1}</tool_call>', 'exactly "name" and "arguments"'),
    ('<tool_call>["python"]</tool_call>', 'exactly "name" and "arguments"'),
    ('<tool_call>{"name": 3, "arguments": {}}</tool_call>', '"name" must be a string'),
    ('<tool_call>{"name": "python", "arguments": "print(1)"}</tool_call>', '"arguments" must be an object'),
    ('<tool_call>{"name": "python", "arguments": {"code": "1"}}', "without </tool_call>"),
    ('{"name": "python", "arguments": {}}</tool_call>', "without <tool_call>"),
])
def test_malformed_calls_become_errors_that_say_why(text, says):
    [error] = parse_tool_calls(text)
    assert isinstance(error, ToolCallError) and says in error.message


def test_nested_open_is_malformed_and_the_later_call_still_parses():
    calls = parse_tool_calls("<tool_call>" + GOOD)
    assert isinstance(calls[0], ToolCallError) and "opened again" in calls[0].message
    assert calls[1] == ToolCall("python", {"code": "print(2)"})


class CountingSandbox:
    """Answers every python call as a clean one-cell run (the session's driver verdict included), counting runs."""

    def __init__(self):
        self.runs = 0

    def run(self, program, stdin="", limits=None, checker=None):
        import json
        import time

        from rlvr.sandboxes.base import ExecStatus, Execution

        self.runs += 1
        time.sleep(0.01)  # a run takes time: the seconds cap below is crossed by the first call
        verdict = "ready\n" + "".join(f"{i} ok 0.0\n" for i in range(len(json.loads(checker.input))))
        return Execution("ran\n", "", 0, ExecStatus.EXITED, 0.01, 0.0, 0, verdict=verdict)

    def close(self):
        pass


def _tool_env(**caps):
    from rlvr.envs import load_env

    env = load_env("tool_multiply", digits=2, **caps)
    env._sandbox = CountingSandbox()
    return env, env.rows("train", 1)[0]


def test_calls_past_the_per_message_cap_are_answered_not_run_and_count_as_errors():
    env, row = _tool_env(max_tool_calls_per_turn=2)
    state = env.start(row)
    reply = env.step(row, state, GOOD * 5)
    assert [m["content"] for m in reply.messages] == ["ran", "ran"] + ["tool call not run: at most 2 tool calls "
                                                                       "per assistant message"] * 3
    assert (reply.tool_calls, reply.tool_errors, env.sandbox.runs) == (5, 3, 2)
    assert env.step(row, state, GOOD).tool_errors == 0  # the cap is per message: the next one runs again
    env.close(state)


def test_calls_past_the_per_message_seconds_cap_are_answered_not_run():
    env, row = _tool_env(max_tool_seconds_per_turn=0.001)
    state = env.start(row)
    reply = env.step(row, state, GOOD * 3)
    assert reply.messages[0]["content"] == "ran" and env.sandbox.runs == 1
    assert all("tool calls already took 0.001 s" in m["content"] for m in reply.messages[1:])
    assert (reply.tool_calls, reply.tool_errors) == (3, 2)
    env.close(state)


@pytest.mark.parametrize("field, value", [("max_tool_calls_per_turn", 0), ("max_tool_calls_per_turn", 2.5),
                                          ("max_tool_calls_per_turn", True), ("max_tool_seconds_per_turn", 0),
                                          ("max_tool_seconds_per_turn", "10"), ("max_tool_seconds_per_turn", float("inf"))])
def test_per_message_caps_are_validated_by_name(field, value):
    from rlvr.envs import load_env
    from rlvr.errors import ConfigError

    with pytest.raises(ConfigError, match=f"'{field}'"):
        load_env("tool_multiply", **{field: value})
