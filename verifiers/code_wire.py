"""The strict serialiser between a candidate's process and the checker's: plain data only.

Standard library only and no rlvr imports: this file's source is also pasted into the two
programs that run in the sandbox (code_harness.py). Values allowed: None, bool, int, float, str,
bytes, list, tuple, dict, set, frozenset, nested to MAX_DEPTH, each kept distinct (a tuple never
turns into a list, True never into 1). Encoding tests `type(x) is T` exactly, so a subclass, a
proxy (`weakref.proxy`, `types.MappingProxyType`), or any object with its own `__eq__` is refused.
Decoding builds fresh built-in values from tagged JSON, so whatever bytes a candidate writes, the
checker gets either plain data or WireError: the candidate can choose its answers, never how they
compare. Messages are a 4-byte big-endian length and that many bytes of JSON, at most MAX_MESSAGE.
"""

import json as _json
import os as _os

MAX_DEPTH = 100
MAX_MESSAGE = 4 << 20


class WireError(Exception):
    """A value that is not plain data, or a message that does not decode to one."""


_SEQUENCES = {list: "L", tuple: "T", set: "E", frozenset: "Z"}
_BUILD = {"L": list, "T": tuple, "E": set, "Z": frozenset}


def wire_encode(value, depth=0):
    """`value` as tagged JSON-ready lists; WireError for anything but plain data."""
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH}")
    t = type(value)
    if value is None:
        return ["N"]
    if t is bool:
        return ["B", 1 if value is True else 0]
    if t is int:
        return ["I", hex(value)]  # hex: no int-to-decimal digit limit applies
    if t is float:
        return ["F", float.hex(value)]
    if t is str:
        return ["S", value]
    if t is bytes:
        return ["Y", value.hex()]
    if t in _SEQUENCES:
        return [_SEQUENCES[t], [wire_encode(item, depth + 1) for item in value]]
    if t is dict:
        return ["D", [[wire_encode(k, depth + 1), wire_encode(v, depth + 1)] for k, v in value.items()]]
    raise WireError(f"not plain data: a {t.__name__}")


def wire_decode(node, depth=0):
    """The plain value a tagged node stands for; WireError for any other shape."""
    if depth > MAX_DEPTH or type(node) is not list or not node or type(node[0]) is not str:
        raise WireError("malformed value")
    tag, rest = node[0], node[1:]
    try:
        if tag == "N" and not rest:
            return None
        if len(rest) != 1:
            raise WireError("malformed value")
        item = rest[0]
        if tag == "B" and item in (0, 1) and type(item) is int:
            return item == 1
        if tag == "I" and type(item) is str:
            return int(item, 16)
        if tag == "F" and type(item) is str:
            return float.fromhex(item)
        if tag == "S" and type(item) is str:
            return item
        if tag == "Y" and type(item) is str:
            return bytes.fromhex(item)
        if tag in _BUILD and type(item) is list:
            return _BUILD[tag](wire_decode(x, depth + 1) for x in item)
        if tag == "D" and type(item) is list:
            out = {}
            for pair in item:
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("malformed dict item")
                out[wire_decode(pair[0], depth + 1)] = wire_decode(pair[1], depth + 1)
            return out
    except (ValueError, TypeError, OverflowError, RecursionError) as error:  # e.g. bad hex, unhashable key
        raise WireError(f"malformed value: {type(error).__name__}") from None
    raise WireError("malformed value")


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
