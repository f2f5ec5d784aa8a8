"""The part of math verification that may run long: parsing with SymPy and comparing.

Runs inside `TimeLimitPool` workers (never in the caller's process, except with `workers=0`).
Importing this module imports SymPy and the LaTeX parser and parses one expression, so a worker
that preloads it says "ready" only once warm, and its first item is not charged the warm-up.
"""

from __future__ import annotations

import sys

import sympy  # noqa: F401 - preloaded for the workers
from latex2sympy2_extended.latex2sympy2 import latex2sympy

import rlvr.verifiers.math.symbolic  # noqa: F401 - preloaded: equal.py imports it on first SymPy use
from rlvr.verifiers.math.equal import equal
from rlvr.verifiers.math.rules import Rules, Unparsable
from rlvr.verifiers.math.parse import Expr, parse, parse_answers

latex2sympy(r"\frac{x^2+1}{2}\sqrt{3}")  # warm the ANTLR parser before the worker says "ready"
_main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
if getattr(_main_spec, "name", "") == "rlvr.verifiers.pool" and sys.getrecursionlimit() < 20000:
    sys.setrecursionlimit(20000)  # the ANTLR parser recurses once per term: a 2,000-term sum needs ~8,000 frames


def check(gold_norm: str, pred_norms: tuple[str, ...], rules: Rules) -> tuple[str, str]:
    """(status, reason) for one pair of normalised answers; status in correct/incorrect/unparsable/error."""
    try:
        gold = parse(gold_norm)
        pred = parse_answers(pred_norms)
        return ("correct", "") if equal(gold, pred, rules) else ("incorrect", "")
    except Unparsable as error:
        if error.latex in expr_leaves(gold_norm):
            return "error", f"gold answer: {error}"
        return "unparsable", str(error)
    except RecursionError:
        return "unparsable", "answer nested too deeply to parse"
    except Exception as error:  # SymPy (or this code) failed: reported as `error`, never scored `incorrect`
        return "error", f"{type(error).__name__}: {error}"[:500]


def expr_leaves(norm: str) -> set[str]:
    """The LaTeX strings of every `Expr` leaf in the tree of `norm`."""
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, Expr):
            found.add(node.latex)
        for field in ("items", "sides", "parts"):
            for child in getattr(node, field, ()):
                walk(child)
        for row in getattr(node, "rows", ()):
            for child in row:
                walk(child)

    try:
        walk(parse(norm))
    except RecursionError:
        pass
    return found
