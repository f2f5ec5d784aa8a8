"""The exact verifier on numbers past int()'s 4,300-digit limit (verifiers/exact.py `parse_number`): a completion's
long number is a verdict, never an exception that fails the batch it was scored in."""

import pytest

from rlvr.envs import load_env
from rlvr.verifiers.exact import ExactVerifier
from rlvr.verifiers.result import Status

LONG = "9" * 5000
GROUPED = "1" + ",234" * 2000  # 6,001 digits once the commas go


@pytest.mark.parametrize("extract,text", [("last_number", f"so {LONG}"), ("answer_tag", f"<answer>{GROUPED}</answer>"),
                                          ("answer_tag_or_last_number", f"x = {GROUPED}")],
                         ids=["last_number", "answer_tag", "answer_tag_or_last_number"])
def test_a_number_past_the_digit_limit_is_incorrect_not_an_exception(extract, text):
    r = ExactVerifier(extract=extract)(text, {"answer": "3"})
    assert (r.reward, r.status) == (0.0, Status.INCORRECT)


def test_it_still_equals_the_same_text():
    assert ExactVerifier()(f"<answer>{LONG}</answer>", {"answer": LONG}).status is Status.CORRECT


def test_one_long_number_costs_only_its_own_completion():
    env = load_env("arithmetic", prompt="instruct")
    row = {"id": "x", "messages": [], "answer": "47", "a": 12, "b": 35, "op": "+"}
    scored = env.score(["<answer>47</answer>", f"12 + 35 = {LONG}", "<answer>46</answer>"], [row] * 3)
    assert [r.reward for r in scored] == pytest.approx([1.0, 0.0, 0.1])
