"""Seeds derived from names, so streams never collide and a resumed run redraws the same data."""

from __future__ import annotations

import hashlib


def derive_seed(*parts) -> int:
    """A 63-bit seed from e.g. ("train-rows", seed, step); stable across Python processes."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
