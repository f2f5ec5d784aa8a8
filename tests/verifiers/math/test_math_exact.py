"""Exact values compare exactly (one test per exact kind); decimals at their stated precision; bare answers.

Every near miss below is within 1e-6 relative of its gold, so a relative tolerance between exact
values (the rule this verifier once had) would call it correct.
"""

from fractions import Fraction

import pytest

from rlvr.verifiers.math.equal import numbers_equal
from rlvr.verifiers.math.verifier import MathVerifier
from rlvr.verifiers.result import Status


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(workers=1)
    yield v
    v.close()


def verdict(v, pred: str, gold: str) -> Status:
    return v(rf"\boxed{{{pred}}}", {"answer": gold}).status


def test_integers_are_exact(verifier):
    assert verdict(verifier, "123456789012345678", "123456789012345679") is Status.INCORRECT
    assert verdict(verifier, "123456789012345679", "123456789012345679") is Status.CORRECT


def test_rationals_are_exact(verifier):
    assert verdict(verifier, r"\frac{1000000001}{1000000000}", "1") is Status.INCORRECT
    assert verdict(verifier, r"\frac{2000000002}{2000000000}", r"\frac{1000000001}{1000000000}") is Status.CORRECT


def test_huge_exact_constants_are_exact(verifier):
    assert verdict(verifier, "18446744073709551615", "2^{64}") is Status.INCORRECT
    assert verdict(verifier, "2432902008176640001", "20!") is Status.INCORRECT
    assert verdict(verifier, "2432902008176640000", "20!") is Status.CORRECT


def test_exact_irrationals_are_exact(verifier):
    nested = "2"
    for _ in range(60):
        nested = rf"\sqrt{{{nested}}}"
    assert verdict(verifier, nested, "1") is Status.INCORRECT  # 2^(2^-60) = 1 + 6e-19
    assert verdict(verifier, r"e^{\pi\sqrt{163}}", "262537412640768744") is Status.INCORRECT  # 7.5e-13 short
    assert verdict(verifier, r"\frac{355}{113}", r"\pi") is Status.INCORRECT
    assert verdict(verifier, r"\sqrt{2}+\sqrt{3}", r"\sqrt{5+2\sqrt{6}}") is Status.CORRECT


def test_tiny_exact_values_are_exact(verifier):
    assert verdict(verifier, r"\frac{1}{2^{100}}", "0") is Status.INCORRECT
    assert verdict(verifier, r"\frac{1}{2^{100}}", r"\frac{1}{2^{99}}") is Status.INCORRECT


def test_symbolic_expressions_are_exact(verifier):
    assert verdict(verifier, r"x^2+2x+1+10^{-30}", "(x+1)^2") is Status.INCORRECT
    assert verdict(verifier, r"x^2+2x+1", "(x+1)^2") is Status.CORRECT


def test_repeating_decimals_are_exact(verifier):
    assert verdict(verifier, r"0.\overline{142857}", r"\frac{1}{7}") is Status.CORRECT
    assert verdict(verifier, r"0.\overline{142857}", r"\frac{1}{7}+10^{-30}") is Status.INCORRECT


@pytest.mark.parametrize("gold,g_approx,g_places,pred,p_approx,p_places,min_digits,ok", [
    # exact vs exact: equality only, however close
    (Fraction(1, 3), False, 0, Fraction(333333333, 10 ** 9), False, 0, 3, False),
    # exact gold, decimal prediction: equality only, however many digits (issue 50, class 5)
    (Fraction(1, 3), False, 0, Fraction("0.333"), True, 3, 3, False),
    (Fraction(1, 3), False, 0, Fraction("0.3333333"), True, 7, 3, False),
    (Fraction(1, 3), False, 0, Fraction("0.33"), True, 2, 2, False),  # an entry of a tuple too
    (Fraction(1234), False, 0, Fraction(1230), True, -1, 3, False),  # 1.23e3: a magnitude
    (Fraction(1000), False, 0, Fraction(1000), True, -2, 3, True),  # 1.0e3 is 1000
    (Fraction(1, 2), False, 0, Fraction("0.5"), True, 1, 3, True),
    # decimal gold: an equal value only, never a neighbour within half a unit of its last digit
    (Fraction("0.33"), True, 2, Fraction("0.3"), True, 1, 3, False),
    (Fraction("0.33"), True, 2, Fraction("0.333"), True, 3, 3, False),
    (Fraction("0.33"), True, 2, Fraction(1, 3), False, 0, 3, False),
    (Fraction("0.5"), True, 1, Fraction("0.54"), True, 2, 3, False),
    (Fraction("0.5"), True, 1, Fraction("0.50"), True, 2, 3, True),
    (Fraction("0.5"), True, 1, Fraction(1, 2), False, 0, 3, True),
    (Fraction("16386.17"), True, 2, Fraction("16386.169"), True, 3, 3, False),
    (Fraction("16386.17"), True, 2, Fraction("16386.16"), True, 2, 3, False),
])
def test_number_rule(gold, g_approx, g_places, pred, p_approx, p_places, min_digits, ok):
    assert numbers_equal(gold, g_approx, g_places, pred, p_approx, p_places, min_digits=min_digits) is ok


def test_decimals_inside_structures_use_the_same_rule(verifier):
    assert verdict(verifier, r"(0.6, 2.5]", r"(\frac{3}{5}, \frac{5}{2}]") is Status.CORRECT
    assert verdict(verifier, r"(0.6, 2.67]", r"(\frac{3}{5}, \frac{8}{3}]") is Status.INCORRECT
    assert verdict(verifier, r"\begin{pmatrix}0.25 & 1\end{pmatrix}", r"\begin{pmatrix}\frac14 & 1\end{pmatrix}") is Status.CORRECT
    assert verdict(verifier, r"\begin{pmatrix}0.33 & 1\end{pmatrix}", r"\begin{pmatrix}\frac13 & 1\end{pmatrix}") is Status.INCORRECT


@pytest.mark.parametrize("completion,gold", [
    ("-5", "-5"), ("7,425,000", "7425000"), ("1 000", "1000"), (r"\frac{10}{9}", "10/9"), ("28 percent", r"28\%"),
    ("the number is not 10 which is 1,000.99€", "1000.99"),
])
def test_bare_answers_lenient_by_default_strict_on_request(completion, gold):
    lenient, strict = MathVerifier(workers=1), MathVerifier(workers=1, lenient=False)
    try:
        assert lenient(completion, {"answer": gold}).status is Status.CORRECT
        r = strict(completion, {"answer": gold})
        assert r.status is Status.UNPARSABLE and r.details["reason"] == "no answer found"
    finally:
        lenient.close()
        strict.close()


def test_lenient_fallback_finds_no_number_inside_a_word(verifier):
    assert verifier("AZYUK2A", {"answer": "2"}).status is Status.UNPARSABLE


def test_lenient_must_be_a_bool():
    from rlvr.errors import ConfigError

    with pytest.raises(ConfigError, match="lenient"):
        MathVerifier(lenient="yes")


def test_rel_tol_widens_decimals_only():
    loose = MathVerifier(rel_tol=1e-2, workers=1)
    try:
        assert loose(r"\boxed{101.0}", {"answer": "100"}).status is Status.CORRECT
        assert loose(r"\boxed{101}", {"answer": "100"}).status is Status.INCORRECT  # two exact values
        assert loose(r"\boxed{\frac{101}{100}\pi}", {"answer": r"\pi"}).status is Status.INCORRECT
    finally:
        loose.close()
