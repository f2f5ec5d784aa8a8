"""The strict serialiser between a candidate's process and the checker's: plain data only.

Standard library only and no rlvr imports: this file's source is also pasted into the two
programs that run in the sandbox (harness.py), and the host reads the checker's `call`
results with it. Values allowed: None, bool, int, float, str, bytes, list, tuple, dict, set,
frozenset, nested to MAX_DEPTH, each kept distinct (a tuple never turns into a list, True never
into 1); and what honest solutions return from the standard library: Counter,
OrderedDict, deque, defaultdict (it arrives as a dict: its factory stays behind), named tuples
(`namedtuple`, `typing.NamedTuple`), Fraction and Decimal. numpy's integer, float and bool scalars
arrive as int, float and bool, and numpy arrays as the nested lists `tolist()` gives, so the
receiver needs no numpy and compares them as Python compares those values.

Encoding tests `type(x) is T` exactly, T being the standard type itself, and reads the value through
T's own accessors (`dict.items(x)`, `tuple.__iter__(x)`, `OrderedDict.items(x)`, the Fraction's
slots), never through a method the instance or a subclass could override. A subclass, a proxy
(`weakref.proxy`, `types.MappingProxyType`), or any object with its own `__eq__` is refused; a named
tuple is a tuple subclass whose classes define none of the comparison, hash, length or item methods.

Decoding is where the guarantee lives, since the candidate owns its whole process: it builds fresh
values of the receiver's own standard types from tagged JSON (a named tuple as a new `namedtuple`
class with the name and fields sent), so whatever bytes a candidate writes, the receiver gets such
data or WireError: the candidate can choose its answers, never how they compare. Numbers stay cheap
to compare: a Fraction's terms have at most MAX_FRACTION_BITS bits, a Decimal at most
MAX_DECIMAL_TEXT characters and an exponent within MAX_DECIMAL_EXPONENT, and a signalling NaN (whose
comparison raises) is refused. Building a set or dict costs what its keys' hashes allow: the hash of an
int, float, Fraction, Decimal or tuple is fixed (only str and bytes hashes are salted), so keys chosen to share
one hash (multiples of 2**61 - 1) make each insertion compare with every earlier key, 20,000 of them cost 4 s
and a full message minutes of the host's time. So a set or dict in which more than MAX_SAME_HASH keys share a
hash is refused before it is built, after a sort of the hashes that no key can slow down.

The format: None, a bool, a str, a finite float and an int of at most MAX_PLAIN_INT_BITS bits are
their own JSON (a JSON float reads back as the same float: its text is repr's), so a list of small
numbers costs what its JSON does; anything else is a tagged list, [TAG, ITEM]: "I" a hex int, "F" a
float.hex (inf, nan), "Y" hex bytes, "L"/"T"/"E"/"Z"/"K" list, tuple, set, frozenset, deque of
nodes, "D"/"C"/"O" dict, Counter, OrderedDict as [key, value] pairs, "R" [name, fields, items],
"Q" [hex numerator, hex denominator], "M" a Decimal's text. Messages are a 4-byte big-endian length
and that many bytes of JSON, at most MAX_MESSAGE.

Exceptions cross by name (`wire_exception`): the candidate sends its exception's type name, message
and the built-in classes of its MRO; the checker raises the first of those in CROSSING_EXCEPTIONS,
the ordinary errors a test may expect (a ValueError subclass of the solution's own arrives as
ValueError), else None (the checker then raises its CandidateError, an Exception). Never
StopIteration, StopAsyncIteration, GeneratorExit, KeyboardInterrupt, SystemExit or any other
exception that steers control flow: raised inside `all(map(candidate, ...))` or
`zip(starmap(candidate, ...))` in the checker, StopIteration would end the loop as if no item were
left, and the test would pass with nothing checked.
"""

