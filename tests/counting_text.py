"""A completion that counts the characters its `find` calls examine: a test of a linear scan reads the count
instead of a clock (tests/verifiers/code/test_code_fence.py, tests/verifiers/test_reasoning_gym_extract.py)."""

from __future__ import annotations


class CountingText(str):
    """`str` whose `find` adds to `scanned` how far each call read: to the end of a match, else to the end."""

    scanned = 0

    def find(self, sub, start=0, end=None):
        found = str.find(self, sub, start, end)
        type(self).scanned += (found + len(sub) if found >= 0 else len(self)) - start
        return found
