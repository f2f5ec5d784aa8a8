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