import json as _json
import math as _math
import os as _os
import sys as _sys
from collections import Counter as _Counter
from collections import OrderedDict as _OrderedDict
from collections import defaultdict as _defaultdict
from collections import deque as _deque
from collections import namedtuple as _namedtuple
from functools import lru_cache as _lru_cache

MAX_DEPTH = 100
MAX_MESSAGE = 4 << 20
MAX_PLAIN_INT_BITS = 1000
MAX_FRACTION_BITS = 1 << 15
MAX_DECIMAL_TEXT = 5000
MAX_DECIMAL_EXPONENT = 10000
MAX_SAME_HASH = 32  # keys of one set or dict sharing one hash; honest data has a few at most (hash(-1) == hash(-2))
# Not Exception itself: a candidate's own subclass of it arrives as the checker's CandidateError, name and all.
CROSSING_EXCEPTIONS = frozenset({
    "ArithmeticError", "FloatingPointError", "OverflowError", "ZeroDivisionError", "AssertionError",
    "AttributeError", "BufferError", "EOFError", "ImportError", "ModuleNotFoundError", "LookupError", "IndexError",
    "KeyError", "MemoryError", "NameError", "UnboundLocalError", "OSError", "TimeoutError", "FileNotFoundError",
    "RuntimeError", "NotImplementedError", "RecursionError", "TypeError", "ValueError", "UnicodeError",
})
# What a named tuple's classes may not define: a class that does compares or iterates its own way.
_RECORD_OVERRIDES = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__len__",
                     "__iter__", "__getitem__", "__contains__")


class WireError(Exception):
    """A value that is not plain data, or a message that does not decode to one."""


_PLAIN = (bool, int, float, str)  # what JSON itself carries: a node of these types stands for itself
_SEQUENCES = {list: "L", tuple: "T", set: "E", frozenset: "Z"}
_BUILD = {"L": list, "T": tuple, "E": set, "Z": frozenset, "K": _deque}
_HASHED = ("E", "Z")  # sets: their items are keys
_MAPPINGS = {dict: ("D", dict.items), _defaultdict: ("D", dict.items), _Counter: ("C", dict.items),
             _OrderedDict: ("O", _OrderedDict.items)}


def wire_encode(value, depth=0):
    """`value` as a JSON-ready node (the format is in the module docstring); WireError for anything but plain data."""
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH}")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:  # past MAX_PLAIN_INT_BITS in hex: no int-to-decimal digit limit applies
        return value if value.bit_length() <= MAX_PLAIN_INT_BITS else ["I", hex(value)]
    if t is float:  # JSON's float text is repr's, which reads back exactly; inf and nan are not JSON
        return value if _math.isfinite(value) else ["F", float.hex(value)]
    if t is bytes:
        return ["Y", value.hex()]
    standard = type(t) is type  # no metaclass of the code's own answers the lookups below
    if standard and t in _SEQUENCES:
        return [_SEQUENCES[t], [wire_encode(item, depth + 1) for item in value]]
    if t is _deque:
        return ["K", [wire_encode(item, depth + 1) for item in _deque.__iter__(value)]]
    if standard and t in _MAPPINGS:
        tag, items = _MAPPINGS[t]
        return [tag, [[wire_encode(k, depth + 1), wire_encode(v, depth + 1)] for k, v in items(value)]]
    fields = _record_fields(t) if issubclass(t, tuple) else None
    if fields is not None:
        items = [wire_encode(item, depth + 1) for item in tuple.__iter__(value)]
        if len(items) != len(fields):
            raise WireError(f"not plain data: a {t.__name__} with {len(items)} items for {len(fields)} fields")
        try:
            _record_class(t.__name__, fields)  # the names the receiver will accept
        except (ValueError, TypeError):
            raise WireError(f"not plain data: a {t.__name__} whose names namedtuple refuses") from None
        return ["R", [t.__name__, list(fields), items]]
    return _encode_number(value, t, depth)


