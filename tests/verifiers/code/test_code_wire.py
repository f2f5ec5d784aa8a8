"""The strict serialiser between the candidate's process and the checker's (verifiers/code/wire.py).

Pure functions, no sandbox: each test pins one property the checker relies on.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import os
import types
import weakref
from collections import Counter, OrderedDict, defaultdict, deque, namedtuple
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from rlvr.verifiers.code.wire import (
    MAX_DEPTH,
    MAX_MESSAGE,
    WireError,
    wire_decode,
    wire_dumps,
    wire_encode,
    wire_exception,
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


def test_plain_json_values_cost_what_their_json_does():
    """Returned lists can be long: a list of small numbers and strings is its own JSON plus a tag, so an honest
    answer fits the verdict channel's cap as its JSON would."""
    value = [list(range(-5000, 5000)), [0.1 * i for i in range(1000)], ["word"] * 1000, [True, None]]
    assert len(json.dumps(wire_encode(value))) <= len(json.dumps(value)) + 50
    assert wire_encode(10 ** 300) == 10 ** 300 and wire_encode(10 ** 400)[0] == "I"  # past 1000 bits: hex


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
    types.MappingProxyType({}), types.MappingProxyType(DictThatLies()), print, {}.keys(), type("Gen", (), {})(),
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
    node = None
    for _ in range(MAX_DEPTH + 5):
        node = ["L", [node]]
    with pytest.raises(WireError):
        wire_decode(node)


