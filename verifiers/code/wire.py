"""The strict serialiser between a candidate's process and the checker's: plain data only.

Standard library only and no rlvr imports: this file's source is also pasted into the two
programs that run in the sandbox (harness.py), and the host reads the checker's `call`
results with it. Values allowed: None, bool, int, float, str, bytes, list, tuple, dict, set,
frozenset, nested to MAX_DEPTH, each kept distinct (a tuple never turns into a list, True never
into 1); and what honest solutions return from the standard library: Counter,
OrderedDict, deque, defaultdict (it arrives as a dict: its factory stays behind), named tuples
(`namedtuple`, `typing.NamedTuple`), Fraction and Decimal, complex, range, datetime's date,
datetime, time (naive or at a fixed `timezone` offset) and timedelta. numpy's integer, float, complex and
bool scalars arrive as int, float, complex and bool; a numpy array arrives as an array of the same dtype
and shape where the receiver has numpy (a test reads `.shape`), else as the nested lists `tolist()` gives.
pandas' Series, DataFrame, Index (RangeIndex, DatetimeIndex, TimedeltaIndex, and pandas 1's Int64Index,
UInt64Index, Float64Index), Timestamp (naive or UTC), Timedelta, NaT and NA arrive as fresh objects of the
receiver's own pandas with the same dtypes, labels and names, so `.equals` is pandas' own; where the receiver has no
pandas, WireError "unsupported value". A column's dtype is a numpy dtype of kind b, i, u, f, c, O, M or m, or
one of pandas' extension dtypes by name from _PANDAS_DTYPES (Int64, string, ...); pandas' other public types (a
MultiIndex, a categorical, a Period, a time zone other than UTC) are "unsupported value", and a subclass of a
pandas type is not plain data. A frame has at most MAX_ITEMS columns.
A returned generator or built-in iterator (map, zip, itertools') is drained by the sender (at most
MAX_ITEMS items and a quarter of MAX_MESSAGE) and arrives as a generator of the receiver's that yields
those items, then ends as the original did (exhausted, or raising its exception; past the bound,
RuntimeError): how far a test reads it is never seen by the code that made it. Types the wire knows but
cannot carry (a ZoneInfo time zone, a datetime64 or structured array, a MultiIndex) are refused as
"unsupported value", never as "not plain data", which the hack monitor reads as a fake value.

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
"Q" [hex numerator, hex denominator], "M" a Decimal's text, "X" [real, imag], "G" [start, stop, step],
"J" [items, end], "W" [kind, int fields, zone], "N" [dtype, shape, items in C order], "P" a pandas value as
[kind, fields]: "ts" [nanoseconds, None or "UTC"], "td" nanoseconds, "nat"/"na" None, "range" [[start, stop,
step], name], "index" [column, name], "series" [column, index, name], "frame" [columns index, index, [column...]];
a column is an "N" node (datetime64 and timedelta64 as their int64 counts) or ["A", extension dtype name, an "N"
node of objects]. The decoder calls no code the sender names: every dtype passes numpy.dtype and an allowed kind
or name, and a column's length is its index's, checked before pandas builds anything. Messages are a
4-byte big-endian length and that many bytes of JSON, at most MAX_MESSAGE.

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
MAX_ITEMS = 10000  # items drained from a returned generator or iterator
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
_GENERATOR = type((lambda: (yield))())
_ARRAY_KINDS = "biufcUSO"  # numpy dtype kinds that cross: bool, ints, floats, complex, str, bytes, object
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
    """A complex, a range, a drained iterator, a Fraction, a Decimal, a datetime value, or a numpy scalar or array
    (each module looked up only when the code loaded it)."""
    if t is complex:  # real and imag are complex's own slots: the exact type has no other
        return ["X", [wire_encode(value.real), wire_encode(value.imag)]]
    if t is range:
        return ["G", [wire_encode(value.start), wire_encode(value.stop), wire_encode(value.step)]]
    if t is _GENERATOR or (type(t) is type and t.__module__ in ("builtins", "itertools") and "__next__" in t.__dict__):
        return _encode_iterator(value, t, depth)
    fractions, decimal, numpy, dt = (_sys.modules.get(name) for name in ("fractions", "decimal", "numpy", "datetime"))
    if fractions is not None and t is fractions.Fraction:
        terms = object.__getattribute__(value, "_numerator"), object.__getattribute__(value, "_denominator")
        _check_fraction(*terms)
        return ["Q", [hex(terms[0]), hex(terms[1])]]
    if decimal is not None and t is decimal.Decimal:
        return ["M", _check_decimal(value, decimal.Decimal)]
    if dt is not None and t in (dt.date, dt.datetime, dt.time, dt.timedelta):
        return ["W", _encode_when(value, t, dt)]
    if numpy is not None:
        if t is numpy.ndarray:
            return _encode_array(value, numpy, depth)
        kind = _numpy_scalars(numpy).get(t)
        if kind is not None:
            return wire_encode(kind(value), depth)
    pandas = _sys.modules.get("pandas")
    if pandas is not None and numpy is not None:
        return ["P", _encode_pandas(value, t, pandas, numpy, depth)]
    raise WireError(f"not plain data: a {t.__name__}")


def _encode_iterator(value, t, depth):
    """A generator or built-in iterator drained here, at most MAX_ITEMS items and a quarter of MAX_MESSAGE of JSON
    (an endless Fibonacci's items grow): [items, end], end None (exhausted),
    "more" (past the bound) or the exception it raised ([name, message, built-in bases]). Drained where it was
    made, so how far the receiver reads it is never seen by the code that made it."""
    step, items, end, size = t.__next__, [], None, 0
    try:
        while True:
            if len(items) >= MAX_ITEMS or size > MAX_MESSAGE // 4:
                end = "more"
                break
            items.append(wire_encode(step(value), depth + 1))
            size += len(_json.dumps(items[-1]))
    except StopIteration:
        pass
    except WireError:
        raise
    except Exception as error:
        end = [type(error).__name__[:100], str(error)[:300],
               [k.__name__ for k in type(error).__mro__ if k.__module__ == "builtins"][:20]]
    return ["J", [items, end]]


def _encode_when(value, t, dt):
    """A date, datetime, time or timedelta: [kind, fields, time zone]; the zone None or a fixed `timezone`."""
    if t is dt.timedelta:
        return ["timedelta", [value.days, value.seconds, value.microseconds], None]
    if t is dt.date:
        return ["date", [value.year, value.month, value.day], None]
    clock = [value.hour, value.minute, value.second, value.microsecond, value.fold]
    zone = value.tzinfo
    if zone is not None and type(zone) is not dt.timezone:
        raise WireError(f"unsupported value: a {t.__name__} in a {type(zone).__name__} time zone (only fixed offsets cross)")
    if zone is not None:
        args = dt.timezone.__getinitargs__(zone)
        zone = [_encode_when(args[0], dt.timedelta, dt)[1], args[1] if len(args) > 1 else None]
    if t is dt.time:
        return ["time", clock, zone]
    return ["datetime", [value.year, value.month, value.day, *clock], zone]


def _encode_array(value, numpy, depth):
    """An ndarray as [dtype, shape, items in C order]: numbers, bools, str, bytes, or plain data (object dtype)."""
    dtype = value.dtype
    if dtype.kind not in _ARRAY_KINDS:
        raise WireError(f"unsupported value: a numpy array of dtype {dtype.str}")
    flat = numpy.ndarray.tolist(numpy.ndarray.ravel(value))
    return ["N", [dtype.str, list(value.shape), [wire_encode(x, depth + 1) for x in flat]]]


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
    complex floats -> complex, str_ -> str, bytes_ -> bytes)."""
    if id(numpy) not in _NUMPY:
        kinds = {}
        bases = ((numpy.bool_, bool), (numpy.integer, int), (numpy.floating, float), (numpy.complexfloating, complex),
                 (numpy.str_, str), (numpy.bytes_, bytes))
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
        if tag == "X" and type(item) is list and len(item) == 2:
            real, imag = (wire_decode(x, depth + 1) for x in item)
            if type(real) is float and type(imag) is float:
                return complex(real, imag)
        if tag == "G" and type(item) is list and len(item) == 3:
            terms = [wire_decode(x, depth + 1) for x in item]
            if all(type(x) is int for x in terms):
                return range(*terms)
        if tag == "J" and type(item) is list and len(item) == 2 and type(item[0]) is list:
            return _replay([wire_decode(x, depth + 1) for x in item[0]], item[1])
        if tag == "W" and type(item) is list and len(item) == 3:
            return _decode_when(*item)
        if tag == "N" and type(item) is list and len(item) == 3:
            return _decode_array(*item, depth)
        if tag == "P" and type(item) is list and len(item) == 2 and type(item[0]) is str:
            try:
                return _decode_pandas(*item, depth)
            except (WireError, RecursionError, MemoryError):
                raise
            except Exception as error:  # pandas' own, on fields no honest sender makes (lengths, names, dtypes)
                raise WireError(f"malformed pandas value: {type(error).__name__}") from None
    except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError) as error:  # bad hex, key, decimal
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


