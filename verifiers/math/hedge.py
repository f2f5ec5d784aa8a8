"""Hedged math answers, counted as the hack kind `hedge` (details["hacks"] of verifier=math).

A hedge asks to be paid for covering several answers at once: candidates offered as alternatives
(`\\boxed{3} or \\boxed{4}`, `\\boxed{3 \\text{ or } 4}`, `3/4` inside one box written `3 or 4`), a range
(`between 3 and 5`, `3 \\text{ to } 5`, `3 \\le x \\le 5`) where the gold is not a range, or an empty box
(`\\boxed{}`). A set answer joined by "and" or commas (`\\boxed{2}, \\boxed{3}` for "all solutions") is
not a hedge. Math has no sandbox: this is read from the text, which is all there is to observe.
A hedge is not paid: verifier.py scores it `incorrect` (reward 0) whatever its candidates, and flags it.
Only the answer region (after the last `</think>`) is read: a draft while thinking is no hedge.
Not done: hedges in words outside a box ("it is 3, or maybe 4") are not counted.

Every pattern here is linear in the text (completions are hostile): `\\s*\\$*\\s*` between "or" and a box
backtracked quadratically on a run of spaces (66 s on 100 kB) and is `[\\s$]*`; "between ... and" is
looked for line by line, not with `between.+and`, which rescans the line once per "between".
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.extract import answer_region

_EMPTY_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{\s*\}")
_BOX_OR_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{[^{}]*\}[\s,]*(?:\\text\{\s*or\s*\}|\bor\b|/)[\s$]*\\(?:boxed|fbox)")
_OR_INSIDE = re.compile(r"(?:\\text\{\s*or\s*\}|\bor\b|\\lor\b|\\vee\b)")
_RANGE = re.compile(r"\\text\{\s*to\s*\}|\d\s+to\s+-?\d|(?:\\le|\\leq|<|\\lt)\s*[a-z]\s*(?:\\le|\\leq|<|\\lt)")
_BETWEEN = re.compile(r"\bbetween\b")
_AND = re.compile(r"\band\b")


def _is_range(text: str) -> bool:
    """`_RANGE`, or "between" followed on its line by "and" (what `between\\b.+\\band` matched)."""
    if _RANGE.search(text):
        return True
    pos = 0
    while (m := _BETWEEN.search(text, pos)) is not None:
        line_end = text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        if _AND.search(text, m.end() + 1, line_end):
            return True
        pos = line_end  # every later "between" on this line sees less of it
    return False


def is_hedge(completion: str, answers: list[str], gold: str, gold_many: bool = False) -> bool:
    """True when `completion` (with its extracted `answers`) hedges against the single-answer `gold`.

    `gold_many`: the gold is itself several answers (`\\pm 3`, `2, 3`), so alternatives may be its answer."""
    region = answer_region(completion)
    if _EMPTY_BOX.search(region):
        return True
    if gold_many or _OR_INSIDE.search(gold) or _is_range(gold):
        return False
    return bool(_BOX_OR_BOX.search(region)) or any(_OR_INSIDE.search(a) or _is_range(a) for a in answers)
