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
_COMMAND = re.compile(r"\\[a-zA-Z]+")
_DECIMAL_IN_LATEX = re.compile(r"(?<![\d.])\d*\.(\d+)")
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
    rel_tol: float = 0.0
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
    if isinstance(g, Coll) and g.comma_decimal is not None and isinstance(p, Num) and p.approx:
        return equal(g.comma_decimal, p, rules)  # gold "1,22", predicted 1.22
    if isinstance(p, Coll) and p.comma_decimal is not None and isinstance(g, Num) and g.approx:
        return equal(g, p.comma_decimal, rules)  # gold 1000.99, predicted "1000,99"
    if isinstance(p, Rel) and not isinstance(g, Rel) and len(p.sides) == 2 and p.ops == ("=",) and _is_label(p.sides[0]):
        p = p.sides[1]  # predicted "(x, y) = (5, 8)" for gold (5, 8)
    if isinstance(g, Coll) and isinstance(p, Bracket) and p.open == "(" and _named_values(g) is not None:
        return equal(Bracket("(", ")", _named_values(g)), p, rules)  # gold "p=5, q=2", predicted (5, 2)
    if isinstance(g, Coll):
        return isinstance(p, Coll) and _matching(g.items, p.items, rules)
    if isinstance(g, Union):
        return isinstance(p, Union) and _matching(g.parts, p.parts, rules)
    if isinstance(g, Bracket):  # a predicted relation does not answer an interval gold (the form asked for; math-verify too)
        return (isinstance(p, Bracket) and (p.open, p.close) == (g.open, g.close)
                and len(p.items) == len(g.items) and all(equal(a, b, rules) for a, b in zip(g.items, p.items)))
    if isinstance(g, Matrix) and isinstance(p, Expr):  # `A + B` or `I \cdot I` written out: SymPy evaluates it
        if not rules.allow_sympy:
            raise NeedsSympy
        return _matrix_expr_equal(g, p, rules)
    if isinstance(g, Matrix):
        return (isinstance(p, Matrix) and [len(r) for r in g.rows] == [len(r) for r in p.rows]
                and all(equal(a, b, rules) for ra, rb in zip(g.rows, p.rows) for a, b in zip(ra, rb)))
    if isinstance(g, Rel):
        if isinstance(p, Rel):
            return _rel_equal(g, p, rules)
        if all(op == "=" for op in g.ops) and (_is_bare_symbol(g.sides[0]) or _is_label(g.sides[0]) or len(g.sides) > 2):
            return equal(g.sides[-1], p, rules)  # gold "x = 3", "f(x) = 3", "(p, q) = (3, 2)": predicted "3"
        if isinstance(p, (Bracket, Union)):
            interval = _abs_chain_as_union(g) or rel_as_interval(g)
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
    gold_items, pred_items = _distinct(gold_items), _distinct(pred_items)  # a set names each member once
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


def _distinct(items) -> list:
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


# ------------------------------------------------------------------------------------------- numbers

def _num_values(n: Num, percent: str) -> tuple[tuple[Fraction, int], ...]:
    """(value, decimal places) pairs a number may stand for; its hundredth has two more places."""
    if not n.pct or percent == "strip":
        return ((n.value, n.places),)
    if percent == "ratio":
        return ((n.value / 100, n.places + 2),)
    return ((n.value, n.places), (n.value / 100, n.places + 2))


def numbers_equal(g: Fraction, g_approx: bool, g_places: int, p: Fraction, p_approx: bool, p_places: int,
                  rel_tol: float = 0.0) -> bool:
    """The number rule of the module docstring: exact unless a side is a decimal, then its stated precision."""
    if g == p:
        return True
    if not (g_approx or p_approx):
        return False  # two exact values: no tolerance at all
    if g_approx and p_approx and p_places < g_places:
        return False  # 0.3 does not stand for 0.33: the prediction is less precise than the gold
    if rel_tol and abs(p - g) <= rel_tol * abs(g):
        return True
    places = g_places if g_approx else p_places  # the gold's stated precision binds when it has one
    if not g_approx and _significant_digits(p, p_places) < 2:
        return False  # 0.3 for 1/3: one significant digit says too little to earn credit
    return abs(p - g) * 2 * Fraction(10) ** places <= 1  # within half a unit in the last stated place


def _significant_digits(value: Fraction, places: int) -> int:
    digits = abs(value) * Fraction(10) ** places
    return len(str(round(digits))) if digits >= 1 else 0


