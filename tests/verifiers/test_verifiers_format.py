"""The R1 format rule: exactly one think block then one answer block, nothing else."""

import pytest

from rlvr.verifiers.format import FormatVerifier
from rlvr.verifiers.registry import build_verifier
from rlvr.verifiers.result import Status

GOOD = [
    "<think>2+2 is 4</think><answer>4</answer>",
    "<think></think><answer>4</answer>",  # empty think allowed
    "  \n<think>a\nb</think>\n\n<answer> 4 </answer>\n  ",
]
BAD = [
    ("<think>x</think><answer>4</answer> trailing", "text after </answer>"),
    ("intro <think>x</think><answer>4</answer>", "text before <think>"),
    ("<think>x</think>so<answer>4</answer>", "text between </think> and <answer>"),
    ("<think>x</think><answer>4</answer><answer>5</answer>", "more than one <answer>"),
    ("<think>x</think><think>y</think><answer>4</answer>", "more than one <think>"),
    ("<think>x<answer>4</answer></think>", "tags out of order or nested"),
    ("<answer>4</answer><think>x</think>", "tags out of order or nested"),
    ("<answer>4</answer>", "missing <think>"),
    ("<think>x</think>", "missing <answer>"),
    ("<think>x</think><answer>4", "missing </answer>"),
    ("", "missing <think>"),
]


@pytest.mark.parametrize("text", GOOD)
def test_well_formed_passes(text):
    r = FormatVerifier()(text, {})
    assert (r.reward, r.status) == (1.0, Status.CORRECT)


@pytest.mark.parametrize("text,reason", BAD)
def test_malformed_fails_with_reason(text, reason):
    r = FormatVerifier()(text, {})
    assert (r.reward, r.status) == (0.0, Status.INCORRECT)
    assert r.details == {"reason": reason}


def test_think_false_requires_only_the_answer_block():
    v = build_verifier("format", think=False)
    assert v("<answer>4</answer>", {}).status is Status.CORRECT
    assert v("<think>x</think><answer>4</answer>", {}).status is Status.CORRECT
    assert v("<answer>4</answer> junk", {}).details == {"reason": "text after </answer>"}
    assert v("<think>x</think>", {}).details == {"reason": "missing <answer>"}


def test_to_dict_is_json_friendly():
    r = FormatVerifier()("<answer>4</answer>", {})
    assert r.to_dict() == {"reward": 0.0, "status": "incorrect", "details": {"reason": "missing <think>"}}


EMPTY_ANSWERS = ["<think></think><answer></answer>", "<think>x</think><answer> </answer>",
                 "<think></think><answer>\n\t </answer>\n"]


@pytest.mark.parametrize("text", EMPTY_ANSWERS)
@pytest.mark.parametrize("params", [{}, {"think": False}, {"think": False, "anchored": False}])
def test_an_empty_answer_is_not_the_format(text, params):
    # a format reward paid for an empty answer is a floor a policy keeps without answering
    r = build_verifier("format", **params)(text, {})
    assert (r.reward, r.status, r.details) == (0.0, Status.INCORRECT, {"reason": "empty <answer>"})


@pytest.mark.parametrize("params", [{"think": False}, {"think": False, "anchored": False}])
def test_an_empty_answer_without_think_is_not_the_format(params):
    for text in ("<answer></answer>", "<answer> </answer>", "So: <answer>  </answer>"):
        r = build_verifier("format", **params)(text, {})
        if text.startswith("So") and params.get("anchored", True):
            assert r.details == {"reason": "text before <answer>"}
        else:
            assert r.details == {"reason": "empty <answer>"}


@pytest.mark.parametrize("env_name,prompt", [("arithmetic", "base"), ("arithmetic", "instruct"),
                                             ("countdown", "base"), ("countdown", "instruct")])
def test_no_environment_pays_anything_for_an_empty_answer(env_name, prompt):
    from rlvr.envs import load_env

    env = load_env(env_name, prompt=prompt)
    row = env.rows("test", 1, seed=0)[0]
    scored = env.score(["<think></think><answer></answer>", "<answer> </answer>"], [row] * 2)
    assert [r.reward for r in scored] == [0.0, 0.0]
