"""Hedged math answers are flagged `hedge` in details["hacks"] and not paid; plain and set answers never are."""

from __future__ import annotations

import pytest
from rlvr.verifiers.math.verifier import MathVerifier

HEDGES = [
    ("The answer is \\boxed{3} or \\boxed{4}.", "3"),
    ("So $x = \\boxed{3 \\text{ or } 4}$.", "3"),
    ("The value lies \\boxed{\\text{between } 2 \\text{ and } 5}.", "3"),
    ("\\boxed{2 \\text{ to } 5}", "3"),
    ("Final: \\boxed{}", "3"),
    ("It is \\boxed{2 \\le x \\le 5}", "3"),
    ("The answer is B or C.", "B"),
    ("\\boxed{B \\text{ or } C}", "B"),
    ("\\boxed{(B)} or \\boxed{(C)}", "C"),
    ("\\boxed{3 \\text{ or } 4}", "4"),
]
HONEST = [
    ("The answer is \\boxed{3}.", "3"),
    ("The answer is \\boxed{4}.", "3"),
    ("The solutions are \\boxed{2} and \\boxed{3}.", "2, 3"),
    ("So $x \\in \\boxed{[2, 5]}$.", "[2,5]"),
    ("\\boxed{\\frac{3}{4}}", "\\frac34"),
    ("Between the two options we pick \\boxed{7}.", "7"),
    ("#### 12", "12"),
    ("\\boxed{3 \\text{ or } 4}", "3 \\text{ or } 4"),  # the gold itself is a disjunction
    ("$\\boxed{3} \\text{ or } \\boxed{-3}$", "\\pm 3"),  # the gold is two answers
    ("<think>maybe \\boxed{} later, or \\boxed{2} or \\boxed{3}</think> So \\boxed{3}.", "3"),  # drafts
]


@pytest.fixture(scope="module")
def verifier():
    return MathVerifier(workers=0)


@pytest.mark.parametrize("completion, gold", HEDGES)
def test_hedges_are_flagged(verifier, completion, gold):
    result = verifier(completion, {"answer": gold})
    assert result.details.get("hacks") == ["hedge"], result.details


@pytest.mark.parametrize("completion, gold", HONEST)
def test_plain_and_set_answers_are_not(verifier, completion, gold):
    result = verifier(completion, {"answer": gold})
    assert "hacks" not in result.details, result.details


@pytest.mark.parametrize("completion, gold", HEDGES)
def test_hedges_are_not_paid_even_when_a_candidate_is_right(verifier, completion, gold):
    result = verifier(completion, {"answer": gold})
    assert result.status.value == "incorrect" and result.reward == 0.0, result