def _num_equal(g: Num, p: Num, rules: Rules) -> bool:
    return any(numbers_equal(gv, g.approx, gp, pv, p.approx, pp, rules.rel_tol)
               for gv, gp in _num_values(g, rules.percent) for pv, pp in _num_values(p, rules.percent))


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
    if len(rel.sides) == 3 and (_is_bare_symbol(rel.sides[1]) or _is_label(rel.sides[1]) and "|" not in rel.sides[1].latex) and _is_constant(rel.sides[0]) and _is_constant(rel.sides[2]):
        a, b = rel.ops
        if a in ("<", "<=") and b in ("<", "<="):
            return Bracket("(" if a == "<" else "[", ")" if b == "<" else "]", (rel.sides[0], rel.sides[2]))
        if a in (">", ">=") and b in (">", ">="):
            return Bracket("(" if b == ">" else "[", ")" if a == ">" else "]", (rel.sides[2], rel.sides[0]))
    return None


def _abs_chain_as_union(rel: Rel) -> Union | None:
    """`1 <= |z| <= 3/2` -> [-3/2, -1] U [1, 3/2] (for plain-number bounds 0 < a < b)."""
    if len(rel.sides) != 3 or rel.ops[0] not in ("<", "<=") or rel.ops[1] not in ("<", "<="):
        return None
    lo, mid, hi = rel.sides
    if not (isinstance(lo, Num) and isinstance(hi, Num) and 0 < lo.value < hi.value and isinstance(mid, Expr)):
        return None
    m = re.fullmatch(r"\|\s*(.+?)\s*\|", mid.latex.strip())
    if not m or not _BARE_SYMBOL.fullmatch(m.group(1)):
        return None
    lo_close, hi_close = ("[" if rel.ops[0] == "<=" else "("), ("]" if rel.ops[1] == "<=" else ")")
    neg = Bracket({"]": "[", ")": "("}[hi_close], {"[": "]", "(": ")"}[lo_close],
                  (Num(-hi.value, hi.approx, places=hi.places), Num(-lo.value, lo.approx, places=lo.places)))
    return Union((neg, Bracket(lo_close, hi_close, (lo, hi))))


def _is_label(node) -> bool:
    """The left side of a gold `name = value`: no digit in it (`f(x)`, `|AB|`, `(p, q)`, `S_{ABC}:S`)."""
    if isinstance(node, Expr):
        bare = _COMMAND.sub("", re.sub(r"_\s*(?:\{[^{}]*\}|\w)", "", node.latex))  # `V_{1}` is a name
        return bool(re.search(r"[a-zA-Z]", bare)) and not re.search(r"\d", bare)
    if isinstance(node, Bracket):
        return bool(node.items) and all(_is_label(item) for item in node.items)
    return False


def _named_values(coll: Coll):
    """The values of `p=5, q=2` (distinct bare names, in order), else None."""
    items = coll.items
    if len(items) < 2 or not all(isinstance(i, Rel) and i.ops == ("=",) and _is_bare_symbol(i.sides[0]) for i in items):
        return None
    names = [i.sides[0].latex.strip() for i in items]
    return tuple(i.sides[1] for i in items) if len(set(names)) == len(names) else None


def _chain_ends(rel: Rel) -> Rel:
    """`x = 5+5+1 = 7 = 11` answers `x = 11`: an equality chain counts by its first and last member."""
    if len(rel.sides) > 2 and all(op == "=" for op in rel.ops):
        return Rel(("=",), (rel.sides[0], rel.sides[-1]))
    return rel


def _matrix_expr_equal(g: Matrix, p: Expr, rules: Rules) -> bool:
    import sympy

    ps = node_to_sympy(p)
    if isinstance(ps, sympy.MatrixExpr):
        ps = ps.doit()  # latex2sympy leaves `A + B`, `A B` of explicit matrices unevaluated
    if not isinstance(ps, sympy.MatrixBase) or ps.shape != (len(g.rows), len(g.rows[0])):
        return False
    if not all(isinstance(c, (Num, Expr)) for row in g.rows for c in row):
        return False
    return all(_expr_equal(node_to_sympy(c), _stated_places(c), sympy.simplify(v), None, rules.rel_tol)
               for row, prow in zip(g.rows, ps.tolist()) for c, v in zip(row, prow))


def _rel_equal(g: Rel, p: Rel, rules: Rules) -> bool:
    g, p = _chain_ends(g), _chain_ends(p)
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


def _stated_places(node) -> int | None:
    """Decimal places of the least precise decimal written in `node`; None when it has no decimal."""
    if isinstance(node, Num):
        return node.places if node.approx else None
    found = [len(m.group(1)) for m in _DECIMAL_IN_LATEX.finditer(node.latex)]
    return min(found) if found else None


