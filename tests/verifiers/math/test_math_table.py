"""The regression table (tests/data/math_cases.py) through the real path: parent fast path plus worker pool."""

import importlib.util
from pathlib import Path

import pytest

from rlvr.verifiers.math.verifier import MathVerifier

_spec = importlib.util.spec_from_file_location("math_cases", Path(__file__).parents[2] / "data" / "math_cases.py")
math_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(math_cases)
CASES = math_cases.CASES


@pytest.fixture(scope="module")
def verdicts():
    verifier = MathVerifier(workers=1)
    try:
        results = verifier.verify_batch([c for c, *_ in CASES], [{"answer": g} for _, g, *_ in CASES])
    finally:
        verifier.close()
    return results


def test_table_is_large_enough():
    assert len(CASES) >= 300


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{i}-{c[3][:40]}" for i, c in enumerate(CASES)])
def test_case(verdicts, index):
    completion, gold, label, note = CASES[index]
    result = verdicts[index]
    assert (result.status.value == "correct") == label, (completion, gold, note, result)
    assert result.reward == (1.0 if label else 0.0)


def test_every_disagreement_with_math_verify_is_explained():
    mv = pytest.importorskip("math_verify")
    unexplained = []
    for completion, gold, label, note in CASES:
        gold_text = str(gold)
        if not any(mark in gold_text for mark in ("$", "boxed", "####")):
            gold_text = f"${gold_text}$"  # math-verify reads gold answers from math mode
        try:
            verdict = mv.verify(mv.parse(gold_text), mv.parse(completion))
        except Exception:
            verdict = False
        if (verdict != label) != note.startswith("MV:"):
            unexplained.append((completion, gold, label, verdict, note))
    assert not unexplained
