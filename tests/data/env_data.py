"""Small local data files for the data-backed environments (gsm8k, math, code_stdio, dataset): nothing downloads."""

from __future__ import annotations

import json
from pathlib import Path

GSM8K = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 12 eggs. How many eggs are in 100 boxes?", "answer": "12 * 100 = 1200\n#### 1,200"},
    {"question": "Sam had 10 dollars and spent 4. How much is left?", "answer": "10 - 4 = 6\n#### 6"},
    {"question": "Each of 5 bags has 2 balls. How many balls?", "answer": "5 * 2 = 10\n#### 10"},
]
MATH = [
    {"problem": "What is $1/2 + 1/4$?", "solution": "We get $\\frac{2}{4}+\\frac{1}{4}=\\boxed{\\frac{3}{4}}$.",
     "level": "Level 1", "type": "Prealgebra"},
    {"problem": "Solve $x^2=9$ for $x>0$.", "solution": "$x^2=9$ so $x=\\boxed{3}$ (not $\\boxed{-3}$). Final: $\\boxed{3}$",
     "level": "Level 2", "type": "Algebra"},
    {"problem": "Simplify $\\sqrt{8}$.", "solution": "$\\sqrt{8}=\\boxed{2\\sqrt{2}}$", "level": "Level 3", "type": "Algebra"},
    {"problem": "How many primes are below 10?", "solution": "2, 3, 5, 7: $\\boxed{4}$", "level": "Level 1",
     "type": "Number Theory"},
]
CODE_STDIO = [
    {"statement": "Read two integers and print their sum.", "solution": "a, b = map(int, input().split())\nprint(a + b)",
     "tests": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 7\n", "stdout": "12\n"}]},
    {"statement": "Read a word and print it reversed.", "solution": "print(input()[::-1])",
     "tests": [{"input": "abc\n", "output": "cba\n"}]},
    {"statement": "Read n and print n squared.", "solution": "n = int(input())\nprint(n * n)",
     "tests": json.dumps([{"stdin": "3\n", "stdout": "9\n"}])},
]
DATASET = [  # env=dataset under its default columns: prompt, answer
    {"prompt": "What is 2 + 3?", "answer": "5", "source": "made up"},
    {"prompt": "What is half of 9?", "answer": "\\frac{9}{2}", "source": "made up"},
    {"prompt": "How many sides has a hexagon?", "answer": "6", "source": "made up"},
]
ROWS = {"gsm8k": GSM8K, "math": MATH, "code_stdio": CODE_STDIO, "code_feedback": CODE_STDIO, "dataset": DATASET}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def data_overrides(env: str, directory: Path) -> list[str]:
    """`env.train_file=... env.test_file=...` overrides pointing at small files written into `directory`."""
    if env not in ROWS:
        return []
    train = write_jsonl(directory / f"{env}_train.jsonl", ROWS[env])
    test = write_jsonl(directory / f"{env}_test.jsonl", ROWS[env])
    return [f"env.train_file={train}", f"env.test_file={test}"]
