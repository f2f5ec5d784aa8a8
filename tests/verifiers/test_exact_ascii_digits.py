"""The exact verifier reads numbers in ASCII digits only: `rlvr audit` found full-width and other scripts' digits
(Python's `\\d` and `int()` read them) paid as the gold answer."""

import pytest

from rlvr.verifiers.exact import ExactVerifier
from rlvr.verifiers.result import Status


@pytest.mark.parametrize("digits", ["１４１", "١٤١", "१४१", "1٤1"])
def test_other_scripts_digits_are_not_the_number(digits):
    result = ExactVerifier()(f"<think></think><answer>{digits}</answer>", {"answer": "141"})
    assert (result.reward, result.status) == (0.0, Status.INCORRECT)


@pytest.mark.parametrize("text", ["141", "141.0", " 141 ", "+141"])
def test_ascii_forms_of_the_number_still_match(text):
    assert ExactVerifier()(f"<answer>{text}</answer>", {"answer": "141"}).status is Status.CORRECT
