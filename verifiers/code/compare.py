"""How a returned value or a program's output is compared with the expected one, on the host.

A `call` result is compared as Python compares the JSON form of the value (a tuple, a named tuple, a range, a
returned generator's items or a numpy array's `tolist()` is a list, a Counter a dict, int keys strings) with
the expected JSON value: numbers exactly (an int and a float are equal only when the float is that integer, so
a float's rounding of 25! is not 25!), except that a float expected is met within `float_tol` when one is
given; `stdio` tokens likewise (an integer token exactly, a float token within the tolerance). No comparison
raises, whatever the value (a 10**400 against a float tolerance once raised OverflowError on the host).
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from decimal import Decimal
from fractions import Fraction
from types import GeneratorType
from typing import Any

_INT_TOKEN = re.compile(r"[+-]?[0-9]+")
# A returned range longer than this equals nothing: no expected value in a JSON test record is a list that long,
# and listing it would cost the host time the candidate chose (a range crosses the wire as three ints).
MAX_RANGE_ITEMS = 1_000_000
_FLOAT_DIGITS = 400  # more digits than any finite float's integer part has


def values_equal(got: Any, expected: Any, float_tol: float | None) -> bool:
    """Whether a returned value equals the expected JSON value: Python's == on the JSON form of both (a tuple,
    deque or named tuple is a list; a Counter, OrderedDict or defaultdict a dict; int, float, bool and None keys
    their JSON strings), with bool apart from int and numbers compared by numbers_equal. Never raises: a value
    with no JSON form (a set, bytes, a tuple key) equals nothing."""
    try:
        return _equal(_json_form(got), _json_form(expected), float_tol)
    except _NoJSONForm:
        return False


def numbers_equal(got: Any, expected: Any, float_tol: float | None) -> bool:
    """Exact, as Python compares numbers (an int equals a float only when the float is that integer), unless
    `expected` is a float and a tolerance is given: then within float_tol, absolute or relative (math.isclose's
    rule), computed exactly so that no size of `got` overflows."""
    if float_tol is None or type(expected) is not float or not (_finite(got) and math.isfinite(expected)):
        return got == expected
    if type(got) is float:
        return math.isclose(got, expected, rel_tol=float_tol, abs_tol=float_tol)
    a, b, tol = Fraction(got), Fraction(expected), Fraction(float_tol)
    return abs(a - b) <= max(tol * max(abs(a), abs(b)), tol)


def stdout_matches(got: str, expected: str, float_tol: float | None) -> bool:
    """Whitespace-separated tokens equal as text; with `float_tol`, numeric tokens as numbers: an integer
    expected exactly (an integral float such as 3.0 meets 3), a float expected within the tolerance."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    return all(x == y or (float_tol is not None and _tokens_equal(x, y, float_tol)) for x, y in zip(a, b))


class _NoJSONForm(Exception):
    pass


def _json_form(value: Any) -> Any:
    if isinstance(value, range) and _range_length(value) > MAX_RANGE_ITEMS:
        raise _NoJSONForm("range")  # three ints on the wire: listing range(10**18) would hold the host for ever
    if isinstance(value, (list, tuple, deque, range)):
        return [_json_form(item) for item in value]
    if isinstance(value, GeneratorType):  # a drained generator (wire.py): its items, if it ends as an iterator does
        try:
            return [_json_form(item) for item in value]
        except _NoJSONForm:
            raise
        except Exception:
            raise _NoJSONForm("generator") from None
    if type(value).__module__ == "numpy" and type(value).__name__ == "ndarray":  # the nested lists tolist() gives
        return _json_form(value.tolist())
    if isinstance(value, dict):
        return {_json_key(k): _json_form(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str, Fraction, Decimal)):
        return value
    raise _NoJSONForm(type(value).__name__)


def _range_length(value: range) -> int:
    try:
        return len(value)
    except OverflowError:  # more items than sys.maxsize
        return MAX_RANGE_ITEMS + 1


def _json_key(key: Any) -> str:
    """The string json.dumps makes of a dict key."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, int) and key.bit_length() < 13000:  # fewer digits than int-to-str's limit
        return str(key)
    if isinstance(key, float):
        return json.dumps(key)
    raise _NoJSONForm(type(key).__name__)


def _equal(got: Any, expected: Any, float_tol: float | None) -> bool:
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if _is_number(expected):
        return _is_number(got) and numbers_equal(got, expected, float_tol)
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(
            _equal(g, e, float_tol) for g, e in zip(got, expected))
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(
            _equal(got[k], expected[k], float_tol) for k in got)
    return type(got) is type(expected) and got == expected


def _tokens_equal(got: str, expected: str, float_tol: float) -> bool:
    if _INT_TOKEN.fullmatch(expected):
        if _INT_TOKEN.fullmatch(got):
            return _int_text(got) == _int_text(expected)
        number = _float_token(got)
        return number is not None and len(expected) <= _FLOAT_DIGITS and number == int(expected)
    number, wanted = _float_token(got), _float_token(expected)
    return number is not None and wanted is not None and numbers_equal(number, wanted, float_tol)


def _int_text(token: str) -> str:
    """An integer token in one spelling per value (no '+', no leading zeros, no '-0'): compared as text, an
    integer of any length needs no int() (which refuses more than 4,300 digits)."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if token.startswith("-") and digits != "0" else digits


def _float_token(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Decimal):
        return value.is_finite()
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Fraction, Decimal)) and not isinstance(value, bool)
