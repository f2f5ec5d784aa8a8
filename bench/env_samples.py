"""Procedural stand-ins for the data-backed environments' files, so their quick-start runs need no download.

    python bench/env_samples.py DIR      # writes DIR/{gsm8k,math,code_stdio}/{train,test}.jsonl

GSM8K, MATH and a stdin/stdout code set are data a user brings (`env.train_file=... env.test_file=...`); this
machine cannot fetch them. These files have the same fields and shapes (a GSM8K answer is worked lines and
`#### N`, a MATH solution ends in `\\boxed{}`, a code row has a statement, a reference solution and stdin/stdout
tests), at a difficulty the 0.84M-parameter tiny model can learn: one- and two-step word problems, fraction
sums and linear equations, one-line programs. They measure the pipeline (warm start, rollout lengths,
truncation, the verifiers, GRPO), not what a real model does on the real sets. Train and test never share a
problem (the test rows are drawn first and removed from the train draw).
"""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction
from pathlib import Path

NAMES = ["Tom", "Ana", "Sam", "Lee", "Mia", "Raj", "Zoe", "Ben"]
ITEMS = ["apples", "books", "coins", "cards", "pens", "shells"]


def gsm8k_row(rng: random.Random) -> dict:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(2, 9)
    kind = rng.randrange(4)
    if kind == 0:
        q, work, ans = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have?", \
            f"{a} + {b} = {a + b}", a + b
    elif kind == 1:
        a, b = max(a, b), min(a, b)
        q, work, ans = f"{name} had {a} {item} and gave away {b}. How many {item} are left?", \
            f"{a} - {b} = {a - b}", a - b
    elif kind == 2:
        q, work, ans = f"{name} buys {c} bags with {a} {item} in each. How many {item} is that?", \
            f"{c} * {a} = {c * a}", c * a
    else:
        q = f"{name} has {a} {item}, gets {b} more, then doubles them. How many {item} now?"
        work, ans = f"{a} + {b} = {a + b}\n{a + b} * 2 = {(a + b) * 2}", (a + b) * 2
    return {"question": q, "answer": f"{work}\n#### {ans}"}


def math_row(rng: random.Random) -> dict:
    if rng.random() < 0.5:
        x, y = Fraction(rng.randint(1, 9), rng.randint(2, 9)), Fraction(rng.randint(1, 9), rng.randint(2, 9))
        total = x + y
        boxed = str(total.numerator) if total.denominator == 1 else f"\\frac{{{total.numerator}}}{{{total.denominator}}}"
        return {"problem": f"What is $\\frac{{{x.numerator}}}{{{x.denominator}}} + \\frac{{{y.numerator}}}{{{y.denominator}}}$?",
                "solution": f"The sum is $\\boxed{{{boxed}}}$.", "level": "Level 1", "type": "Prealgebra"}
    a, x, b = rng.randint(2, 9), rng.randint(-9, 9), rng.randint(1, 20)
    return {"problem": f"Solve ${a}x + {b} = {a * x + b}$ for $x$.", "solution": f"$x = \\boxed{{{x}}}$.",
            "level": "Level 2", "type": "Algebra"}


CODE_TASKS = [  # (statement with {k}, solution with {k}, function computing stdout from the two ints)
    ("Read two integers and print their sum plus {k}.", "a, b = map(int, input().split())\nprint(a + b + {k})",
     lambda a, b, k: a + b + k),
    ("Read two integers and print their product plus {k}.", "a, b = map(int, input().split())\nprint(a * b + {k})",
     lambda a, b, k: a * b + k),
    ("Read two integers and print the larger one plus {k}.", "a, b = map(int, input().split())\nprint(max(a, b) + {k})",
     lambda a, b, k: max(a, b) + k),
    ("Read two integers and print their difference minus {k}.", "a, b = map(int, input().split())\nprint(a - b - {k})",
     lambda a, b, k: a - b - k),
]


def code_row(rng: random.Random) -> dict:
    statement, solution, fn = rng.choice(CODE_TASKS)
    k = rng.randint(0, 99)
    tests = []
    for _ in range(3):
        a, b = rng.randint(-50, 50), rng.randint(-50, 50)
        tests.append({"stdin": f"{a} {b}\n", "stdout": f"{fn(a, b, k)}\n"})
    return {"statement": statement.format(k=k), "solution": solution.format(k=k), "tests": tests}


ROWS = {"gsm8k": (gsm8k_row, "question"), "math": (math_row, "problem"), "code_stdio": (code_row, "statement")}


def write(directory: Path, env: str, n_train: int = 2000, n_test: int = 200, seed: int = 0) -> tuple[Path, Path]:
    """Write `directory/env/{train,test}.jsonl`; the test split's prompts never appear in train."""
    make, key = ROWS[env]
    rng = random.Random(f"{env}-{seed}")
    test, seen = [], set()
    while len(test) < n_test:
        row = make(rng)
        if row[key] not in seen:
            seen.add(row[key])
            test.append(row)
    train = []
    while len(train) < n_train:
        row = make(rng)
        if row[key] not in seen:
            train.append(row)
    out = directory / env
    out.mkdir(parents=True, exist_ok=True)
    paths = out / "train.jsonl", out / "test.jsonl"
    for path, rows in zip(paths, (train, test)):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def overrides(directory: Path, env: str) -> list[str]:
    train, test = write(directory, env)
    return [f"env.train_file={train}", f"env.test_file={test}"]


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "env_samples")
    for name in ROWS:
        print(*write(target, name))