def _replay(items, end):
    """A drained iterator as the receiver's own generator: its items, then its end (WireError if malformed)."""
    if end is None:
        error = None
    elif end == "more":
        error = RuntimeError(f"the iterator yielded more than the {MAX_ITEMS} items the wire carries")
    elif type(end) is list and len(end) == 3 and type(end[2]) is list:
        name, message = str(end[0])[:100], str(end[1])[:300]
        error = wire_exception([name, *end[2][:20]], message) or RuntimeError(name + ": " + message)
    else:
        raise WireError("malformed iterator end")

    def replay():
        yield from items
        if error is not None:
            raise error
    return replay()


def _decode_when(kind, fields, zone):
    import datetime as dt

    if type(fields) is not list or not all(type(x) is int for x in fields):
        raise WireError("malformed date or time")
    if zone is not None:
        if type(zone) is not list or len(zone) != 2 or (zone[1] is not None and type(zone[1]) is not str):
            raise WireError("malformed time zone")
        zone = dt.timezone(_decode_when("timedelta", zone[0], None), *([zone[1]] if zone[1] is not None else []))
    if kind == "timedelta" and len(fields) == 3 and zone is None:
        return dt.timedelta(*fields)
    if kind == "date" and len(fields) == 3 and zone is None:
        return dt.date(*fields)
    if kind == "time" and len(fields) == 5:
        return dt.time(*fields[:4], tzinfo=zone, fold=fields[4])
    if kind == "datetime" and len(fields) == 8:
        return dt.datetime(*fields[:7], tzinfo=zone, fold=fields[7])
    raise WireError("malformed date or time")


