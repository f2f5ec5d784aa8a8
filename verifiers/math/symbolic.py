"""The SymPy side of equal.py's rules (see its docstring): parsing LaTeX, exact proofs, random points.

Runs only where SymPy work is allowed: in `TimeLimitPool` workers (or the caller with `workers=0`).
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from rlvr.verifiers.math.rules import Rules, Unparsable, _num_values, _significant_digits
from rlvr.verifiers.math.parse import Expr, Matrix, Num, Rel

_DECIMAL_IN_LATEX = re.compile(r"(?<![\d.])\d*\.(\d+)")


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


def sympy_equal(g, p, rules: Rules) -> bool:
    import sympy

    gs, ps = node_to_sympy(g), node_to_sympy(p)
    if not isinstance(gs, sympy.Expr) or not isinstance(ps, sympy.Expr):
        return _structural_sympy_equal(gs, ps, rules)
    g_places, p_places = _stated_places(g), _stated_places(p)
    if isinstance(p, Num) and p.approx and g_places is None and _significant_digits(p.value, p.places) < rules.min_digits:
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
    if approx:
        half_unit = mpmath.mpf(10) ** -(g_places if g_places is not None else p_places) / 2
        return _agreeing_points(gs, ps, symbols, _DIGITS,
                                lambda gv, diff: diff <= half_unit or bool(rel_tol and diff <= rel_tol * abs(gv))) > 0
    # exact: only the rounding noise of the arithmetic is forgiven at a point, then equality is proved
    agreeing = _agreeing_points(gs, ps, symbols, _DIGITS, _within_noise(_DIGITS))
    if agreeing < 0:
        return False
    if agreeing == 0 or not symbols:
        return _proved_zero(gs - ps)
    if _proved_zero(gs - ps, cheap=True):
        return True
    # an identity in the symbols SymPy's cheap rewrites did not show: agreement at random points
    # at 90 digits (see the module docstring); `x^2 + 10^{-30}` against `x^2` fails here
    return _agreeing_points(gs, ps, symbols, 3 * _DIGITS, _within_noise(3 * _DIGITS)) > 0


def _within_noise(digits: int):
    import mpmath

    return lambda gv, diff: diff <= mpmath.mpf(10) ** -(digits - 8) * max(abs(gv), 1)


def _agreeing_points(gs, ps, symbols, digits: int, ok) -> int:
    """How many points agree (up to `_POINTS`, 1 without symbols) by `ok(gv, |pv - gv|)`; -1 when one disagrees."""
    import mpmath

    agreeing = 0
    with mpmath.workdps(digits + 10):
        for point in _points(symbols, digits):
            gv, pv = _value(gs, point, digits), _value(ps, point, digits)
            if gv is None or pv is None:
                continue  # not a number at this point (a pole, a symbol left over): try another
            if not ok(gv, abs(pv - gv)):
                return -1
            agreeing += 1
            if agreeing >= (_POINTS if symbols else 1):
                break
    return agreeing


def _proved_zero(d, cheap: bool = False) -> bool:
    """SymPy shows `d == 0` exactly (expand, radsimp, simplify in turn; `cheap`: expand, cancel); else False."""
    import sympy

    rewrites = (sympy.expand, sympy.cancel) if cheap else (sympy.expand, sympy.radsimp, sympy.simplify)
    for rewrite in rewrites:  # never nsimplify: it rounds
        try:
            r = rewrite(d)
        except Exception:
            continue
        if r == 0:
            return True
    return False


def _points(symbols, digits: int = _DIGITS):
    """Deterministic pseudo-random positive points (positive: sqrt and log stay real)."""
    import sympy

    rng = random.Random(0)
    for _ in range(3 * _POINTS if symbols else 1):
        yield {s: sympy.Float(rng.randint(300, 2700) / 1000 + rng.random() * 1e-3, digits) for s in symbols}


def _value(expr, point, digits: int = _DIGITS):
    """`expr` at `point` as an mpmath complex of `digits` digits, or None when it is not a finite number."""
    import mpmath
    import sympy

    try:
        v = expr.evalf(digits, subs=point) if point else expr.evalf(digits)
        re_part, im_part = v.as_real_imag()
        if not (re_part.is_number and im_part.is_number):
            return None
        re_f, im_f = sympy.Float(re_part, digits), sympy.Float(im_part, digits)
        z = mpmath.mpc(re_f._mpf_, im_f._mpf_)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if not mpmath.isfinite(z.real) or not mpmath.isfinite(z.imag):
        return None
    return z


def relations_proportional(g: Rel, p: Rel, rules: Rules) -> bool:
    """`lhs - rhs` of gold and prediction are proportional (positively for inequalities)."""
    dg, strict_g = _difference(g)
    dp, strict_p = _difference(p)
    if strict_g != strict_p:
        return False
    symbols = sorted(dg.free_symbols | dp.free_symbols, key=lambda s: s.name)
    if not symbols:
        return _expr_equal(dg, None, dp, None, rules.rel_tol)
    import mpmath

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


def matrix_expr_equal(g: Matrix, p: Expr, rules: Rules) -> bool:
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
