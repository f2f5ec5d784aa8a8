"""Pulling the answer out of model text, shared by every verifier that needs it.

The LAST `<answer>` block counts: models often restate or draft an answer before the final one.
"""

from __future__ import annotations

import re

OPEN, CLOSE = "<answer>", "</answer>"

# A number: optional sign (not when glued to a preceding word or digit, so "5-3" yields 3),
# digits with optional `,` thousands groups, optional decimals. `−` is the unicode minus.
# Scientific notation is no number here: `3e5` yields neither 3 nor 5 (the number is atomic, so a failed
# `(?![eE][-+]?\d)` does not back off to "3", and digits right after `3e` / `3e-` never start one).
_NUMBER = re.compile(r"(?:(?<![\w)\]])[+\-\u2212])?(?<!\d[eE])(?<!\d[eE][-+])"
                     r"(?>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?)(?![eE][-+]?\d)")


def extract_answer_tag(text: str) -> str | None:
    """Content of the last `<answer>...</answer>` block, stripped; None when there is none.

    The innermost opening tag before the last closing tag is used, so `<answer>a<answer>b</answer>` gives "b".
    """
    end = text.rfind(CLOSE)
    if end < 0:
        return None
    start = text.rfind(OPEN, 0, end)
    if start < 0:
        return None
    return text[start + len(OPEN): end].strip()


def extract_last_number(text: str) -> str | None:
    """The last number written in `text` (as text, e.g. "-1,234.5"); None when there is none."""
    matches = _NUMBER.findall(text)
    return matches[-1] if matches else None
