"""What equal.py (structure and numbers) and symbolic.py (the SymPy side) share: the comparison rules,
the parse failure, and the number helpers. A module of its own so that symbolic.py need not import
equal.py, which imports symbolic.py where SymPy work runs: neither imports the other in a loop."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from rlvr.verifiers.math.parse import Num


class Unparsable(Exception):
    """The LaTeX of one side could not be parsed."""

    def __init__(self, latex: str, reason: str):
        super().__init__(f"cannot parse {latex!r}: {reason}")
        self.latex = latex


class SympyFailure(Exception):
    """SymPy raised where a verdict needed it: the item is `error` (a verifier failure), never `incorrect`."""


@dataclass(frozen=True)
class Rules:
    rel_tol: float = 0.0
    percent: str = "either"
    allow_sympy: bool = True
    min_digits: int = 3  # significant digits a decimal needs to stand for an irrational gold (symbolic.py)


def _num_values(n: Num, percent: str) -> tuple[tuple[Fraction, int], ...]:
    """(value, decimal places) pairs a number may stand for; its hundredth has two more places."""
    if not n.pct or percent == "strip":
        return ((n.value, n.places),)
    if percent == "ratio":
        return ((n.value / 100, n.places + 2),)
    return ((n.value, n.places), (n.value / 100, n.places + 2))


def _significant_digits(value: Fraction, places: int) -> int:
    digits = abs(value) * Fraction(10) ** places
    return len(str(round(digits))) if digits >= 1 else 0
