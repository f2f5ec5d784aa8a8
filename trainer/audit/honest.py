"""Honest positives: the row's gold written as a careful human would, to measure what a reward wrongly refuses.

A reward that refuses honest answers teaches a policy to avoid them (TinyV, Xu et al. 2025, found over 38% of
Big-Math's rule-checked negatives were correct answers). Each class is `(row, shape) -> list[str]`; `gated`
classes count toward `audit.max_false_negative`: they are written in the reward's own answer format (the row's
reference, or its frame around the gold), so refusing them is the reward's fault. The others (units, another
answer format) are reported: a reward may require its format or a bare number on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rlvr.trainer.audit.probes import AnswerShape, as_number, show_number


def reference(row: dict, s: AnswerShape | None) -> list[str]:
    return [str(row["reference"])] if row.get("reference") else []


def gold_in_format(row: dict, s: AnswerShape) -> list[str]:
    return [s.frame(s.gold), s.frame(f" {s.gold} ")]


def latex_math(row: dict, s: AnswerShape) -> list[str]:
    return [s.frame(f"${s.gold}$"), s.frame(f"\\({s.gold}\\)")] if not s.prefix.endswith("$\\boxed{") else []


def number_forms(row: dict, s: AnswerShape) -> list[str]:
    """The same value written otherwise: thousands separators, a decimal for a fraction (or .0 for an integer), a
    fraction for a decimal."""
    number = s.number
    if number is None:
        return []
    forms = []
    if number.denominator == 1:
        forms.append(f"{number.numerator}.0")
        if abs(number) >= 1000:
            forms.append(f"{number.numerator:,}")
    else:
        if 10**6 % number.denominator == 0:  # a terminating decimal
            forms.append(f"{float(number):g}")
        forms.append(f"{number.numerator}/{number.denominator}")
        if not s.gold.startswith("\\"):
            forms.append(show_number(number))
    return [s.frame(f) for f in forms if f != s.gold]


def with_units(row: dict, s: AnswerShape) -> list[str]:
    if s.number is None:
        return []
    return [s.frame(f"{s.gold} units"), s.frame(f"{s.gold}\\text{{ units}}")]


def other_formats(row: dict, s: AnswerShape) -> list[str]:
    out = [f"<answer>{s.gold}</answer>", f"The answer is $\\boxed{{{s.gold}}}$.", f"The answer is {s.gold}.",
           f"#### {s.gold}"]
    return [x for x in out if x != s.frame(s.gold)]


# ---- code ------------------------------------------------------------------------------------------------------

def code_of(row: dict) -> str | None:
    """The reference program: its last fenced block, or the reference itself."""
    text = row.get("reference")
    if not text:
        return None
    blocks = re.findall(r"```[\w+-]*\n(.*?)```", str(text), re.S)
    return blocks[-1] if blocks else str(text)


def code_with_prose(row: dict, s) -> list[str]:
    code = code_of(row)
    return [f"Here is a solution.\n\n```python\n{code}```\n\nIt handles every case in the statement."] if code else []


def code_fences(row: dict, s) -> list[str]:
    code = code_of(row)
    return [f"```py\n{code}```", f"```\n{code}```", code] if code else []


Honest = Callable[[dict, object], list[str]]
# name -> (gated, what it is, builder)
ANSWER_HONEST: dict[str, tuple[bool, str, Honest]] = {
    "honest_reference": (True, "the row's reference completion", reference),
    "honest_gold_in_format": (True, "the gold in the reference's answer format (bare, spaced)", gold_in_format),
    "honest_number_forms": (True, "the gold's value otherwise: 1,234 / 12.0 / 0.75 for 3/4 / 3/4 for 0.75",
                            number_forms),
    "honest_latex": (False, "the gold in LaTeX math delimiters inside the answer format ($12$, \\(12\\))", latex_math),
    "honest_units": (False, "the gold with a unit ('12 units', '12\\text{ units}')", with_units),
    "honest_other_formats": (False, "answer tag, boxed, 'The answer is X.', '#### X' where not the reward's format",
                             other_formats),
}
CODE_HONEST: dict[str, tuple[bool, str, Honest]] = {
    "honest_reference": (True, "the row's reference completion", reference),
    "honest_code_with_prose": (True, "the reference program with a sentence before and after", code_with_prose),
    "honest_code_fences": (True, "the reference program in ```py, a bare ``` fence and no fence", code_fences),
}
