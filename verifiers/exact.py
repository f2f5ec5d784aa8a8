"""Exact-answer reward: the extracted answer equals `record["answer"]` after normalisation.

Numbers compare as numbers ("1,000" == "1000", "2.50" == "2.5", "−3" == "-3"): integers exactly,
decimals within `rel_tol`. A number is written in ASCII digits: Python's `\\d` and `int()` also read
full-width (１４１) and other scripts' digits (١٤١), which `rlvr audit` found paid as the gold, so those compare
as text. Anything else compares as casefolded text with whitespace collapsed and a trailing period dropped.
Bad model text is never an exception: it is UNPARSABLE or INCORRECT. A record without a usable answer is an
ERROR (the data is at fault, not the model).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rlvr.verifiers.extract import extract_answer_tag, extract_last_number
from rlvr.errors import ConfigError
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

EXTRACTORS = {
    "answer_tag": extract_answer_tag,
    "last_number": extract_last_number,
    # the instruct prompts' rule: the last <answer> block when there is one, else the last number of the text
    "answer_tag_or_last_number": lambda text: extract_answer_tag(text) or extract_last_number(text),
    "full": lambda text: text.strip(),
}

# re.ASCII: `\d` is 0-9 only (the module docstring says why)
_INT = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?\.\d+", re.ASCII)


def normalize(text: str) -> str:
    """Strip, casefold, collapse runs of whitespace, drop one trailing period."""
    text = " ".join(text.strip().casefold().split())
    return text[:-1].rstrip() if text.endswith(".") else text


def parse_number(text: str) -> int | float | None:
    """An int (thousands commas allowed) or a decimal float; None when `text` is not a plain number, or is an int
    past int()'s digit limit (4,300 digits: a completion's, never a gold answer; it then compares as text)."""
    text = text.replace("\u2212", "-")
    if _INT.fullmatch(text):
        try:
            return int(text.replace(",", ""))
        except ValueError:  # the digit limit: raised, it failed the whole batch the completion came in
            return None
    if _DECIMAL.fullmatch(text):
        return float(text.replace(",", ""))
    return None


def answers_match(got: str, expected: str | int | float, rel_tol: float = 1e-9) -> bool:
    """True when `got` (model text) equals `expected` numerically or as normalised text."""
    got_norm = normalize(got)
    if isinstance(expected, (int, float)):
        expected_num, expected_norm = expected, normalize(str(expected))
    else:
        expected_norm = normalize(expected)
        expected_num = parse_number(expected_norm)
    got_num = parse_number(got_norm)
    if got_num is not None and expected_num is not None:
        if isinstance(got_num, int) and isinstance(expected_num, int):
            return got_num == expected_num
        return math.isclose(got_num, expected_num, rel_tol=rel_tol, abs_tol=0.0)
    return got_norm == expected_norm


@register_verifier("exact")
class ExactVerifier:
    """Reward 1.0 when the extracted answer matches `record["answer"]`, else 0.0."""

    name = "exact"

    def __init__(self, extract: str = "answer_tag", rel_tol: float = 1e-9):
        if extract not in EXTRACTORS:
            raise ConfigError(f"exact verifier: 'extract' must be one of {', '.join(EXTRACTORS)}, got {extract!r}")
        if not (isinstance(rel_tol, (int, float)) and math.isfinite(rel_tol) and rel_tol >= 0):
            raise ConfigError(f"exact verifier: 'rel_tol' must be a finite number >= 0, got {rel_tol!r}")
        self.extract = extract
        self.rel_tol = float(rel_tol)

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        if "answer" not in record:
            return VerifyResult(0.0, Status.ERROR, {"error": "record has no 'answer' field"})
        expected = record["answer"]
        if isinstance(expected, bool) or not isinstance(expected, (str, int, float)):
            return VerifyResult(
                0.0, Status.ERROR,
                {"error": f"record 'answer' must be a string or number, got {type(expected).__name__}"},
            )
        extracted = EXTRACTORS[self.extract](completion)
        details = {"extracted": extracted, "expected": expected}
        if not extracted:
            return VerifyResult(0.0, Status.UNPARSABLE, {**details, "reason": f"no answer found ({self.extract})"})
        if answers_match(extracted, expected, self.rel_tol):
            return VerifyResult(1.0, Status.CORRECT, details)
        return VerifyResult(0.0, Status.INCORRECT, details)