def _encode_number(value, t, depth):
    """A Fraction, a Decimal, or a numpy scalar or array (each module looked up only when the code loaded it)."""
    fractions, decimal, numpy = (_sys.modules.get(name) for name in ("fractions", "decimal", "numpy"))
    if fractions is not None and t is fractions.Fraction:
        terms = object.__getattribute__(value, "_numerator"), object.__getattribute__(value, "_denominator")
        _check_fraction(*terms)
        return ["Q", [hex(terms[0]), hex(terms[1])]]
    if decimal is not None and t is decimal.Decimal:
        return ["M", _check_decimal(value, decimal.Decimal)]
    if numpy is not None:
        if t is numpy.ndarray:
            return wire_encode(numpy.ndarray.tolist(value), depth + 1)
        kind = _numpy_scalars(numpy).get(t)
        if kind is not None:
            return wire_encode(kind(value), depth)
    raise WireError(f"not plain data: a {t.__name__}")


def _record_fields(t):
    """The field names of a named tuple class, or None for any other tuple subclass."""
    if type(t) is not type:
        return None
    fields = None
    for klass in t.__mro__:
        if klass is tuple or klass is object:
            continue
        names = type.__dict__["__dict__"].__get__(klass)
        if any(name in names for name in _RECORD_OVERRIDES):
            return None
        if fields is None and "_fields" in names:
            fields = names["_fields"]
    if type(fields) is not tuple or not all(type(f) is str for f in fields):
        return None
    return fields


_NUMPY = {}


def _numpy_scalars(numpy):
    """numpy's own scalar types -> the Python type each arrives as (bool_ -> bool, integers -> int, floats -> float,
    str_ -> str, bytes_ -> bytes)."""
    if id(numpy) not in _NUMPY:
        kinds = {}
        bases = ((numpy.bool_, bool), (numpy.integer, int), (numpy.floating, float), (numpy.str_, str), (numpy.bytes_, bytes))
        for t in set(numpy.sctypeDict.values()):
            for base, kind in bases:
                if issubclass(t, base):
                    kinds[t] = kind
        _NUMPY[id(numpy)] = kinds
    return _NUMPY[id(numpy)]


def _check_fraction(numerator, denominator):
    if type(numerator) is not int or type(denominator) is not int or denominator <= 0:
        raise WireError("malformed fraction")
    if max(numerator.bit_length(), denominator.bit_length()) > MAX_FRACTION_BITS:
        raise WireError(f"a fraction with terms over {MAX_FRACTION_BITS} bits")


def _check_decimal(value, decimal_type):
    """The Decimal's text, if it is cheap to compare (no signalling NaN, a bounded size); else WireError."""
    text = decimal_type.__str__(value)
    if len(text) > MAX_DECIMAL_TEXT or decimal_type.is_snan(value):
        raise WireError("a signalling NaN or an outsized decimal")
    exponent = decimal_type.as_tuple(value).exponent
    if type(exponent) is int and abs(exponent) > MAX_DECIMAL_EXPONENT:
        raise WireError(f"a decimal with an exponent beyond {MAX_DECIMAL_EXPONENT}")
    return text


@_lru_cache(maxsize=256)
def _record_class(name, fields):
    return _namedtuple(name, fields, module="wire")


