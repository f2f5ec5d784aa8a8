"""Reading a judge's verdict strictly: a reply that is not exactly one of the labels is an error, never a score.

A judge's reply is text a model wrote about text a policy wrote; a lenient reader (the first label found anywhere,
"correct" inside "incorrect", a score guessed from "mostly right") turns the judge's confusion into reward. Here the
first non-empty line, with surrounding whitespace, `*`, quotes and one trailing `.` removed, and an optional
`Verdict:` (or `Answer:`, `Grade:`) prefix, must equal one label (case-insensitive). What follows that line is
ignored (a judge that explains itself after the verdict is still read), except that the reply's other lines may
not hold a different label alone: "CORRECT\\n...\\nINCORRECT" is an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_PREFIX = re.compile(r"^(?:final\s+)?(?:verdict|answer|grade|judg(?:e)?ment)\s*[:\-]\s*", re.IGNORECASE)
_STRIP = " \t*_`\"'"


class VerdictError(ValueError):
    """A reply that is not a verdict; the message quotes (the start of) the reply."""


def _clean(line: str) -> str:
    line = line.strip(_STRIP)
    line = _PREFIX.sub("", line).strip(_STRIP)
    if line.endswith("."):
        line = line[:-1]
    return line.strip(_STRIP).upper()


def parse_verdict(reply: str, labels: Mapping[str, float]) -> tuple[str, float]:
    """(label, score) for a reply whose first non-empty line is exactly one of `labels`; VerdictError otherwise."""
    if not isinstance(reply, str):
        raise VerdictError(f"the judge's reply is not text: {reply!r}")
    upper = {label.upper(): (label, score) for label, score in labels.items()}
    lines = [line for line in reply.splitlines() if line.strip(_STRIP)]
    if not lines:
        raise VerdictError("the judge's reply is empty")
    first = _clean(lines[0])
    if first not in upper:
        raise VerdictError(f"the judge's reply is not one of {', '.join(labels)}: {reply[:200]!r}")
    others = {_clean(line) for line in lines[1:]} & set(upper)
    if others - {first}:
        raise VerdictError(f"the judge's reply names two verdicts: {reply[:200]!r}")
    return upper[first]
