"""Is a predicted answer tree equal to the gold one? Structure first, numbers next, SymPy last.

Rules (gold `g`, prediction `p`):
- Exact values compare exactly, with no tolerance: integers, fractions, repeating decimals
  (`0.\\overline{3}` is 1/3) and exact symbolic constants (`2^{64}`, `20!`, `\\sqrt{2}+\\sqrt{3}`).
  Why: a reward that can be taken instead of earned teaches the policy to take it. A relative
  tolerance of 1e-6 between exact values called `2^{64}-1` equal to `2^{64}`, `20!+1` equal to
  `20!` and `2^{2^{-60}}` equal to 1; a grader that rounds to 6 places (math-verify, the Qwen2.5-Math
  grader) calls `\\frac{1}{2004!}` and `\\frac{1}{2006!}` equal. Two exact numbers are Fractions
  here; two exact SymPy constants must agree at 30 digits *and* SymPy must prove `g - p == 0`
  (expand, radsimp, simplify, under the worker's time limit); unproved counts as unequal.
- A rational gold, exact or decimal, and a gold in symbols (`x + 1`, `\\pi x`) are matched by an
  equal value only (issue 50, class 5: a reward for something other than the answer is what a
  policy learns). A decimal or scientific-notation value equal to it passes (`0.5` or `0.50` for
  `\\frac{1}{2}`, `1/2` for `0.5`, `1.2e5` or `1.2 \\times 10^{5}` for 120000); a rounded one earns
  nothing, however many digits it has (`0.333` for 1/3, `1.23e3` for 1234, `2.67` for 8/3 inside an
  interval). A decimal gold takes no neighbour within half a unit of its last digit either (`0.54`
  or `\\frac{27}{50}` for `0.5`, `16386.169` for `16386.17`); only an expression SymPy knows to be
  irrational, which has no decimal of its own, may stand for it when it rounds to it
  (`\\frac{\\sqrt{3}}{2}` for `0.866`).
- An irrational number (`\\pi`, `\\sqrt{2}`) can be written as a decimal only by rounding: a decimal
  with 3 significant digits and at least one decimal place (2 digits inside tuples, intervals and
  matrices) stands for it within half a unit of its last place (`3.14` for `\\pi`, `1.4142` for
  `\\sqrt{2}`; not `3.1`, nor the magnitude `1.26 \\times 10^{3}` for `400\\pi`; `0.88` is not
  `\\sqrt{3}/2`). Expressions holding decimals follow the same rules, their decimals read as the exact
  fractions they write. `rel_tol` (default 0) is a user's opt-in relative tolerance on decimals.
- Expressions with free symbols: rejected as soon as they differ at one of 12 pseudo-random points
  of both signs at 30 digits (both signs: at positive points only `|x|` and `\\sqrt{x^2}` passed for
  `x`; off the real domain of roots and logs both sides take principal complex values, so
  `\\ln(x^2)` is not `2\\ln x` while `\\sqrt{x}\\sqrt{x}` is `x`); then equal when SymPy's cheap
  rewrites (expand, cancel) prove `g - p == 0`, or else when they agree at 4 points, 2 of each
  sign, at 90 digits (probabilistic identity testing: it does not give up on true identities that
  `simplify` misses, and a constant as small as `10^{-30}` added to one side is still caught).
  PRM800K's grader skips SymPy for anything with `^`; this does not. A SymPy exception is a
  verifier failure, reported `error`, never `incorrect`.
- Percent (`percent=`): "either" (default) lets a number written with % stand for itself or for
  its hundredth (`28\\%` matches 28 and 0.28); "ratio" only its hundredth; "strip" only itself.
  A number written *without* % is only itself: 28 never matches 0.28 (the Qwen2.5-Math grader's
  `[g/100, g, g*100]` rule accepts it).
- Expressions without free symbols: equal at 30 digits at one point, then proved (`simplify(g - p) == 0`).
- Relations: equations are equal when `lhs - rhs` of both are proportional (`2x = 4` is `x = 2`),
  inequalities when proportional by a positive factor with the same strictness; so
  `3x-y+13=0` and `3x+4y+14=0` differ. An equality chain counts by its ends once every member
  holds (`x = 5+5+1 = 11` is `x = 11`; `x = 4 = 3` holds nothing and answers neither 3 nor `x = 3`;
  the parser already cut it at `\\approx`). A predicted chain answers a value gold when every member
  after a first that names something (`x`, `f(2)`, `2y`) equals it. A bare value matches `x = value` both ways,
  and a gold `name = value` (`f(x) = 1`, `(p, q) = (3, 2)`, `S_{ABC}:S = 7:32`) is answered by the
  value. A relation gold `2 < x < 5` is answered by the interval `(2, 5)`, but an interval gold is
  not answered by a relation (the question asked for the interval; math-verify's asymmetry too).
  `a <= |z| <= b` is the union of its two intervals.
- Ratios and clock times (`a:b`): member by member, exactly: `1:00` is not `12:00`, `2:3` is not `3:2`.
- Sets and "or"/comma lists: same size, one-to-one match in any order. Tuples and intervals:
  same delimiters (open vs closed), in order. Matrices: same shape, element by element; a
  matrix expression (`A + B` of written-out matrices) is evaluated by SymPy first. A decimal
  comma (`1000,99`, `0,111`) is read as a number only against a gold written as a decimal; anywhere
  else `2,3` stays a list.
- Text: casefolded, spaces and punctuation ignored. Multiple choice: the letter (`B`, `(B)`,
  `\\text{(B)}`, `(B) 12`).

`equal(..., allow_sympy=False)` raises `NeedsSympy` instead of touching SymPy: the parent
process decides the easy pairs itself and sends only the rest to time-limited workers. The SymPy
side of the rules lives in symbolic.py, imported only where SymPy work runs.
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from rlvr.verifiers.math.parse import Bracket, Coll, Expr, Matrix, Num, Rel, Text, Union
from rlvr.verifiers.math.rules import Rules, _num_values

PERCENT_MODES = ("either", "ratio", "strip")
_BARE_SYMBOL = re.compile(r"[a-zA-Z](?:_\{?[\w]+\}?)?|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|omega)")
_COMMAND = re.compile(r"\\[a-zA-Z]+")
_CONSTANT_LATEX = re.compile(r"(?:[-+]?\\infty|[^a-zA-Z]*|.*\\(?:pi|infty|sqrt|frac).*)")


class NeedsSympy(Exception):
    """Raised by `equal(..., allow_sympy=False)` when the pair needs SymPy."""


def _entries(rules: Rules) -> Rules:
    """Rules for the entries of a tuple, interval or matrix: `0.87` may stand for `\\frac{\\sqrt{3}}{2}` there."""
    return replace(rules, min_digits=min(rules.min_digits, 2))


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
                and len(p.items) == len(g.items) and all(equal(a, b, _entries(rules)) for a, b in zip(g.items, p.items)))
    if isinstance(g, Matrix) and isinstance(p, Expr):  # `A + B` or `I \cdot I` written out: SymPy evaluates it
        if not rules.allow_sympy:
            raise NeedsSympy
        from rlvr.verifiers.math.symbolic import matrix_expr_equal

        return matrix_expr_equal(g, p, rules)
    if isinstance(g, Matrix):
        return (isinstance(p, Matrix) and [len(r) for r in g.rows] == [len(r) for r in p.rows]
                and all(equal(a, b, _entries(rules)) for ra, rb in zip(g.rows, p.rows) for a, b in zip(ra, rb)))
    if isinstance(g, Rel):
        if isinstance(p, Rel):
            return _rel_equal(g, p, rules)
        if all(op == "=" for op in g.ops) and (_is_bare_symbol(g.sides[0]) or _is_label(g.sides[0]) or len(g.sides) > 2):
            return equal(g.sides[-1], p, rules)  # gold "x = 3", "f(x) = 3", "(p, q) = (3, 2)": predicted "3"
        if isinstance(p, (Bracket, Union)):
            interval = _abs_chain_as_union(g) or rel_as_interval(g)
            return interval is not None and equal(interval, p, rules)
        return False
    if isinstance(p, Rel):  # gold value, predicted "x = value" or "2 + 3 = 5": every member but a name is the value
        values = p.sides[1:] if _names_something(p.sides[0]) else p.sides
        return all(op == "=" for op in p.ops) and bool(values) and all(equal(g, side, rules) for side in values)
    if isinstance(g, Num) and isinstance(p, Num):
        return _num_equal(g, p, rules)
    if isinstance(g, (Num, Expr)) and isinstance(p, (Num, Expr)):
        if not rules.allow_sympy:
            raise NeedsSympy
        from rlvr.verifiers.math.symbolic import sympy_equal

        return sympy_equal(g, p, rules)
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

def numbers_equal(g: Fraction, g_approx: bool, g_places: int, p: Fraction, p_approx: bool, p_places: int,
                  rel_tol: float = 0.0, min_digits: int = 3) -> bool:
    """The number rule of the module docstring: two rational numbers are equal only when their values are.

    Neither an exact gold nor a decimal gold takes a neighbour (`1.23e3` for 1234, `0.333` for 1/3, `0.54` for
    0.5); an equal value written otherwise passes (`0.50` or `1/2` for 0.5, `1.2e5` for 120000). `rel_tol` > 0 is a
    user's opt-in tolerance for decimals; `min_digits` binds only against irrational golds (symbolic.py)."""
    if g == p:
        return True
    if not (g_approx or p_approx) or not rel_tol:
        return False
    if g_approx and p_approx and p_places < g_places:
        return False  # 0.3 does not stand for 0.33: the prediction is less precise than the gold
    return abs(p - g) <= rel_tol * abs(g)


