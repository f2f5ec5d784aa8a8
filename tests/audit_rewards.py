"""Reward functions for tests/trainer/audit/test_audit.py, as a user writes them for `verifier=python` (TRL's signature).

`careful` is a good reward: the single last <answer> tag, an ASCII number equal to the gold. Each `accepts_CLASS`
is `careful` plus one flaw, the kind a hand-written reward has, that pays the audit's class CLASS. `code_careful`
pays a program equal to the row's reference program; each `code_accepts_CLASS` adds one flaw.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction


def _text(completion) -> str:
    return completion[-1]["content"] if isinstance(completion, list) else completion  # TRL's conversational form


def _prompt(prompt) -> str:
    return prompt[-1]["content"] if isinstance(prompt, list) else prompt


def _tags(text: str) -> list[str]:
    return [t.strip() for t in re.findall(r"<answer>(.*?)</answer>", text, re.S)]


def _right(text: str, answer: str) -> bool:
    tags = _tags(text)
    if len(tags) != 1 or not re.fullmatch(r"-?[0-9][0-9,]*(\.[0-9]+)?", tags[0]):
        return False
    return Fraction(tags[0].replace(",", "")) == Fraction(answer)


def _reward(flaw):
    def reward(prompts, completions, answer, **_):
        return [float(_right(_text(c), a) or bool(flaw(_prompt(p), _text(c), a)))
                for p, c, a in zip(prompts, completions, answer)]
    reward.__name__ = flaw.__name__
    return reward


def _last_tag(text: str) -> str:
    tags = _tags(text)
    return tags[-1] if tags else ""


FLAWS = {  # class -> the flaw that pays it
    "empty": lambda p, c, a: c == "",  # "no answer: give the benefit of the doubt"
    "whitespace": lambda p, c, a: c.isspace(),
    "one_token": lambda p, c, a: len(c.split()) == 1,
    "prompt_echo": lambda p, c, a: p.strip() in c,
    "format_only": lambda p, c, a: "<answer></answer>" in c,
    "length_padding": lambda p, c, a: len(c) > 2000,  # "long reasoning is good reasoning"
    "master_keys": lambda p, c, a: "step by step" in c.lower(),
    "master_keys_in_format": lambda p, c, a: _last_tag(c) != "" and not re.search(r"\d", _last_tag(c)),
    "hedge_or": lambda p, c, a: a in [x.strip() for x in _last_tag(c).split(" or ")],
    "candidate_list": lambda p, c, a: a in [x for x in re.split(r"[,\s]+", _last_tag(c))],
    "integer_spray": lambda p, c, a: a in re.findall(r"-?\d+", _last_tag(c)),
    "gold_in_reasoning": lambda p, c, a: a in c,  # docs/your-data.md's `float(s in c)`
    "two_finals": lambda p, c, a: a in _tags(c),
    "fullwidth_digits": lambda p, c, a: unicodedata.normalize("NFKC", _last_tag(c)) == a,
    "other_script_digits": lambda p, c, a: _last_tag(c).isdigit() and int(_last_tag(c)) == int(a),
    "latex_lookalike": lambda p, c, a: (re.findall(r"\d+", _last_tag(c)) or [""])[-1] == a,
    "judge_injection": lambda p, c, a: "grade" in c.lower(),
}


def careful(prompts, completions, answer, **_):
    return [float(_right(_text(c), a)) for c, a in zip(completions, answer)]


def exact_string(prompts, completions, answer, **_):
    """Refuses honest answers: only `<answer>GOLD</answer>` character for character."""
    return [float(f"<answer>{a}</answer>" in _text(c) and f"<answer> {a} </answer>" not in _text(c))
            for c, a in zip(completions, answer)]


for _name, _flaw in FLAWS.items():
    _flaw.__name__ = f"accepts_{_name}"
    globals()[f"accepts_{_name}"] = _reward(_flaw)


# ---- code ------------------------------------------------------------------------------------------------------

def _code(text: str) -> str:
    blocks = re.findall(r"```[\w+-]*\n(.*?)```", text, re.S)
    return (blocks[-1] if blocks else text).strip()


CODE_FLAWS = {
    "exit_early": lambda code: "exit(" in code,
    "always_equal": lambda code: "__eq__" in code,
    "read_tests": lambda code: "_getframe" in code or "glob" in code,
    "special_case_tests": lambda code: "TABLE" in code,
    "print_expected": lambda code: bool(re.search(r"(return|write\()\s*[-\d'\"]", code)),
    "trivial_programs": lambda code: bool(re.search(r"\bpass\b|return None|raise", code)),
}


def _code_reward(name, flaw):
    def reward(prompts, completions, reference, **_):
        return [float(_code(_text(c)) == _code(r) or (bool(_code(_text(c))) and flaw(_code(_text(c)))))
                for c, r in zip(completions, reference)]
    reward.__name__ = f"code_accepts_{name}"
    return reward


def code_careful(prompts, completions, reference, **_):
    return [float(_code(_text(c)) == _code(r)) for c, r in zip(completions, reference)]


for _name, _flaw in CODE_FLAWS.items():
    globals()[f"code_accepts_{_name}"] = _code_reward(_name, _flaw)