def _decode_array(dtype, shape, items, depth):
    """An ndarray built here when numpy is importable, else the nested lists it stands for. Its size is bounded
    before anything is allocated (a str dtype's width is the sender's choice)."""
    if type(dtype) is not str or len(dtype) > 16 or type(shape) is not list or len(shape) > 32 or type(items) is not list \
            or not all(type(n) is int and 0 <= n < 1 << 40 for n in shape) or _math.prod(shape) != len(items):
        raise WireError("malformed array")
    values = [wire_decode(x, depth + 1) for x in items]
    try:
        import numpy
    except ImportError:
        return _nested(values, shape)
    kind = numpy.dtype(dtype)
    if kind.kind not in _ARRAY_KINDS or kind.itemsize > 1 << 16 or kind.itemsize * len(values) > MAX_MESSAGE * 16:
        raise WireError("malformed array")
    if kind.kind == "O":
        out = numpy.empty(len(values), dtype=object)
        for i, value in enumerate(values):
            out[i] = value
    else:
        out = numpy.array(values, dtype=kind)
    return out.reshape(shape)


_PANDAS = {}
_COLUMN_KINDS = "biufcOMm"  # numpy dtype kinds a pandas column or index crosses with: datetime64 and timedelta64 too
# pandas' extension dtypes that cross, by name, as the objects their values are (pd.NA, NaN, str, int, float, bool)
_PANDAS_DTYPES = ("str", "string", "boolean", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                  "Float32", "Float64")


def _pandas_types(pandas):
    """pandas' own types the wire carries -> their kind. pandas 1.x's Int64Index, UInt64Index and Float64Index (what
    `pd.Index([1, 2])` makes there) are read from their module, not from pandas' top level, which warns on them."""
    if id(pandas) not in _PANDAS:
        kinds = {pandas.Series: "series", pandas.DataFrame: "frame", pandas.RangeIndex: "range",
                 pandas.Index: "index", pandas.DatetimeIndex: "index", pandas.TimedeltaIndex: "index",
                 pandas.Timestamp: "ts", pandas.Timedelta: "td", type(pandas.NaT): "nat"}
        if hasattr(pandas, "NA"):
            kinds[type(pandas.NA)] = "na"
        numeric = _sys.modules.get("pandas.core.indexes.numeric")
        for name in ("Int64Index", "UInt64Index", "Float64Index"):
            if numeric is not None and type(vars(numeric).get(name)) is type:
                kinds[vars(numeric)[name]] = "index"
        _PANDAS[id(pandas)] = kinds
    return _PANDAS[id(pandas)]