def _sympy_equal(g, p, rules: Rules) -> bool:
    import sympy

    gs, ps = node_to_sympy(g), node_to_sympy(p)
    if not isinstance(gs, sympy.Expr) or not isinstance(ps, sympy.Expr):
        return _structural_sympy_equal(gs, ps, rules)
    g_places, p_places = _stated_places(g), _stated_places(p)
    if isinstance(p, Num) and p.approx and g_places is None and _significant_digits(p.value, p.places) < 2:
        return False  # as in numbers_equal: 0.3 does not stand for an exact gold
    g_values = ([(sympy.Rational(v.numerator, v.denominator), places if g.approx else None)
                 for v, places in _num_values(g, rules.percent)]
                if isinstance(g, Num) else [(gs, g_places)])
    p_values = ([(sympy.Rational(v.numerator, v.denominator), places if p.approx else None)
                 for v, places in _num_values(p, rules.percent)]
                if isinstance(p, Num) else [(ps, p_places)])
    return any(_expr_equal(a, ap, b, bp, rules.rel_tol) for a, ap in g_values for b, bp in p_values)


def _structural_sympy_equal(gs, ps, rules: Rules) -> bool:
    import sympy

    if isinstance(gs, sympy.MatrixBase) and isinstance(ps, sympy.MatrixBase):
        return gs.shape == ps.shape and all(_expr_equal(a, None, b, None, rules.rel_tol) for a, b in zip(gs, ps))
    try:
        return bool(gs == ps)
    except Exception:
        return False


def _expr_equal(gs, g_places: int | None, ps, p_places: int | None, rel_tol: float = 0.0) -> bool:
    """The rule of the module docstring for two SymPy expressions (places: the stated precision, None = exact).

    Values are mpmath numbers at `_DIGITS` digits under `mpmath.workdps`, whose exponent range is
    unbounded: `1/2004!` and `1/2006!` both underflow a Python float to 0.0, which is how
    fixed-precision graders call them equal."""
    import mpmath
    import sympy

    if gs == ps:
        return True
    if gs.has(sympy.oo, -sympy.oo, sympy.zoo) or ps.has(sympy.oo, -sympy.oo, sympy.zoo):
        return False
    symbols = sorted(gs.free_symbols | ps.free_symbols, key=lambda s: s.name)
    approx = g_places is not None or p_places is not None
    if approx and g_places is not None and p_places is not None and p_places < g_places:
        return False
    with mpmath.workdps(_DIGITS + 10):
        if approx:
            half_unit = mpmath.mpf(10) ** -(g_places if g_places is not None else p_places) / 2
        agreeing = 0
        for point in _points(symbols):
            gv, pv = _value(gs, point), _value(ps, point)
            if gv is None or pv is None:
                continue  # not a number at this point (a pole, a symbol left over): try another
            diff = abs(pv - gv)
            if approx:
                ok = diff <= half_unit or (rel_tol and diff <= rel_tol * abs(gv))
            else:  # exact: only the rounding noise of 30-digit arithmetic is forgiven here, then proved below
                ok = diff <= mpmath.mpf(10) ** -(_DIGITS - 8) * max(abs(gv), 1)
            if not ok:
                return False
            agreeing += 1
            if agreeing >= (_POINTS if symbols else 1):
                break
    if approx:
        return agreeing > 0
    if agreeing == 0 or not symbols:
        return _proved_zero(gs - ps)
    return True  # an identity in the symbols, by agreement at random points (see the module docstring)


def _proved_zero(d) -> bool:
    """SymPy shows `d == 0` exactly (expand, radsimp, simplify in turn); unproved counts as unequal."""
    import sympy

    for rewrite in (sympy.expand, sympy.radsimp, sympy.simplify):  # never nsimplify: it rounds
        try:
            r = rewrite(d)
        except Exception:
            continue
        if r == 0:
            return True
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
        return _expr_equal(dg, None, dp, None, rules.rel_tol)
    import mpmath

    ratios = []
    with mpmath.workdps(_DIGITS + 10):
        return _ratios_agree(dg, dp, symbols, g.ops[0])


def _ratios_agree(dg, dp, symbols, op: str) -> bool:
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
    return op in ("=", "!=") or (first.real > 0 and abs(first.imag) < 1e-12 * abs(first))


def _difference(rel: Rel):
    """(d, strict) such that the relation reads `d op 0` with op in {=, !=, >, >=}."""
    lhs, rhs = (node_to_sympy(s) for s in rel.sides)
    op = rel.ops[0]
    if op in ("<", "<="):
        return rhs - lhs, op == "<"
    return lhs - rhs, op in (">", "!=")