def _num_equal(g: Num, p: Num, rules: Rules) -> bool:
    return any(numbers_equal(gv, g.approx, gp, pv, p.approx, pp, rules.rel_tol, rules.min_digits)
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


def _names_something(node) -> bool:
    """The first member of a predicted chain names what it equals (`x`, `f(2)`, `2y`, `(p, q)`) rather than being
    a value (`4`, `\\sqrt{2}`, `\\pi`): a letter remains once commands and subscripts are removed."""
    if isinstance(node, Expr):
        return bool(re.search(r"[a-zA-Z]", _COMMAND.sub("", re.sub(r"_\s*(?:\{[^{}]*\}|\w)", "", node.latex))))
    return isinstance(node, Bracket) and bool(node.items) and all(_names_something(i) for i in node.items)


def _named_values(coll: Coll):
    """The values of `p=5, q=2` (distinct bare names, in order), else None."""
    items = coll.items
    if len(items) < 2 or not all(isinstance(i, Rel) and i.ops == ("=",) and _is_bare_symbol(i.sides[0]) for i in items):
        return None
    names = [i.sides[0].latex.strip() for i in items]
    return tuple(i.sides[1] for i in items) if len(set(names)) == len(names) else None


def _chain_ends(rel: Rel, rules: Rules) -> Rel | None:
    """`x = 5+5+1 = 11` answers `x = 11`: an equality chain counts by its first and last member, once every
    member after the first equals the last (`x = 4 = 3` holds nothing: None)."""
    if len(rel.sides) > 2 and all(op == "=" for op in rel.ops):
        last = rel.sides[-1]
        if not all(equal(last, side, rules) for side in rel.sides[1:-1]):
            return None
        return Rel(("=",), (rel.sides[0], last))
    return rel


def _rel_equal(g: Rel, p: Rel, rules: Rules) -> bool:
    g, p = _chain_ends(g, rules) or g, _chain_ends(p, rules)
    if p is None:
        return False
    if len(g.sides) == 2 and len(p.sides) == 2:
        flipped = Rel((_FLIP[p.ops[0]],), (p.sides[1], p.sides[0]))
        for cand in (p, flipped):
            if cand.ops == g.ops and equal(g.sides[0], cand.sides[0], rules) and equal(g.sides[1], cand.sides[1], rules):
                return True
        if _kind(g.ops[0]) != _kind(p.ops[0]):
            return False
        if not rules.allow_sympy:
            raise NeedsSympy
        from rlvr.verifiers.math.symbolic import relations_proportional

        return relations_proportional(g, p, rules)
    gi, pi = rel_as_interval(g), rel_as_interval(p)
    if gi is not None and pi is not None:
        return equal(gi, pi, rules)
    return (len(g.sides) == len(p.sides) and g.ops == p.ops
            and all(equal(a, b, rules) for a, b in zip(g.sides, p.sides)))


def _kind(op: str) -> str:
    return {"=": "eq", "!=": "ne", "<": "lt", ">": "lt", "<=": "le", ">=": "le"}[op]