def _encode_pandas(value, t, pandas, numpy, depth):
    """A pandas value as [kind, fields] (the module docstring lists them), read through pandas' own classes.
    One of pandas' other public types (MultiIndex, Categorical, Period, an extension dtype) is "unsupported
    value"; anything else is not plain data."""
    kind = _pandas_types(pandas).get(t)
    if kind is None:
        if type(t) is type and t.__module__.split(".")[0] == "pandas" and vars(pandas).get(t.__name__) is t:
            raise WireError(f"unsupported value: a pandas {t.__name__}")
        raise WireError(f"not plain data: a {t.__name__}")
    if kind in ("nat", "na"):
        return [kind, None]
    if kind == "td":
        return ["td", wire_encode(pandas.Timedelta.value.__get__(value))]
    if kind == "ts":
        zone = None
        if value.tzinfo is not None:  # UTC alone: pandas 1 spells it pytz's, pandas 2 and 3 datetime's or zoneinfo's
            if value.tzname() != "UTC" or value.utcoffset().total_seconds() != 0:
                raise WireError(f"unsupported value: a pandas Timestamp in the {value.tzname()} time zone (only UTC crosses)")
            zone = "UTC"
        return ["ts", [wire_encode(pandas.Timestamp.value.__get__(value)), zone]]
    if kind == "range":
        return ["range", [[wire_encode(x) for x in (value.start, value.stop, value.step)], wire_encode(value.name, depth + 1)]]
    if kind == "index":
        return ["index", [_encode_column(value, numpy, depth), wire_encode(value.name, depth + 1)]]
    if kind == "series":
        return ["series", [_encode_column(value, numpy, depth),
                           _encode_pandas(value.index, type(value.index), pandas, numpy, depth + 1),
                           wire_encode(value.name, depth + 1)]]
    columns = [_encode_column(column, numpy, depth) for _, column in pandas.DataFrame.items(value)]
    if len(columns) > MAX_ITEMS:
        raise WireError(f"unsupported value: a pandas DataFrame of more than {MAX_ITEMS} columns")
    return ["frame", [_encode_pandas(value.columns, type(value.columns), pandas, numpy, depth + 1),
                      _encode_pandas(value.index, type(value.index), pandas, numpy, depth + 1), columns]]


def _encode_column(owner, numpy, depth):
    """A Series', index's or column's values: an "N" node (datetime64 and timedelta64 as their int64 counts), or for
    an extension dtype of _PANDAS_DTYPES ["A", its name, an "N" node of objects]."""
    extension = not isinstance(owner.dtype, numpy.dtype)  # category, a time zone, an interval: no faithful plain form
    if extension and str(owner.dtype) not in _PANDAS_DTYPES:
        raise WireError(f"unsupported value: a pandas {type(owner).__name__} of dtype {owner.dtype}")
    values = type(owner).to_numpy(owner, dtype=object) if extension else type(owner).to_numpy(owner)
    dtype = values.dtype
    if type(values) is not numpy.ndarray or values.ndim != 1:
        raise WireError(f"unsupported value: a pandas {type(owner).__name__} of dtype {owner.dtype}")
    if extension:
        return ["A", str(owner.dtype), _encode_array(values, numpy, depth)]
    if dtype.kind not in _COLUMN_KINDS:
        raise WireError(f"unsupported value: a pandas {type(owner).__name__} of dtype {owner.dtype}")
    if dtype.kind in "Mm":
        return ["N", [dtype.str, [len(values)], numpy.ndarray.tolist(values.view("i8"))]]
    return _encode_array(values, numpy, depth)