def wire_decode(node, depth=0):
    """The plain value a node stands for; WireError for any other shape."""
    if node is None or type(node) in _PLAIN:
        return node
    if depth > MAX_DEPTH or type(node) is not list or not node or type(node[0]) is not str:
        raise WireError("malformed value")
    tag, rest = node[0], node[1:]
    try:
        if len(rest) != 1:
            raise WireError("malformed value")
        item = rest[0]
        if tag == "I" and type(item) is str:
            return int(item, 16)
        if tag == "F" and type(item) is str:
            return float.fromhex(item)
        if tag == "Y" and type(item) is str:
            return bytes.fromhex(item)
        if tag in _BUILD and type(item) is list:
            items = [wire_decode(x, depth + 1) for x in item]
            if tag in _HASHED:
                _check_hashes(items)
            return _BUILD[tag](items)
        if tag in ("D", "C", "O") and type(item) is list:
            return _decode_mapping(tag, item, depth)
        if tag == "R" and type(item) is list and len(item) == 3:
            return _decode_record(*item, depth)
        if tag == "Q" and type(item) is list and len(item) == 2 and all(type(x) is str for x in item):
            import fractions

            terms = int(item[0], 16), int(item[1], 16)
            _check_fraction(*terms)
            return fractions.Fraction(*terms)
        if tag == "M" and type(item) is str and len(item) <= MAX_DECIMAL_TEXT:
            import decimal

            value = decimal.Decimal(item)
            _check_decimal(value, decimal.Decimal)
            return value
    except (ValueError, TypeError, ArithmeticError, RecursionError) as error:  # bad hex, unhashable key, bad decimal
        raise WireError(f"malformed value: {type(error).__name__}") from None
    raise WireError("malformed value")


def _decode_mapping(tag, pairs, depth):
    items = []
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2:
            raise WireError("malformed dict item")
        items.append((wire_decode(pair[0], depth + 1), wire_decode(pair[1], depth + 1)))
    _check_hashes([key for key, _ in items])
    out = {"D": dict, "C": _Counter, "O": _OrderedDict}[tag]()
    for key, value in items:
        out[key] = value
    return out


def _check_hashes(keys):
    """WireError when more than MAX_SAME_HASH of `keys` share a hash (see the module docstring); TypeError for an
    unhashable key. Sorting ints compares no keys, so this costs n log n whatever the keys are."""
    hashes = sorted(map(hash, keys))
    for i in range(MAX_SAME_HASH, len(hashes)):
        if hashes[i] == hashes[i - MAX_SAME_HASH]:
            raise WireError(f"a set or dict with more than {MAX_SAME_HASH} keys of one hash")


def _decode_record(name, fields, items, depth):
    """A named tuple of a class this side makes (namedtuple checks the names)."""
    if type(name) is not str or type(fields) is not list or type(items) is not list or len(fields) != len(items) \
            or not all(type(f) is str for f in fields):
        raise WireError("malformed named tuple")
    return tuple.__new__(_record_class(name, tuple(fields)), [wire_decode(x, depth + 1) for x in items])


def wire_exception(names, message):
    """The exception the checker raises for a candidate's: the first of `names` (its type's name, then the
    built-in classes of its MRO) that is in CROSSING_EXCEPTIONS, made with `message`; None when none is."""
    import builtins

    for name in names:
        if type(name) is str and name in CROSSING_EXCEPTIONS:
            try:
                return getattr(builtins, name)(message)
            except Exception:
                return None
    return None


def wire_dumps(message) -> bytes:
    """A framed message; `message` is a JSON-ready list (values inside already wire_encode'd)."""
    body = _json.dumps(message, separators=(",", ":")).encode("ascii")
    if len(body) > MAX_MESSAGE:
        raise WireError(f"message of {len(body)} bytes, more than {MAX_MESSAGE}")
    return len(body).to_bytes(4, "big") + body


def wire_send(fd, message) -> None:
    view = memoryview(wire_dumps(message))
    while view:
        view = view[_os.write(fd, view):]


def wire_recv(fd):
    """The next framed message from `fd` as parsed JSON; EOFError when the writer is gone."""
    size = int.from_bytes(_read_exactly(fd, 4), "big")
    if size > MAX_MESSAGE:
        raise WireError(f"message of {size} bytes, more than {MAX_MESSAGE}")
    try:
        return _json.loads(_read_exactly(fd, size))
    except (ValueError, RecursionError) as error:
        raise WireError(f"unreadable message: {type(error).__name__}") from None


def _read_exactly(fd, n):
    data = bytearray()
    while len(data) < n:
        chunk = _os.read(fd, min(n - len(data), 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        data += chunk
    return bytes(data)
