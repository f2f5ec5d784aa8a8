"""The SymPy side of equal.py's rules (see its docstring): parsing LaTeX, exact proofs, random points.

Runs only where SymPy work is allowed: in `TimeLimitPool` workers (or the caller with `workers=0`).
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from rlvr.verifiers.math.rules import Rules, SympyFailure, Unparsable, _num_values, _significant_digits
from rlvr.verifiers.math.parse import Expr, Matrix, Num, Rel

_DECIMAL_IN_LATEX = re.compile(r"(?<![\d.])\d*\.(\d+)")


_POINTS = 4  # agreeing random points needed to call two expressions equal (two of each sign, see _points)
_DIGITS = 30


# A sum of plain integers (`1+1+...+1`, 2,000 terms): added here in linear time, since the ANTLR parser takes
# about 2.6 s for 2,000 terms (past the default 3 s limit on a loaded machine): an honest long answer must not time out
_PLAIN_SUM = re.compile(r"\s*[-+]?\s*\d{1,400}(?:\s*[-+]\s*\d{1,400})*\s*")
_TERM = re.compile(r"([-+]?)\s*(\d+)")


@lru_cache(maxsize=4096)
def to_sympy(latex: str):
    """SymPy object for a LaTeX string (cached: gold answers repeat G times per prompt)."""
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig, NormalizationConfig, latex2sympy
    import sympy

    if _PLAIN_SUM.fullmatch(latex):
        return sympy.Integer(sum(-int(d) if sign == "-" else int(d) for sign, d in _TERM.findall(latex)))

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
    """equal.py's rules where a side needs SymPy. Which tolerance applies depends on the gold:
    - an exact rational gold (`1000`, `2^{10}`, `\\frac{1}{3}`) or one in symbols (`x + 1`, `\\pi x`) is matched
      by an exactly equal value only; a prediction's decimals are read as the exact fractions they write
      (`1.2 \\times 10^{5}` is 120000, `0.5x` is `\\frac{x}{2}`; `0.333` is not 1/3, `x + 1.04` is not `x + 1`);
    - a decimal gold (`0.866`) is matched by an equal value, or by an expression SymPy knows to be irrational
      (`\\frac{\\sqrt{3}}{2}`: it has no decimal of its own) within half a unit of the gold's last place; never
      by another rational (`0.8661`, `\\frac{433}{500}`);
    - an irrational number (`\\pi`, `\\sqrt{2}`) by a decimal with `min_digits` significant digits, written to at
      least one decimal place (`3.14`; not `3.1`, nor the magnitude `1.26 \\times 10^{3}` for `400\\pi`),
      within half a unit."""
    import sympy

    gs, ps = node_to_sympy(g), node_to_sympy(p)
    if not isinstance(gs, sympy.Expr) or not isinstance(ps, sympy.Expr):
        return _structural_sympy_equal(gs, ps, rules)
    g_places, p_places = _stated_places(g), _stated_places(p)
    g_exact, p_exact = _exact_sympy(g, gs), _exact_sympy(p, ps)
    g_values = _values(g, g_exact, rules)
    p_values = _values(p, p_exact, rules)
    if rules.rel_tol and (g_places is not None or p_places is not None):  # a user's opt-in tolerance
        return any(_expr_equal(a, g_places, b, p_places, rules.rel_tol) for a, _ in g_values for b, _ in p_values)
    if g_places is None and (g_exact.is_rational or g_exact.free_symbols):  # exact, or in symbols: equal only
        return any(_expr_equal(a, None, b, None) for a, _ in g_values for b, _ in p_values)
    if g_places is not None:  # a decimal gold
        if any(_expr_equal(a, None, b, None) for a, _ in g_values for b, _ in p_values):
            return True
        return p_places is None and p_exact.is_rational is False and any(
            _expr_equal(a, places, b, None) for a, places in g_values for b, _ in p_values)
    if p_places is None:  # an irrational gold against an exact prediction
        return any(_expr_equal(a, None, b, None) for a, _ in g_values for b, _ in p_values)
    if p_places < 1 or (isinstance(p, Num) and _significant_digits(p.value, p.places) < rules.min_digits):
        return False  # 3.1 for pi, 1.26e3 for 400 pi: a rough guess or a magnitude, not the answer
    return any(_expr_equal(a, None, b, places) for a, _ in g_values for b, places in p_values)


def _values(node, exact, rules: Rules) -> list:
    """(SymPy value, stated places or None) for each value `node` may stand for (a percent stands for two)."""
    import sympy

    if isinstance(node, Num):
        return [(sympy.Rational(v.numerator, v.denominator), places if node.approx else None)
                for v, places in _num_values(node, rules.percent)]
    return [(exact, _stated_places(node))]


def _exact_sympy(node, parsed):
    """`parsed` with each decimal the LaTeX writes read as the exact fraction it writes (`0.333` is 333/1000)."""
    if isinstance(node, Num) or _stated_places(node) is None:
        return parsed
    result = to_sympy(_DECIMAL_IN_LATEX.sub(_as_fraction, node.latex))
    return parsed if isinstance(result, Unparsable) else result


def _as_fraction(m: re.Match) -> str:
    whole, digits = m.group(0).split(".")
    return f"{{\\frac{{{int((whole or '0') + digits)}}}{{1{'0' * len(digits)}}}}}"


def _structural_sympy_equal(gs, ps, rules: Rules) -> bool:
    import sympy

    if isinstance(gs, sympy.MatrixBase) and isinstance(ps, sympy.MatrixBase):
        return gs.shape == ps.shape and all(_expr_equal(a, None, b, None, rules.rel_tol) for a, b in zip(gs, ps))
    try:
        return bool(gs == ps)
    except Exception as error:  # SymPy could not compare what it parsed: a verifier failure, not a wrong answer
        raise SympyFailure(f"comparing {type(gs).__name__} with {type(ps).__name__}: {error}") from error


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
    failures = []
    for rewrite in rewrites:  # never nsimplify: it rounds
        try:
            r = rewrite(d)
        except Exception as error:
            failures.append(f"{rewrite.__name__}: {type(error).__name__}: {error}")
            continue
        if r == 0:
            return True
    if len(failures) == len(rewrites):  # no rewrite ran at all: nothing was shown, so no verdict is due
        raise SympyFailure("every rewrite raised (" + "; ".join(failures)[:300] + ")")
    return False


def _points(symbols, digits: int = _DIGITS):
    """Deterministic pseudo-random points of both signs, alternating from one point to the next.

    Both signs because an identity may fail off the positive reals: at positive points only, `|x|` and
    `\\sqrt{x^2}` pass for `x` and `\\log(x^2)` for `2\\log x`. Off the domain of real roots and logs values are
    complex (principal branches), which both sides of a true identity share (`\\sqrt{x}\\sqrt{x}` is `x`)."""
    import sympy

    rng = random.Random(0)
    for k in range(4 * _POINTS if symbols else 1):
        sign = 1 if k % 2 == 0 else -1
        yield {s: sympy.Float(sign * (rng.randint(300, 2700) / 1000 + rng.random() * 1e-3), digits) for s in symbols}


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