@pytest.mark.parametrize("node", [
    [], ["S"], ["S", 1], ["S", "a"], ["N"], ["B", 2], ["B", True], ["I", "12z"], ["F", "zz"], ["Y", "0"], ["L", "ab"],
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


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize("value, kind", [
    (Counter("abracadabra"), Counter), (Counter(), Counter), (OrderedDict([(2, "b"), (1, "a")]), OrderedDict),
    (deque([1, (2,)]), deque), (defaultdict(list, {1: [2]}), dict), (Point(1, [2]), tuple), (Point(1, 2), tuple),
    (Fraction(3, -4), Fraction), (Fraction(10 ** 40, 3), Fraction), (Decimal("1.10"), Decimal),
    (Decimal("-Infinity"), Decimal), (Decimal("-0E+5"), Decimal), ([Counter("ab"), {"k": Point(0, 0)}], list),
], ids=lambda v: type(v).__name__)
def test_standard_library_values_cross_and_compare_as_python_does(value, kind):
    """What honest solutions return: each arrives as a fresh value built by the receiver, equal
    both ways to what was sent, of the same standard type (a defaultdict as a dict: its factory stays)."""
    back = roundtrip(value)
    assert back == value and value == back
    assert type(back) is kind or (kind is tuple and back._fields == value._fields)


def test_the_receiver_rebuilds_each_type_itself():
    od = OrderedDict(a=1, b=2)
    od.move_to_end("a")
    assert list(roundtrip(od)) == ["b", "a"] and roundtrip(od) != OrderedDict(a=1, b=2)  # OrderedDict's == sees order
    point = roundtrip(Point(1, 2))
    assert point.x == 1 and point._fields == ("x", "y") and type(point).__name__ == "Point" and type(point) is not Point
    assert roundtrip(Counter("aab")).most_common(1) == [("a", 2)]
    assert roundtrip(Fraction(2, 4)) == Fraction(1, 2) and math.isnan(roundtrip(Decimal("NaN")))


@pytest.mark.parametrize("value, plain", [
    (np.int64(-7), -7), (np.uint8(255), 255), (np.float64(0.1), 0.1), (np.float32(0.1), float(np.float32(0.1))),
    (np.bool_(True), True), (np.bool_(False), False), (np.complex128(1j), 1j),
    (np.str_("a"), "a"), (np.array(["a"])[0], "a"),
    ((np.int32(1), [np.float16(0.5)]), (1, [0.5])),
], ids=lambda v: type(v).__name__)
def test_numpy_scalars_cross_as_their_python_values(value, plain):
    back = roundtrip(value)
    assert back == plain and type(back) is type(plain)
    assert json.dumps(wire_encode(back)) == json.dumps(wire_encode(plain))


class CounterThatLies(Counter):
    def __eq__(self, other):
        return True


class PointThatLies(Point):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


class FractionThatLies(Fraction):
    def __eq__(self, other):
        return True


class Int64ThatLies(np.int64):
    def __eq__(self, other):
        return True


class TupleWithBadFields(tuple):
    _fields = ("_x",)


@pytest.mark.parametrize("value", [
    CounterThatLies("a"), PointThatLies(1, 2), FractionThatLies(1, 2), Int64ThatLies(3), TupleWithBadFields((1,)),
    type("Bare", (tuple,), {})((1,)),
    type("DecimalThatLies", (Decimal,), {"__eq__": lambda self, other: True})("1"), Decimal("sNaN"),
    type("DequeThatLies", (deque,), {"__eq__": lambda self, other: True})(),
    np.array([AlwaysEqual()], dtype=object), np.ma.masked_array([1]), type("C", (complex,), {})(1j),
    np.array([np.datetime64("2020-01-01")]), np.array([("a", 1)], dtype="U1,i4"),
    type("D", (datetime.date,), {})(2020, 1, 1), datetime.time(1, tzinfo=type("Zone", (datetime.tzinfo,), {})()),
], ids=lambda v: type(v).__name__)
def test_subclasses_and_lookalikes_of_the_standard_types_are_refused(value):
    with pytest.raises(WireError):
        wire_encode(value)


def test_encoding_reads_through_the_standard_types_not_the_instance():
    """A namedtuple or OrderedDict whose methods were shadowed still sends its real contents."""
    od = OrderedDict(a=1)
    od.items = lambda: [("forged", 0)]
    od.keys = lambda: ["forged"]
    assert roundtrip(od) == OrderedDict(a=1)
    assert roundtrip(Counter(a=1)) == {"a": 1}


@pytest.mark.parametrize("node", [
    ["Q", ["1", "0"]], ["Q", ["1", "-2"]], ["Q", ["1"]], ["Q", ["x", "1"]], ["Q", ["1" + "0" * 9000, "1"]],
    ["M", "sNaN"], ["M", "-sNaN"], ["M", "abc"], ["M", "1e999999999"], ["M", 1],
    ["R", ["P", ["x", "x"], [None, None]]], ["R", ["1P", ["x"], [None]]], ["R", ["P", ["_x"], [None]]],
    ["R", ["P", ["class"], [None]]], ["R", ["P", ["x", "y"], [None]]], ["R", ["P", "x", [None]]],
    ["C", [[["L", []], 1]]], ["O", [[None]]], ["K", "x"],
], ids=lambda node: repr(node)[:40])
def test_malformed_standard_library_nodes_are_wire_errors(node):
    with pytest.raises(WireError):
        wire_decode(node)


def _names(error_type):
    return [error_type.__name__, *[k.__name__ for k in error_type.__mro__ if k.__module__ == "builtins"]]


class NegativeError(ValueError):
    pass


@pytest.mark.parametrize("raised, crosses_as", [
    (ValueError, ValueError), (NegativeError, ValueError), (KeyError, KeyError), (ZeroDivisionError, ZeroDivisionError),
    (AssertionError, AssertionError), (UnicodeDecodeError, UnicodeError), (RecursionError, RecursionError),
    (StopIteration, None), (StopAsyncIteration, None), (GeneratorExit, None), (KeyboardInterrupt, None),
    (SystemExit, None), (Exception, None), (type("Own", (Exception,), {}), None), (DeprecationWarning, None),
], ids=lambda v: getattr(v, "__name__", repr(v)))
def test_only_ordinary_exceptions_cross(raised, crosses_as):
    """A candidate's StopIteration raised in the checker ends `all(map(candidate, ...))` as if no
    item were left; only the ordinary errors a test may expect cross as themselves."""
    error = wire_exception(_names(raised), "message")
    if crosses_as is None:
        assert error is None
    else:
        assert type(error) is crosses_as and str(error) in ("message", "'message'")


M61 = (1 << 61) - 1  # CPython's int hash modulus: every multiple of it hashes to 0


def test_keys_chosen_to_share_one_hash_are_refused_before_anything_is_built():
    # 2,000 keys of one hash would cost 2,000**2 / 2 key comparisons to insert (a full message: minutes on the host)
    colliding = [k * M61 for k in range(1, 2001)]
    assert len({hash(k) for k in colliding}) == 1
    for node in (["E", colliding], ["Z", colliding], ["D", [[k, 0] for k in colliding]],
                 ["C", [[k, 1] for k in colliding]], ["O", [[k, 0] for k in colliding]],
                 ["E", [["T", [k]] for k in colliding]], ["E", [["Q", [hex(k), "0x1"]] for k in colliding]]):
        with pytest.raises(WireError, match="keys of one hash"):
            wire_decode(node)


def test_the_host_refuses_a_flooded_result_as_a_wire_error():
    from rlvr.verifiers.code.harness import read_result

    payload = json.dumps(wire_encode({k * M61: 0 for k in range(1, 100)}))
    with pytest.raises(WireError, match="keys of one hash"):
        read_result(payload)


@pytest.mark.parametrize("value", [
    {-1, -2},  # hash(-1) == hash(-2) in CPython
    {k * M61 for k in range(1, 33)},  # 32 keys of one hash: the most allowed
    {-1: "a", -2: "b", 0: "c", M61: "d"}, Counter({-1: 2, -2: 3}), frozenset({(1, 2), (2, 1)}),
    set(range(5000)), {str(i): i for i in range(5000)},
])
def test_honest_sets_and_dicts_with_a_few_shared_hashes_still_cross(value):
    got = roundtrip(value)
    assert type(got) is type(value) and got == value


def test_one_key_past_the_limit_is_refused():
    with pytest.raises(WireError, match="keys of one hash"):
        wire_decode(["E", [k * M61 for k in range(1, 34)]])


class Zone(datetime.tzinfo):
    def utcoffset(self, when):
        return datetime.timedelta(hours=1)


def _squares(n):
    for i in range(n):
        yield i * i


@pytest.mark.parametrize("value", [
    1 + 2j, complex(float("inf"), -0.0), range(3), range(10, -5, -3), range(10 ** 30),
    datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 2, 3, 4, 5, 6), datetime.time(23, 59, 59, 999999),
    datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=-5), "EST")),
    datetime.time(1, tzinfo=datetime.timezone.utc), datetime.timedelta(days=-3, microseconds=7),
    datetime.datetime(2021, 11, 7, 1, 30, fold=1), [datetime.date(2020, 1, 1), {"d": datetime.timedelta(1)}],
], ids=lambda v: type(v).__name__)
def test_complex_range_and_datetime_values_cross_as_themselves(value):
    back = roundtrip(value)
    assert back == value and type(back) is type(value)
    assert json.dumps(wire_encode(back)) == json.dumps(wire_encode(value))  # zone names and folds too


