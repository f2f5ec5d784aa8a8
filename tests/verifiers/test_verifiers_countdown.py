"""Countdown scoring and the safe arithmetic evaluator under hostile input."""

from fractions import Fraction

import pytest

from rlvr.verifiers.countdown import CountdownVerifier
from rlvr.verifiers.result import Status
from rlvr.verifiers.safe_arith import SafeArithError, evaluate

RECORD = {"numbers": [3, 5, 7], "target": 22}


def answer(expr):
    return f"<think></think><answer>{expr}</answer>"


@pytest.mark.parametrize("expr,match", [
    ("2**99999999", "Pow"),
    ("9**9**9", "Pow"),
    ("__import__('os')", "Call"),
    ("(1).__class__", "Attribute"),
    ("x + 1", "Name"),
    ("[1, 2][0]", "Subscript"),
    ("1.5 + 2", "literal 1.5"),
    ("'a' * 3", "literal 'a'"),
    ("1 < 2", "Compare"),
    ("+3", "UAdd"),
    ("7 // 2", "FloorDiv"),
    ("7 % 2", "Mod"),
    ("0x10 + 1", "'0x10'"),
    ("1_000", "'1_000'"),
    ("True + 1", "literal True"),
    ("lambda: 1", "Lambda"),
    ("1 +", "not a valid expression"),
    ("1\x00", "not a valid expression"),
])
def test_refused(expr, match, monkeypatch):
    import rlvr.verifiers.safe_arith as safe_arith

    computed = []
    evaluate_tree = safe_arith._eval
    monkeypatch.setattr(safe_arith, "_eval", lambda *args: computed.append(args) or evaluate_tree(*args))
    with pytest.raises(SafeArithError, match=match):
        evaluate(expr)
    assert computed == [], "refused before computing anything (9**9**9 would never finish)"


def test_length_cap():
    huge = "+".join(["1"] * 5000)
    with pytest.raises(SafeArithError, match="9999 characters, more than the limit of 200"):
        evaluate(huge)
    with pytest.raises(SafeArithError, match="7 characters, more than the limit of 5"):
        evaluate("1+2+3+4", max_chars=5)


def test_node_cap():
    expr = "+".join(["1"] * 40)  # 40 literals + 39 BinOps = 79 expression nodes
    with pytest.raises(SafeArithError, match="79 nodes, more than the limit of 64"):
        evaluate(expr)
    assert evaluate(expr, max_nodes=79).value == 40


def test_exact_fractions_and_literals():
    r = evaluate("7/2*2 - -(1)")
    assert r.value == Fraction(8) and r.literals == (7, 2, 2, 1)
    assert evaluate("1/3").value == Fraction(1, 3)


def test_division_by_zero():
    with pytest.raises(SafeArithError, match="division by zero"):
        evaluate("5/(3-3)")


def test_correct():
    r = CountdownVerifier()(answer("3*5+7"), RECORD)
    assert (r.reward, r.status) == (1.0, Status.CORRECT)
    assert r.details["value"] == "22" and r.details["used"] == [3, 5, 7]


def test_wrong_value():
    r = CountdownVerifier()(answer("3+5+7"), RECORD)
    assert (r.reward, r.status) == (0.0, Status.INCORRECT)
    assert r.details["reason"] == "value 15 != target 22"


def test_number_reuse():
    r = CountdownVerifier()(answer("3*5+7+7-7"), RECORD)
    assert r.status is Status.INCORRECT
    assert r.details["reason"] == "uses numbers not given (or reused): [7, 7]"


def test_number_not_given():
    r = CountdownVerifier()(answer("2*11"), {"numbers": [2, 11, 4], "target": 22})
    assert r.details["reason"] == "does not use: [4]"
    r = CountdownVerifier()(answer("(3*5+7)*1"), RECORD)
    assert r.details["reason"] == "uses numbers not given (or reused): [1]"


def test_missing_number_allowed_when_use_all_false():
    r = CountdownVerifier(use_all=False)(answer("2*11"), {"numbers": [2, 11, 4], "target": 22})
    assert r.status is Status.CORRECT
    r = CountdownVerifier(use_all=False)(answer("2*11*1"), {"numbers": [2, 11, 4], "target": 22})
    assert r.status is Status.INCORRECT


def test_fractional_intermediate_counts():
    r = CountdownVerifier()(answer("(7/2)*4"), {"numbers": [7, 2, 4], "target": 14})
    assert r.status is Status.CORRECT


def test_refused_or_missing_expression_is_unparsable():
    r = CountdownVerifier()(answer("3**5+7"), RECORD)
    assert (r.reward, r.status) == (0.0, Status.UNPARSABLE)
    assert "Pow" in r.details["reason"]
    r = CountdownVerifier()("3*5+7", RECORD)
    assert r.status is Status.UNPARSABLE and r.details["reason"] == "no <answer> expression"
    assert CountdownVerifier()(answer("5/(3-3)+7"), RECORD).details["reason"] == "division by zero"


def test_bad_record_is_error():
    r = CountdownVerifier()(answer("1"), {"numbers": [1]})
    assert (r.status, r.details) == (Status.ERROR, {"error": "record has no 'target' field"})
    r = CountdownVerifier()(answer("1"), {"numbers": ["1"], "target": 1})
    assert r.status is Status.ERROR and "'numbers'" in r.details["error"]


@pytest.mark.parametrize("expr", ["'\\d' + 3", "3 \\times 4", "'\\(3\\)'"])
def test_a_model_expression_python_warns_about_is_refused_without_a_warning(expr):
    """An invalid escape in a model's expression made the parser print a SyntaxWarning (DeprecationWarning
    before Python 3.12) into countdown's progress bar; it is refused without one."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(SafeArithError):
            evaluate(expr)
    assert not caught, [str(w.message) for w in caught]
