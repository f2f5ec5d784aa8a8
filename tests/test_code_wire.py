"""The strict serialiser between the candidate's process and the checker's (verifiers/code_wire.py).

Pure functions, no sandbox: each test pins one property the checker relies on.
"""

from __future__ import annotations

import json
import math
import os
import types
import weakref

import pytest
from rlvr.verifiers.code_wire import (
    MAX_DEPTH,
    MAX_MESSAGE,
    WireError,
    wire_decode,
    wire_dumps,
    wire_encode,
    wire_recv,
    wire_send,
)


def roundtrip(value):
    return wire_decode(json.loads(json.dumps(wire_encode(value))))


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 3 ** 5000, 1.5, -0.0, float("inf"), "", "héllo\udc80", b"\x00\xff",
    [1, (2, 3)], (), ((),), {1: "a", (1, 2): [None]}, {1, 2.5, "x"}, frozenset({(1,), b"b"}), [[[]]],
])
def test_plain_values_come_back_equal_and_of_the_same_types(value):
    back = roundtrip(value)
    assert back == value and type(back) is type(value)
    assert json.dumps(wire_encode(back)) == json.dumps(wire_encode(value))  # nested types too


def test_types_stay_distinct():
    assert type(roundtrip((1, 2))) is tuple and type(roundtrip([1, 2])) is list
    assert roundtrip(True) is True and type(roundtrip(1)) is int
    assert type(roundtrip({1})) is set and type(roundtrip(frozenset({1}))) is frozenset
    assert type(roundtrip(1.0)) is float and type(roundtrip(b"a")) is bytes


def test_nan_survives():
    assert math.isnan(roundtrip(float("nan")))


class AlwaysEqual:
    def __eq__(self, other):
        return True


class IntThatLies(int):
    def __eq__(self, other):
        return True


class DictThatLies(dict):
    def __eq__(self, other):
        return True

    __hash__ = None


@pytest.mark.parametrize("value", [
    AlwaysEqual(), IntThatLies(3), DictThatLies(), [1, AlwaysEqual()], {"k": IntThatLies(1)},
    types.MappingProxyType({}), types.MappingProxyType(DictThatLies()), 1 + 2j, range(3), print,
], ids=lambda v: type(v).__name__)
def test_anything_but_plain_data_is_refused(value):
    with pytest.raises(WireError):
        wire_encode(value)


def test_weakref_proxy_is_refused():
    target = AlwaysEqual()
    with pytest.raises(WireError, match="ProxyType"):
        wire_encode(weakref.proxy(target))


def test_nesting_past_the_limit_is_refused_both_ways():
    deep = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(WireError):
        wire_encode(deep)
    node = ["N"]
    for _ in range(MAX_DEPTH + 5):
        node = ["L", [node]]
    with pytest.raises(WireError):
        wire_decode(node)


@pytest.mark.parametrize("node", [
    [], "S", ["S"], ["S", 1], ["B", 2], ["B", True], ["I", "12z"], ["F", "zz"], ["Y", "0"], ["L", "ab"],
    ["E", [["L", []]]], ["D", [[["L", []], ["N"]]]], ["D", [["N"]]], ["Q", 1], ["N", 1], [["S", "a"]],
], ids=repr)
def test_malformed_nodes_are_wire_errors(node):
    with pytest.raises(WireError):
        wire_decode(node)


def test_framed_messages_and_their_limits():
    r, w = os.pipe()
    try:
        wire_send(w, ["ok", wire_encode((1, "two"))])
        os.write(w, (MAX_MESSAGE + 1).to_bytes(4, "big"))
        message = wire_recv(r)
        assert wire_decode(message[1]) == (1, "two")
        with pytest.raises(WireError, match="more than"):
            wire_recv(r)
        os.close(w)
        w = None
        with pytest.raises(EOFError):
            wire_recv(r)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    with pytest.raises(WireError, match="more than"):
        wire_dumps(["S", "x" * MAX_MESSAGE])
