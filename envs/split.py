"""Train/test assignment by a stable hash of a problem's canonical key, and distinct test draws.

A problem is test iff sha256(key) mod 10_000 < test_fraction * 10_000. The hash (unlike Python's
`hash`) is the same in every process and version, so a problem never moves between splits and
the two splits never share a problem, however many rows are drawn.

Asking for more distinct test problems than exist raises `TooFewTestProblems` (a ValueError) carrying how many
there are, and its message names the settings that ask (`train.eval_prompts`, `rlvr eval`'s `n_prompts`) with a
value that works. An environment that can count its test problems says so in `test_size()` (envs/base.py), and
the held-out evals take at most that many, as they do for HumanEval's 164.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import Any

from rlvr.errors import ConfigError

BUCKETS = 10_000
PATIENCE = 20_000  # draws in a row without a usable problem before we conclude there are no more


class TooFewTestProblems(ValueError):
    """`n` distinct test problems asked for, `available` exist; the message says which settings ask for them."""

    def __init__(self, n: int, available: int, what: str):
        self.n, self.available = n, available
        super().__init__(f"{what}; ask for at most {available} (train.eval_prompts in rlvr train, n_prompts in rlvr "
                         f"eval), or widen the task")


def is_test(key: str, test_fraction: float) -> bool:
    """Whether the problem with canonical `key` belongs to the test split."""
    bucket = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % BUCKETS
    return bucket < test_fraction * BUCKETS


def check_fraction(test_fraction: Any, env: str) -> float:
    """`test_fraction` as a float in [0, 1) (1 would leave no train problems), or a ValueError naming it."""
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 <= test_fraction < 1:
        raise ConfigError(f"{env}: 'test_fraction' must be a number in [0, 1), got {test_fraction!r}")
    return float(test_fraction)


def draw_train(draw: Callable[[random.Random], Any], key: Callable[[Any], str], test_fraction: float,
               n: int, seed: int) -> list[Any]:
    """`n` train problems (repeats allowed) drawn with `random.Random(seed)`, test ones rejected."""
    rng, out, misses = random.Random(seed), [], 0
    while len(out) < n:
        problem = draw(rng)
        if is_test(key(problem), test_fraction):
            misses += 1
            if misses > PATIENCE:
                raise ValueError(f"no train problem found in {PATIENCE} draws; lower test_fraction")
            continue
        misses = 0
        out.append(problem)
    return out


def draw_test(draw: Callable[[random.Random], Any], key: Callable[[Any], str], test_fraction: float,
              n: int, seed: int) -> list[Any]:
    """`n` distinct test problems drawn by rejection; TooFewTestProblems when fewer seem to exist.

    For spaces too large to enumerate. Taking the first n is a prefix of asking for more, same seed.
    """
    rng, out, seen, misses = random.Random(f"test-{seed}"), [], set(), 0
    while len(out) < n:
        problem = draw(rng)
        k = key(problem)
        if k in seen or not is_test(k, test_fraction):
            misses += 1
            if misses > PATIENCE:
                raise TooFewTestProblems(n, len(out), f"asked for {n} distinct test problems but only {len(out)} "
                                         f"exist for these parameters (no new one in {PATIENCE} draws)")
            continue
        misses = 0
        seen.add(k)
        out.append(problem)
    return out


def pick_test(all_test: list[Any], n: int, seed: int) -> list[Any]:
    """`n` of an enumerated list of test problems, seed-shuffled; TooFewTestProblems naming how many exist."""
    if n > len(all_test):
        raise TooFewTestProblems(n, len(all_test), f"asked for {n} test rows but only {len(all_test)} distinct test "
                                                   f"problems exist")
    shuffled = list(all_test)
    random.Random(f"test-{seed}").shuffle(shuffled)
    return shuffled[:n]
