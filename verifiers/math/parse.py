"""From an extracted answer string to a small answer tree, without SymPy.

Two steps, both plain string work with linear cost (so the parent process may run them on any
input; only SymPy work is sent to time-limited workers):

1. `normalize`: one spelling per thing. Unicode minus and symbols, `\\dfrac`/`\\tfrac`, `\\frac12`,
   `\\left`/`\\right`, spacing macros, `{,}` and `,\\!`, thousands separators, degrees, `\\$` and
   currency, "percent"/"pct", units in `\\text{}`/`\\textbf{}` or trailing words, a final full
   stop, `\\\\frac` typed with an escaped backslash, a bare TeX group `{2, 3}` around a list.
2. `parse`: the structure a grader must respect, as a tree of frozen dataclasses:
   `Num` (exact Fraction, with `approx` and `places` when written as a decimal, `pct` when
   written with %; `0.\\overline{3}` is exactly 1/3), `Rel` chains cut at `\\approx` (the exact
   member before it answers), a "2,74" list that may also be a decimal comma (`Coll.comma_decimal`),
   `Expr` (LaTeX left for SymPy), `Rel` (equations/inequalities, chains allowed),
   `Coll` (a set `\\{...\\}`, or a bare list "2, -2" / "x=2 or x=-2" / `a \\pm b`, both unordered),
   `Bracket` (`(a, b)`, `[a, b)`, `\\langle a, b \\rangle`: tuples and intervals keep their
   delimiters, so open and closed differ; a ratio or clock time `a:b` is a Bracket with ":"),
   `Union` (`\\cup`), `Matrix` (also `\\left[\\begin{array}...\\right]`), `Text`.

Invalid LaTeX is not repaired beyond the common shorthands: `4\\sqrt(2)` stays as written and
fails to parse later, rather than silently becoming 4 (math-verify's behaviour).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

MAX_EXPONENT = 400  # larger powers of ten go to SymPy (in a worker), not Fraction arithmetic here


@dataclass(frozen=True)
class Num:
    value: Fraction
    approx: bool = False  # written with a decimal point: a stated approximation (see equal.py)
    pct: bool = False  # written with a percent sign
    places: int = 0  # decimal places as written, less the power of ten: 0.33 -> 2, 1.2e5 -> -4


@dataclass(frozen=True)
class Expr:
    latex: str


@dataclass(frozen=True)
class Rel:
    ops: tuple[str, ...]  # "=", "<", "<=", ">", ">=", "!="; len(ops) == len(sides) - 1
    sides: tuple


@dataclass(frozen=True)
class Coll:
    items: tuple  # unordered: `\{1, 2\}`, "1, 2", "x=1 or x=2", `1 \pm 2`
    comma_decimal: Num | None = None  # "1000,99", "0,111": also a number with a decimal comma (see parse)


@dataclass(frozen=True)
class Bracket:
    open: str  # "(" "[" "<" (angle)
    close: str
    items: tuple


@dataclass(frozen=True)
class Union:
    parts: tuple


@dataclass(frozen=True)
class Matrix:
    rows: tuple  # tuple of tuples of nodes


@dataclass(frozen=True)
class Text:
    text: str  # casefolded, spaces and punctuation removed


# ---------------------------------------------------------------------------------------------
# normalize

_UNICODE = {
    "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u00d7": r"\times ", "\u22c5": r"\cdot ", "\u00b7": r"\cdot ",
    "\u03c0": r"\pi ", "\u221e": r"\infty ", "\u2264": r"\le ", "\u2265": r"\ge ", "\u2260": r"\ne ",
    "\u221a": r"\sqrt", "\u00b0": r"^\circ", "\u2229": r"\cap ", "\u222a": r"\cup ", "\u00a0": " ",
    "\u2009": " ", "\u202f": " ", "\uff0c": ",",
}
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))
_DROP = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![a-zA-Z])|\\displaystyle|\\textstyle"
    r"|\\!|\\limits|\\mathrm\{\s*\}"
)
_SPACES = re.compile(r"(?<!\\)\\[,;: ]|\\q?quad|~")  # `\quadx_2` (no space) is still a quad
_DEGREES = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree|\s*\bdegrees?\b|\^\{\s*\\text\{\s*o\s*\}\s*\}")
_CURRENCY = re.compile(r"\\\$|\$|\\euro|€|£|¥|₹|\\pounds|\bUSD\b|\bRs\.?\s|\bINR\b")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}")
_UNIT_TEXT = re.compile(r"(?<=[\w})\].])\s*\\(?:text|mbox|mathrm|textrm|textnormal|textbf|textit|mathbf)\s*\{\s*[a-zA-Z][^{}]*\}(?:\s*\^\s*\{?\d\}?)?\s*$")
_UNIT_WORDS = re.compile(r"(?<=[\d})\]])\s+(?!(?:or|and)\b)[a-zA-Z]{2,}(?:[\s.-]+[a-zA-Z]+)*(?:\s*\^\s*\{?\d\}?)?\s*$")
_FRAC_SHORT = [
    (re.compile(r"\\frac\s*(\d)\s*(\d)"), r"\\frac{\1}{\2}"),
    (re.compile(r"\\frac\s*(\d)\s*(?=\{)"), r"\\frac{\1}"),
    (re.compile(r"\\frac\s*(\{[^{}]*\})\s*(\d)"), r"\\frac\1{\2}"),
    (re.compile(r"\\frac\s*([a-zA-Z])\s*([a-zA-Z\d])"), r"\\frac{\1}{\2}"),
    (re.compile(r"\\sqrt\s*(\d|[a-zA-Z](?![a-zA-Z]))"), r"\\sqrt{\1}"),
]
_SPACED_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?: \d{3})+)(?![\d])")
_BRACE_COMMA = re.compile(r"\{,\}")
_DOUBLE_BACKSLASH = re.compile(r"(?<!\\)\\\\(?=[a-zA-Z])")
_COMMA_BANG = re.compile(r",\s*\\!\s*(?=\d{3})")
_PERCENT_WORDS = re.compile(r"(?<=[\d}])\s*(?:percent(?:age)?|pct)\b", re.IGNORECASE)
_COMMA_DECIMAL = re.compile(r"([-+]?\d+),(\d+)")  # reached only when it is no thousands grouping


def normalize(text: str) -> str:
    """One spelling per answer; see the module docstring for the list of rewrites."""
    s = _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], str(text))
    s = s.replace("\n", " ").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\cfrac", "\\frac")
    if "\\begin" not in s:  # `\\frac` typed with an escaped backslash (no matrix row break here)
        s = _DOUBLE_BACKSLASH.sub(r"\\", s)
    s = _COMMA_BANG.sub(",", s)  # `11,\! 111`: thousands separated with a negative thin space
    s = _DROP.sub("", s)
    s = _SPACES.sub(" ", s)
    s = _BRACE_COMMA.sub(",", s)
    s = s.replace("\\%", "%").replace("\\text{%}", "%")
    s = _DEGREES.sub("", s)
    s = _CURRENCY.sub("", s)
    for pattern, repl in _FRAC_SHORT:
        s = pattern.sub(repl, s)
    s = _PERCENT_WORDS.sub("%", s)
    s = " ".join(s.split())
    s = s.strip().rstrip(".").strip()
    for _ in range(2):  # "5 \text{ cm}^2", "12 square feet"
        stripped = _UNIT_TEXT.sub("", s).strip()
        stripped = _UNIT_WORDS.sub("", stripped).strip()
        if stripped and stripped != s:
            s = stripped
    s = _SPACED_THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(" ", ","), s)
    if s.startswith("\\boxed{") and s.endswith("}"):
        s = s[len("\\boxed{"): -1].strip()
    if s.startswith("{") and s.endswith("}") and _enclosing("(" + s[1:-1] + ")"):
        s = s[1:-1].strip()  # `{2, 3, 5}`: a TeX group around a list is only a group
    return s


# ---------------------------------------------------------------------------------------------
# numbers (the fast path: exact Fractions, no SymPy)

_INT = r"(?:[1-9]\d{0,2}(?:,\d{3})+(?![\d])|\d+)"  # "0,111" is no thousands grouping
_MANT = rf"(?:{_INT}(?:\.\d*)?|\.\d+)"
_EXP = r"(?:[eE](?P<e1>[-+]?\d+)|\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*(?:\{\s*(?P<e2>[-+]?\d+)\s*\}|(?P<e3>[-+]?\d)))"
_DECIMAL_RE = re.compile(rf"(?P<sign>[-+]?)\s*(?P<mant>{_MANT})(?:{_EXP})?\s*(?P<pct>%?)")
_REPEATING_RE = re.compile(r"(?P<sign>[-+]?)\s*(?P<int>\d*)\.(?P<fixed>\d*)\\overline\s*\{\s*(?P<period>\d{1,50})\s*\}\s*(?P<pct>%?)")
_POW10_RE = re.compile(r"(?P<sign>[-+]?)\s*10\s*\^\s*(?:\{\s*(?P<e2>[-+]?\d+)\s*\}|(?P<e3>[-+]?\d))\s*(?P<pct>%?)")
_FRAC_RE = re.compile(
    rf"(?P<sign>[-+]?)\s*(?:\\frac\s*\{{\s*(?P<n1>[-+]?{_INT})\s*\}}\s*\{{\s*(?P<d1>[-+]?{_INT})\s*\}}"
    rf"|(?P<n2>[-+]?{_INT})\s*/\s*(?P<d2>[-+]?{_INT}))\s*(?P<pct>%?)"
)


def parse_number(s: str) -> Num | None:
    """A plain number (int, decimal, scientific, `\\frac{int}{int}`, `a/b`, optional %), else None."""
    s = s.strip()
    if len(s) > 200:
        return None
    m = _DECIMAL_RE.fullmatch(s)
    if m:
        exp = m.group("e1") or m.group("e2") or m.group("e3")
        if exp is not None and abs(int(exp)) > MAX_EXPONENT:
            return None
        mant = m.group("mant").replace(",", "")
        value = Fraction(mant) * (Fraction(10) ** int(exp) if exp else 1)
        places = (len(mant) - mant.index(".") - 1 if "." in mant else 0) - (int(exp) if exp else 0)
        return Num(-value if m.group("sign") == "-" else value, approx="." in mant, pct=bool(m.group("pct")), places=places)
    m = _REPEATING_RE.fullmatch(s)
    if m:  # `0.\overline{3}` is exactly 1/3; `1.2\overline{45}` is 1.2454545...
        head, fixed, period = m.group("int") or "0", m.group("fixed"), m.group("period")
        value = Fraction(head + "." + fixed if fixed else head) + Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
        return Num(-value if m.group("sign") == "-" else value, pct=bool(m.group("pct")))
    m = _POW10_RE.fullmatch(s)
    if m:
        exp = int(m.group("e2") or m.group("e3"))
        if abs(exp) > MAX_EXPONENT:
            return None
        value = Fraction(10) ** exp
        return Num(-value if m.group("sign") == "-" else value, pct=bool(m.group("pct")))
    m = _FRAC_RE.fullmatch(s)
    if m:
        num = int((m.group("n1") or m.group("n2")).replace(",", ""))
        den = int((m.group("d1") or m.group("d2")).replace(",", ""))
        if den == 0:
            return None
        value = Fraction(num, den)
        return Num(-value if m.group("sign") == "-" else value, pct=bool(m.group("pct")))
    return None


# ---------------------------------------------------------------------------------------------
# structure

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = set(_OPENERS.values())
_REL_TOKENS = [  # longest first
    ("\\leqslant", "<="), ("\\geqslant", ">="), ("\\leq", "<="), ("\\geq", ">="), ("\\neq", "!="), ("\\le", "<="),
    ("\\ge", ">="), ("\\ne", "!="), ("\\approx", "~"), ("\\lt", "<"), ("\\gt", ">"), ("<=", "<="), (">=", ">="), ("!=", "!="), ("=", "="),
    ("<", "<"), (">", ">"),
]
_WORD_SEP = re.compile(r"\s+(?:or|and)\s+|(?<=[)\]])\s*or\s*(?=[(\[])|\s*\\(?:text|mbox)\{\s*(?:or|and)\s*\}\s*", re.IGNORECASE)
_MATRIX = re.compile(r"\\begin\{([pbBvV]?matrix|array)\}(?:\{[^{}]*\})?((?:(?!\\begin\{).)*)\\end\{\1\}", re.DOTALL)
_CHOICE = re.compile(r"\(?([A-J])\)?")
_LETTERS3 = re.compile(r"[a-zA-Z]{3,}")
_COMMAND = re.compile(r"\\[a-zA-Z]+")


def _depth_scan(s: str):
    """Yield (index, depth) for each character; depth counts (), [], {} and \\{ \\} as one kind."""
    depth = 0
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "\\" and i + 1 < n and s[i + 1] in "{}":
            yield i, depth
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if ch == "\\" and s.startswith("\\langle", i):
            yield i, depth
            depth += 1
            i += len("\\langle")
            continue
        if ch == "\\" and s.startswith("\\rangle", i):
            depth -= 1
            yield i, depth
            i += len("\\rangle")
            continue
        if ch in _OPENERS:
            yield i, depth
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
            yield i, depth
        else:
            yield i, depth
        i += 1


def split_top(s: str, sep: str) -> list[str]:
    """`s` split on `sep` where it is not inside any bracket."""
    parts, last = [], 0
    for i, depth in _depth_scan(s):
        if depth == 0 and s.startswith(sep, i) and i >= last:
            if sep.startswith("\\") and s[i + len(sep): i + len(sep) + 1].isalpha():
                continue  # `\le` inside `\left`, `\pm` inside `\pmatrix`
            parts.append(s[last:i])
            last = i + len(sep)
    parts.append(s[last:])
    return parts


def _top_level_spans(s: str, pattern: re.Pattern) -> list[str]:
    depth_at = dict(_depth_scan(s))
    parts, last = [], 0
    for m in pattern.finditer(s):
        if depth_at.get(m.start(), 0) == 0:
            parts.append(s[last: m.start()])
            last = m.end()
    parts.append(s[last:])
    return parts


def _split_relation(s: str) -> tuple[list[str], list[str]] | None:
    """Sides and ops of a top-level relation chain, or None when there is none."""
    sides, ops, last = [], [], 0
    skip_until = 0
    for i, depth in _depth_scan(s):
        if i < skip_until or depth != 0:
            continue
        for token, op in _REL_TOKENS:
            if s.startswith(token, i):
                if token.startswith("\\") and s[i + len(token): i + len(token) + 1].isalpha():
                    continue
                sides.append(s[last:i])
                ops.append(op)
                last = skip_until = i + len(token)
                break
    if not ops:
        return None
    sides.append(s[last:])
    return sides, ops


def _enclosing(s: str) -> tuple[str, str, str] | None:
    """(open, close, inner) when the whole of `s` is one bracketed group."""
    openers = (("\\{", "\\}"), ("\\langle", "\\rangle"), ("(", None), ("[", None))
    for opener, closer in openers:
        if not s.startswith(opener):
            continue
        if closer is not None and not s.endswith(closer):
            continue
        if closer is None and not (s.endswith(")") or s.endswith("]")):
            continue
        close_len = len(closer) if closer else 1
        # the group must close only at the very end
        for i, depth in _depth_scan(s):
            if depth == 0 and i < len(s) - close_len and i > 0:
                return None
        if closer is None:
            closer = s[-1]
        return opener, closer, s[len(opener): len(s) - close_len]
    return None


def parse(s: str) -> object:
    """The answer tree of a normalised answer string (see the module docstring)."""
    s = s.strip()
    if not s:
        return Text("")
    num = parse_number(s)
    if num is not None:
        return num
    parts = [p for p in _top_level_spans(s, _WORD_SEP) if p.strip()]
    if len(parts) > 1:
        return Coll(tuple(parse(p) for p in parts))
    m = _COMMA_DECIMAL.fullmatch(s)
    if m:  # "2,74" is a list of two numbers or, in much of the world, 2.74: equal.py decides by the other side
        value = parse_number(f"{m.group(1)}.{m.group(2)}")
        return Coll((parse_number(m.group(1)), parse_number(m.group(2))), comma_decimal=value)
    for sep in (";", ","):
        parts = split_top(s, sep)
        if len(parts) > 1 and all(p.strip() for p in parts):
            return Coll(tuple(parse(p) for p in parts))
    parts = split_top(s, "\\cup")
    if len(parts) > 1:
        return Union(tuple(parse(p) for p in parts))
    pm = split_top(s, "\\pm")
    if len(pm) == 2:
        left, right = pm[0].strip(), pm[1].strip()
        rel = _split_relation(left)
        if rel is not None:  # "x = 1 \pm \sqrt{2}"
            sides, ops = rel
            head = "".join(side + _op_text(op) for side, op in zip(sides[:-1], ops))
            return Coll((parse(f"{head}{sides[-1]}+{right}"), parse(f"{head}{sides[-1]}-{right}")))
        if not left:
            return Coll((parse(right), parse(f"-{right}")))
        return Coll((parse(f"{left}+{right}"), parse(f"{left}-({right})")))
    rel = _split_relation(s)
    if rel is not None:
        sides, ops = rel
        if ops[0] == "~" and not re.search(r"\d", sides[0]):  # `x \approx 11`: no exact member, the value answers
            sides, ops = sides[1:], ops[1:]
        if "~" in ops:  # `x = 1/3 \approx 0.33`: the exact member before the approximation answers
            sides, ops = sides[: ops.index("~") + 1], ops[: ops.index("~")]
        if not ops:
            return parse(sides[0])
        if all(side.strip() for side in sides):
            return Rel(tuple(ops), tuple(parse(side) for side in sides))
    ratio = split_top(s, ":")
    if len(ratio) > 1 and all(p.strip() for p in ratio) and "\\" not in s:
        return Bracket(":", ":", tuple(parse(p) for p in ratio))  # a ratio or a clock time: 1:00 is not 12:00
    if "\\in " in s or s.count("\\in") == 1:
        parts = split_top(s, "\\in")
        if len(parts) == 2 and parts[1].strip():
            return parse(parts[1])
    enclosed = _enclosing(s)
    if enclosed:
        opener, closer, inner = enclosed
        sep = ";" if ";" in inner and "," not in inner else ","  # `(0;-2;6)`: semicolons between coordinates
        items = tuple(parse(p) for p in split_top(inner, sep)) if inner.strip() else ()
        if _MATRIX.fullmatch(inner.strip()):  # `\left[\begin{array}{cc}...\end{array}\right]`
            return parse(inner)
        if opener == "\\{":
            return Coll(items)
        if opener == "\\langle":
            return Bracket("(", ")", items)
        if len(items) == 1 and opener == "(" and closer == ")":
            return items[0]
        return Bracket(opener, closer, items)
    m = _MATRIX.fullmatch(s)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        return Matrix(tuple(tuple(parse(c) for c in row.split("&")) for row in rows))
    unwrapped = _TEXT_WRAP.sub(lambda m: m.group(1), s).strip()
    if unwrapped != s:
        if _LETTERS3.search(_COMMAND.sub("", unwrapped)) or _CHOICE.fullmatch(unwrapped):
            return text_node(unwrapped)
        return parse(unwrapped)
    if _LETTERS3.search(_COMMAND.sub("", s)) and not re.search(r"[\\^_{}]", s):
        return text_node(s)
    return Expr(s)


def _op_text(op: str) -> str:
    return {"<=": "\\le ", ">=": "\\ge ", "!=": "\\ne "}.get(op, op)


def text_node(s: str) -> Text:
    return Text(re.sub(r"[\s.,;:!?'\"()\-]", "", s.casefold()))


def choice_letter(s: str) -> str | None:
    """A multiple-choice answer: `B`, `(B)`, `\\text{(B)}`, `(B) 12`, `B. 12`; else None."""
    s = _TEXT_WRAP.sub(lambda m: m.group(1), s).strip()
    m = re.match(r"\(([A-J])\)|([A-J])(?:[.):]|$)|([A-J])\s", s)
    if m is None:
        return None
    return next(g for g in m.groups() if g)


def parse_answers(norms) -> object:
    """One tree for the extracted answer(s): several boxed answers joined by "or" form one set."""
    trees = tuple(parse(s) for s in norms)
    return trees[0] if len(trees) == 1 else Coll(trees)
