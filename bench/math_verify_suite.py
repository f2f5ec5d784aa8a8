"""The labelled (gold, prediction, expected) pairs of math-verify's own test suite, read from a checkout.

    python bench/math_verify_suite.py DIR      # prints the pairs' count per test and the rows skipped

math-verify (github.com/huggingface/Math-Verify) keeps its regression cases as
`@pytest.mark.parametrize("gold,pred,expected", [...])` lists in `tests/test_*.py`. This reads
those lists with `ast.literal_eval` (nothing is imported or run) from a copy of that repository
the caller points at; no case is stored in rlvr. Rows kept: those whose label holds under
math-verify's default settings. Rows left out, with the reason counted:
- the label is for a non-default setting (`strict=False`, `allow_set_relation_comp=True`, or a
  `precision` other than the default 6 decimals);
- the list is not a literal (an f-string built in the test);
- an exact duplicate of a row already kept.
Each kept row is (test name, gold, pred, expected as bool).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

DEFAULTS = {"strict": True, "allow_set_relation_comp": False, "precision": 6}
_LABEL_NAMES = ("expected", "result")


def _argnames(decorator: ast.Call) -> list[str] | None:
    if not decorator.args or not isinstance(decorator.args[0], ast.Constant) or not isinstance(decorator.args[0].value, str):
        return None
    return [name.strip() for name in decorator.args[0].value.split(",")]


def load_suite(repo: str | Path) -> tuple[list[tuple[str, str, str, bool]], Counter]:
    """(kept rows, Counter of skip reasons) from `repo/tests/test_*.py`."""
    tests = Path(repo) / "tests"
    if not tests.is_dir():
        raise FileNotFoundError(f"{tests} not found: point --math-verify-repo at a checkout of huggingface/Math-Verify")
    kept: list[tuple[str, str, str, bool]] = []
    seen: set[tuple[str, str, bool]] = set()
    skipped: Counter = Counter()
    for path in sorted(tests.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "parametrize"):
                    continue
                names = _argnames(decorator)
                label = next((n for n in _LABEL_NAMES if names and n in names), None)
                if not names or "gold" not in names or "pred" not in names or label is None:
                    continue
                try:
                    rows = ast.literal_eval(decorator.args[1])
                except ValueError:
                    skipped["not a literal list"] += 1
                    continue
                for row in rows:
                    values = dict(zip(names, row))
                    changed = [k for k, v in DEFAULTS.items() if k in values and values[k] != v]
                    if changed:
                        skipped[f"label for non-default {changed[0]}"] += 1
                        continue
                    key = (values["gold"], values["pred"], bool(values[label]))
                    if key in seen:
                        skipped["duplicate"] += 1
                        continue
                    seen.add(key)
                    kept.append((f"{path.stem}::{node.name}", *key))
    return kept, skipped


if __name__ == "__main__":
    rows, skipped = load_suite(sys.argv[1])
    for test, count in sorted(Counter(r[0] for r in rows).items()):
        print(f"{count:4d}  {test}")
    print(f"{len(rows)} pairs kept; skipped: {dict(skipped)}")