@pytest.mark.parametrize("value", [
    np.array([[1, 2], [3, 4]]), np.array(5), np.array([0.5, np.inf, np.nan]), np.array(["a", "bc"]),
    np.array([b"x"]), np.zeros((0, 3)), np.arange(24, dtype=np.uint8).reshape(2, 3, 4), np.array([1j, 2]),
    np.array([True, False]), np.array([None, [1, (2,)]], dtype=object), np.float32([0.1, 0.2]),
    np.arange(6).reshape(2, 3)[:, ::2],  # a view that is not contiguous
], ids=lambda v: f"{v.dtype}{v.shape}")
def test_numpy_arrays_cross_with_dtype_shape_and_data(value):
    back = roundtrip(value)
    assert type(back) is np.ndarray and back.dtype == value.dtype and back.shape == value.shape
    assert back.tolist() == value.tolist() or np.array_equal(back, value, equal_nan=True)


def test_a_generator_arrives_drained_as_a_generator_of_the_receiver():
    """Drained where it was made (at most MAX_ITEMS items): how far the test reads it is never seen by the candidate."""
    back = roundtrip(_squares(4))
    assert isinstance(back, types.GeneratorType) and list(back) == [0, 1, 4, 9]
    assert list(roundtrip(map(abs, [-1, -2]))) == [1, 2] and list(roundtrip(zip("ab", (1, 2)))) == [("a", 1), ("b", 2)]
    endless = roundtrip(itertools.count())
    assert list(itertools.islice(endless, 3)) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="more than"):
        list(endless)

    def failing():
        yield 1
        raise KeyError("k")
    back = roundtrip(failing())
    assert next(back) == 1
    with pytest.raises(KeyError):
        next(back)
    with pytest.raises(WireError):
        wire_encode(iter([AlwaysEqual()]))  # each item is held to the same rule


@pytest.mark.parametrize("node", [
    ["X", [1, 2]], ["X", ["1"]], ["G", [0, 1.5, 1]], ["G", [0, 1, 0]], ["J", [[], "later"]], ["J", [1, None]],
    ["W", ["date", [2020, 13, 1], None]], ["W", ["date", [2020, 1, 1], [[0, 3600, 0], None]]],
    ["W", ["moment", [1], None]], ["W", ["time", [1, 0, 0, 0, 0], [[2, 0, 0], None]]],
    ["N", ["<i8", [2, 2], [1, 2, 3]]], ["N", ["<U99999999", [1], ["a"]]], ["N", ["<M8[D]", [1], [0]]],
    ["N", ["bogus", [1], [0]]], ["N", ["<i8", [-1], []]], ["N", ["<i1", [1], [1000]]],
], ids=lambda node: repr(node)[:40])
def test_malformed_new_nodes_are_wire_errors(node):
    with pytest.raises(WireError):
        wire_decode(node)