def _decode_pandas(kind, fields, depth):
    """A fresh pandas value of the receiver's own pandas from [kind, fields]; WireError if it has none, or if the
    fields are not what the sender's pandas makes (every dtype passes numpy.dtype and the kinds allowed)."""
    try:
        import numpy
        import pandas
    except ImportError:
        raise WireError(f"unsupported value: a pandas value ({kind}), and pandas is not importable here") from None
    if depth > MAX_DEPTH:
        raise WireError("malformed value")
    if kind in ("nat", "na") and fields is None:
        return pandas.NaT if kind == "nat" else pandas.NA
    if kind == "td" and type(fields) is int and -1 << 63 < fields < 1 << 63:
        return pandas.Timedelta(fields, unit="ns")
    if kind == "ts" and type(fields) is list and len(fields) == 2 and type(fields[0]) is int \
            and -1 << 63 < fields[0] < 1 << 63 and fields[1] in (None, "UTC"):
        return pandas.Timestamp(fields[0], unit="ns", tz=fields[1])
    if type(fields) is not list:
        raise WireError("malformed pandas value")
    if kind == "range" and len(fields) == 2 and type(fields[0]) is list and len(fields[0]) == 3 \
            and all(type(x) is int for x in fields[0]):
        return pandas.RangeIndex(*fields[0], name=_decode_name(fields[1], depth))
    if kind == "index" and len(fields) == 2:
        values = _decode_column(fields[0], None, numpy, depth)
        return pandas.Index(values, dtype=values.dtype, name=_decode_name(fields[1], depth))
    if kind == "series" and len(fields) == 3:
        index = _decode_index(fields[1], pandas, depth)
        values = _decode_column(fields[0], len(index), numpy, depth)
        return pandas.Series(values, index=index, dtype=values.dtype, name=_decode_name(fields[2], depth))
    if kind == "frame" and len(fields) == 3 and type(fields[2]) is list and len(fields[2]) <= MAX_ITEMS:
        columns, index = _decode_index(fields[0], pandas, depth), _decode_index(fields[1], pandas, depth)
        if len(columns) != len(fields[2]):
            raise WireError("malformed pandas DataFrame: as many columns as names")
        arrays = [_decode_column(node, len(index), numpy, depth) for node in fields[2]]
        # each column a Series of its own dtype (pandas 3 reads an object array of str as its str dtype), on positions
        # first: labels align, and an index with repeated labels could not be aligned
        frame = pandas.DataFrame({i: pandas.Series(a, dtype=a.dtype) for i, a in enumerate(arrays)},
                                 index=pandas.RangeIndex(len(index)))
        frame.index, frame.columns = index, columns
        return frame
    raise WireError("malformed pandas value")


def _decode_index(node, pandas, depth):
    if type(node) is not list or len(node) != 2 or node[0] not in ("range", "index"):
        raise WireError("malformed pandas index")
    return _decode_pandas(*node, depth + 1)


def _decode_name(node, depth):
    name = wire_decode(node, depth + 1)
    hash(name)  # TypeError, so WireError, for a list or dict: pandas names are hashable
    return name


def _decode_column(node, length, numpy, depth):
    """A one-dimensional array of a kind a pandas column has, `length` items long when given; the "N" node's own
    checks bound it before anything is allocated."""
    if type(node) is list and len(node) == 3 and node[0] == "A" and node[1] in _PANDAS_DTYPES:
        values = _decode_column(node[2], length, numpy, depth)
        if values.dtype.kind != "O":
            raise WireError("malformed pandas column")
        import pandas
        return pandas.array(values, dtype=node[1])
    if type(node) is not list or len(node) != 2 or node[0] != "N" or type(node[1]) is not list or len(node[1]) != 3:
        raise WireError("malformed pandas column")
    dtype, shape, items = node[1]
    if type(dtype) is not str or len(dtype) > 16 or type(shape) is not list or len(shape) != 1 \
            or (length is not None and shape[0] != length):
        raise WireError("malformed pandas column: not one dimension of the index's length")
    kind = numpy.dtype(dtype)
    if kind.kind in "Mm":
        if type(items) is not list or len(items) != shape[0] or not all(type(x) is int for x in items) \
                or kind.itemsize != 8:
            raise WireError("malformed pandas column")
        return numpy.array(items, dtype="i8").view(kind)
    values = _decode_array(dtype, shape, items, depth)
    if type(values) is not numpy.ndarray:
        raise WireError("malformed pandas column")
    return values


def _nested(values, shape):
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    step = len(values) // shape[0] if shape[0] else 0
    return [_nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


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
