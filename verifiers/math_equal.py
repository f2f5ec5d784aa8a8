"""Is a predicted answer tree equal to the gold one? Structure first, numbers next, SymPy last.

Rules (gold `g`, prediction `p`):
- Numbers: exact when both were written exactly (integers, fractions); when either was written
  as a decimal, `|p - g| <= rel_tol * |g|` (a *relative* tolerance: `\\frac{1}{2004!}` and
  `\\frac{1}{2006!}` differ, `3.14159265` matches `\\pi` and `3.14` does not). Rounding to a fixed
  number of decimals, as math-verify and the Qwen2.5-Math grader do, calls all tiny numbers equal.
- Percent (`percent=`): "either" (default) lets a number written with % stand for itself or for
  its hundredth (`28\\%` matches 28 and 0.28); "ratio" only its hundredth; "strip" only itself.
  A number written *without* % is only itself: 28 never matches 0.28 (the Qwen2.5-Math grader's
  `[g/100, g, g*100]` rule accepts it).
- Expressions: compared at random positive points at 30 digits (probabilistic identity testing),
  which is faster than `simplify` and does not give up on true identities; `simplify(g - p) == 0`
  only when no point evaluates. PRM800K's grader skips SymPy for anything with `^`; this does not.
- Relations: equations are equal when `lhs - rhs` of both are proportional (`2x = 4` is `x = 2`),
  inequalities when proportional by a positive factor with the same strictness; so
  `3x-y+13=0` and `3x+4y+14=0` differ. A bare value matches `x = value` both ways, and
  `x > 3` matches `(3, \\infty)`.
- Sets and "or"/comma lists: same size, one-to-one match in any order. Tuples and intervals:
  same delimiters (open vs closed), in order. Matrices: same shape, element by element.
- Text: casefolded, spaces and punctuation ignored. Multiple choice: the letter (`B`, `(B)`,
  `\\text{(B)}`, `(B) 12`).

`equal(..., allow_sympy=False)` raises `NeedsSympy` instead of touching SymPy: the parent
process decides the easy pairs itself and sends only the rest to time-limited workers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from rlvr.verifiers.math_parse import Bracket, Coll, Expr, Matrix, Num, Rel, Text, Union

PERCENT_MODES = ("either", "ratio", "strip")
_BARE_SYMBOL = re.compile(r"[a-zA-Z](?:_\{?[\w]+\}?)?|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|omega)")
_CONSTANT_LATEX = re.compile(r"(?:[-+]?\\infty|[^a-zA-Z]*|.*\\(?:pi|infty|sqrt|frac).*)")


class NeedsSympy(Exception):
    """Raised by `equal(..., allow_sympy=False)` when the pair needs SymPy."""


class Unparsable(Exception):
    """The LaTeX of one side could not be parsed."""

    def __init__(self, latex: str, reason: str):
        super().__init__(f"cannot parse {latex!r}: {reason}")
        self.latex = latex


@dataclass(frozen=True)
class Rules:
    rel_tol: float = 1e-6
    percent: str = "either"
    allow_sympy: bool = True


def equal(g, p, rules: Rules) -> bool:
    """True when prediction tree `p` denotes the gold tree `g` (see the module docstring)."""
    if isinstance(g, Coll) and len(g.items) == 1:
        g = g.items[0]
    if isinstance(p, Coll) and len(p.items) == 1:
        p = p.items[0]
    if g == p and not _has_pct(g):
        return True
    if isinstance(g, Text) or isinstance(p, Text):
        return isinstance(g, Text) and isinstance(p, Text) and g.text == p.text
    if isinstance(g, Coll):
        return isinstance(p, Coll) and _matching(g.items, p.items, rules)
    if isinstance(g, Union):
        return isinstance(p, Union) and _matching(g.parts, p.parts, rules)
    if isinstance(g, Bracket):
        if isinstance(p, Rel):
            p = rel_as_interval(p)
        return (isinstance(p, Bracket) and (p.open, p.close) == (g.open, g.close)
                and len(p.items) == len(g.items) and all(equal(a, b, rules) for a, b in zip(g.items, p.items)))
    if isinstance(g, Matrix):
        return (isinstance(p, Matrix) and [len(r) for r in g.rows] == [len(r) for r in p.rows]
                and all(equal(a, b, rules) for ra, rb in zip(g.rows, p.rows) for a, b in zip(ra, rb)))
    if isinstance(g, Rel):
        if isinstance(p, Rel):
            return _rel_equal(g, p, rules)
        if g.ops == ("=",) and _is_bare_symbol(g.sides[0]):  # gold "x = 3", predicted "3"
            return equal(g.sides[1], p, rules)
        if isinstance(p, Bracket):
            interval = rel_as_interval(g)
            return interval is not None and equal(interval, p, rules)
        return False
    if isinstance(p, Rel):  # gold value, predicted "x = value" (or "2 + 3 = 5": the last side)
        return all(op == "=" for op in p.ops) and equal(g, p.sides[-1], rules)
    if isinstance(g, Num) and isinstance(p, Num):
        return _num_equal(g, p, rules)
    if isinstance(g, (Num, Expr)) and isinstance(p, (Num, Expr)):
        if not rules.allow_sympy:
            raise NeedsSympy
        return _sympy_equal(g, p, rules)
    return False


def _has_pct(node) -> bool:
    return isinstance(node, Num) and node.pct


def _matching(gold_items, pred_items, rules: Rules) -> bool:
    """A one-to-one pairing of equal items exists (greedy; fine for the small sets of answers)."""
    if len(gold_items) != len(pred_items):
        return False
    left = list(pred_items)
    for g in gold_items:
        for i, p in enumerate(left):
            if equal(g, p, rules):
                del left[i]
                break
        else:
            return False
    return True


# ------------------------------------------------------------------------------------------- numbers

def _num_values(n: Num, percent: str) -> tuple[Fraction, ...]:
    if not n.pct or percent == "strip":
        return (n.value,)
    if percent == "ratio":
        return (n.value / 100,)
    return (n.value, n.value / 100)


def close(gold: Fraction | float, pred: Fraction | float, approx: bool, rel_tol: float) -> bool:
    if not approx:
        return gold == pred
    return abs(pred - gold) <= rel_tol * abs(gold) if gold != 0 else abs(pred) <= rel_tol


def _num_equal(g: Num, p: Num, rules: Rules) -> bool:
    approx = g.approx or p.approx
    return any(close(gv, pv, approx, rules.rel_tol)
               for gv in _num_values(g, rules.percent) for pv in _num_values(p, rules.percent))


# ------------------------------------------------------------------------------------------- relations

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


def _is_bare_symbol(node) -> bool:
    return isinstance(node, Expr) and bool(_BARE_SYMBOL.fullmatch(node.latex.strip()))


def _is_constant(node) -> bool:
    return isinstance(node, Num) or (isinstance(node, Expr) and bool(_CONSTANT_LATEX.fullmatch(node.latex.strip())))


def rel_as_interval(rel: Rel) -> Bracket | None:
    """`x > 3` -> (3, oo); `1 < x <= 3` -> (1, 3]; None when `rel` is not one variable against constants."""
    inf, neg_inf = Expr("\\infty"), Expr("-\\infty")
    if len(rel.sides) == 2:
        lhs, rhs = rel.sides
        op = rel.ops[0]
        if _is_bare_symbol(rhs) and _is_constant(lhs):
            lhs, rhs, op = rhs, lhs, _FLIP[op]
        if not (_is_bare_symbol(lhs) and _is_constant(rhs)) or op in ("=", "!="):
            return None
        if op in ("<", "<="):
            return Bracket("(", ")" if op == "<" else "]", (neg_inf, rhs))
        return Bracket("(" if op == ">" else "[", ")", (rhs, inf))
    if len(rel.sides) == 3 and _is_bare_symbol(rel.sides[1]) and _is_constant(rel.sides[0]) and _is_constant(rel.sides[2]):
        a, b = rel.ops
        if a in ("<", "<=") and b in ("<", "<="):
            return Bracket("(" if a == "<" else "[", ")" if b == "<" else "]", (rel.sides[0], rel.sides[2]))
        if a in (">", ">=") and b in (">", ">="):
            return Bracket("(" if b == ">" else "[", ")" if a == ">" else "]", (rel.sides[2], rel.sides[0]))
    return None


def _rel_equal(g: Rel, p: Rel, rules: Rules) -> bool:
    if len(g.sides) == 2 and len(p.sides) == 2:
        flipped = Rel((_FLIP[p.ops[0]],), (p.sides[1], p.sides[0]))
        for cand in (p, flipped):
            if cand.ops == g.ops and equal(g.sides[0], cand.sides[0], rules) and equal(g.sides[1], cand.sides[1], rules):
                return True
        if _kind(g.ops[0]) != _kind(p.ops[0]):
            return False
        if not rules.allow_sympy:
            raise NeedsSympy
        return _relations_proportional(g, p, rules)
    gi, pi = rel_as_interval(g), rel_as_interval(p)
    if gi is not None and pi is not None:
        return equal(gi, pi, rules)
    return (len(g.sides) == len(p.sides) and g.ops == p.ops
            and all(equal(a, b, rules) for a, b in zip(g.sides, p.sides)))


def _kind(op: str) -> str:
    return {"=": "eq", "!=": "ne", "<": "lt", ">": "lt", "<=": "le", ">=": "le"}[op]


# ------------------------------------------------------------------------------------------- sympy

_POINTS = 3  # agreeing random points needed to call two expressions equal
_DIGITS = 30


@lru_cache(maxsize=4096)
def to_sympy(latex: str):
    """SymPy object for a LaTeX string (cached: gold answers repeat G times per prompt)."""
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig, NormalizationConfig, latex2sympy
    import sympy

    try:
        expr = latex2sympy(
            latex,
            normalization_config=NormalizationConfig(basic_latex=True, units=False, malformed_operators=False,
                                                     nits=False, boxed="none", equations=False),
            conversion_config=ConversionConfig(),
        )
    except Exception as error:  # the ANTLR parser raises plain Exceptions on bad input
        return Unparsable(latex, str(error).splitlines()[0][:200] if str(error) else type(error).__name__)
    if isinstance(expr, sympy.Basic):
        imaginary = {s: sympy.I for s in expr.free_symbols if getattr(s, "name", "") == "i"}
        if imaginary:
            expr = expr.subs(imaginary)
    return expr


def node_to_sympy(node):
    import sympy

    if isinstance(node, Num):
        return sympy.Rational(node.value.numerator, node.value.denominator)
    result = to_sympy(node.latex)
    if isinstance(result, Unparsable):
        raise result
    return result


def _sympy_equal(g, p, rules: Rules) -> bool:
    import sympy

    approx = (isinstance(g, Num) and g.approx) or (isinstance(p, Num) and p.approx)
    gs, ps = node_to_sympy(g), node_to_sympy(p)
    if not isinstance(gs, sympy.Expr) or not isinstance(ps, sympy.Expr):
        return _structural_sympy_equal(gs, ps, rules)
    approx = approx or bool(gs.atoms(sympy.Float)) or bool(ps.atoms(sympy.Float))
    tol = rules.rel_tol if approx else 1e-20
    g_values = [sympy.Rational(v.numerator, v.denominator) for v in _num_values(g, rules.percent)] if isinstance(g, Num) else [gs]
    p_values = [sympy.Rational(v.numerator, v.denominator) for v in _num_values(p, rules.percent)] if isinstance(p, Num) else [ps]
    candidates = [(a, b) for a in g_values for b in p_values]
    return any(_expr_equal(a, b, tol) for a, b in candidates)


def _structural_sympy_equal(gs, ps, rules: Rules) -> bool:
    import sympy

    if isinstance(gs, sympy.MatrixBase) and isinstance(ps, sympy.MatrixBase):
        return gs.shape == ps.shape and all(_expr_equal(a, b, rules.rel_tol) for a, b in zip(gs, ps))
    try:
        return bool(gs == ps)
    except Exception:
        return False


def _expr_equal(gs, ps, tol: float) -> bool:
    """Equal at 30 digits, at random points when there are free symbols.

    Values are compared as mpmath numbers, whose exponent range is unbounded: `1/2004!` and
    `1/2006!` both underflow a Python float to 0.0, which is how fixed-precision graders call them equal."""
    import sympy

    if gs == ps:
        return True
    if gs.has(sympy.oo, -sympy.oo, sympy.zoo) or ps.has(sympy.oo, -sympy.oo, sympy.zoo):
        return False
    symbols = sorted(gs.free_symbols | ps.free_symbols, key=lambda s: s.name)
    agreeing = 0
    for point in _points(symbols):
        gv, pv = _value(gs, point), _value(ps, point)
        if gv is None or pv is None:
            continue  # not a number at this point (a pole, a symbol left over): try another
        if abs(pv - gv) > (tol * abs(gv) if gv != 0 else tol):
            return False
        agreeing += 1
        if agreeing >= (_POINTS if symbols else 1):
            return True
    try:  # no point evaluated: fall back to bounded symbolic simplification (the pool's limit applies)
        return sympy.simplify(gs - ps) == 0
    except Exception:
        return False


def _points(symbols):
    """Deterministic pseudo-random positive points (positive: sqrt and log stay real)."""
    import sympy

    rng = random.Random(0)
    for _ in range(3 * _POINTS if symbols else 1):
        yield {s: sympy.Float(rng.randint(300, 2700) / 1000 + rng.random() * 1e-3, _DIGITS) for s in symbols}


def _value(expr, point):
    """`expr` at `point` as an mpmath complex of 30 digits, or None when it is not a finite number."""
    import mpmath
    import sympy

    try:
        v = expr.evalf(_DIGITS, subs=point) if point else expr.evalf(_DIGITS)
        re_part, im_part = v.as_real_imag()
        if not (re_part.is_number and im_part.is_number):
            return None
        re_f, im_f = sympy.Float(re_part, _DIGITS), sympy.Float(im_part, _DIGITS)
        z = mpmath.mpc(re_f._mpf_, im_f._mpf_)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if not mpmath.isfinite(z.real) or not mpmath.isfinite(z.imag):
        return None
    return z


def _relations_proportional(g: Rel, p: Rel, rules: Rules) -> bool:
    """`lhs - rhs` of gold and prediction are proportional (positively for inequalities)."""
    dg, strict_g = _difference(g)
    dp, strict_p = _difference(p)
    if strict_g != strict_p:
        return False
    symbols = sorted(dg.free_symbols | dp.free_symbols, key=lambda s: s.name)
    if not symbols:
        return _expr_equal(dg, dp, rules.rel_tol)
    ratios = []
    for point in _points(symbols):
        a, b = _value(dg, point), _value(dp, point)
        if a is None or b is None or abs(b) < 1e-12:
            continue
        ratios.append(a / b)
        if len(ratios) >= _POINTS:
            break
    if len(ratios) < _POINTS or abs(ratios[0]) < 1e-12:
        return False
    first = ratios[0]
    if any(abs(r - first) > 1e-9 * abs(first) for r in ratios[1:]):
        return False
    return g.ops[0] in ("=", "!=") or (first.real > 0 and abs(first.imag) < 1e-12 * abs(first))


def _difference(rel: Rel):
    """(d, strict) such that the relation reads `d op 0` with op in {=, !=, >, >=}."""
    lhs, rhs = (node_to_sympy(s) for s in rel.sides)
    op = rel.ops[0]
    if op in ("<", "<="):
        return rhs - lhs, op == "<"
    return lhs - rhs, op in (">", "!=")
