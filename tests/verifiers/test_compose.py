"""Composite rewards: weighted sums, gating, the status rule and spec validation."""

import math

import pytest

from rlvr.verifiers.compose import Component, Composite, build_reward
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status, VerifyResult

SPEC = [{"verifier": "exact", "weight": 0.9, "gate": "format"}, {"verifier": "format", "weight": 0.1}]
RECORD = {"answer": "7"}


def test_both_pass():
    r = build_reward(SPEC)("<think>x</think><answer>7</answer>", RECORD)
    assert (r.reward, r.status) == (1.0, Status.CORRECT)
    assert r.details["components"]["exact"] == {
        "reward": 1.0, "status": "correct", "weight": 0.9, "gated_off": False,
        "details": {"extracted": "7", "expected": "7"},
    }


def test_format_only():
    r = build_reward(SPEC)("<think>x</think><answer>8</answer>", RECORD)
    assert r.reward == pytest.approx(0.1) and r.status is Status.INCORRECT


def test_gate_blocks_right_answer_in_bad_format():
    r = build_reward(SPEC)("<answer>7</answer> trailing", RECORD)
    assert r.reward == 0.0
    assert r.status is Status.INCORRECT  # the gate's status, since the first entry was gated off
    exact = r.details["components"]["exact"]
    assert exact["gated_off"] is True and exact["status"] == "correct" and exact["reward"] == 1.0


def test_status_is_first_entry_when_not_gated():
    r = build_reward([{"verifier": "exact"}, {"verifier": "format", "weight": 2}])("<answer>x</answer>", {})
    assert r.status is Status.ERROR  # exact has no answer field; format's INCORRECT does not win
    r = build_reward([{"verifier": "exact"}, {"verifier": "format", "weight": 2}])("<think></think><answer>7</answer>", RECORD)
    assert r.reward == 3.0


def test_gated_status_from_gate_never_correct():
    def fixed(status, reward):
        return lambda completion, record: VerifyResult(reward, status)
    c = Composite([
        Component("a", fixed(Status.CORRECT, 1.0), 1.0, gate="b"),
        Component("b", fixed(Status.TIMEOUT, 0.0), 0.5),
    ])
    r = c("", {})
    assert (r.reward, r.status) == (0.0, Status.TIMEOUT)


def test_names_and_params():
    c = build_reward([
        {"verifier": "exact", "name": "num", "params": {"extract": "last_number"}},
        {"verifier": "exact", "name": "tag", "weight": 0.5},
    ])
    assert c.component_names == ["num", "tag"]
    r = c("<answer>3</answer> so 7", RECORD)
    assert r.reward == 1.0 and r.status is Status.CORRECT
    assert r.details["components"]["tag"]["status"] == "incorrect"


@pytest.mark.parametrize("spec,match", [
    ([{"verifier": "exact", "wieght": 1}], "reward entry 0 has unknown key 'wieght'"),
    ([{"verifier": "format"}, {"weight": 1}], "reward entry 1 has no 'verifier'"),
    ([{"verifier": "exact", "gate": "format"}], "gate 'format', which is not another component"),
    ([{"verifier": "exact", "gate": "exact"}], "gate 'exact', which is not another component"),
    ([{"verifier": "exact", "weight": math.inf}], "reward entry 0: 'weight' must be a finite number"),
    ([{"verifier": "exact", "weight": "1"}], "reward entry 0: 'weight' must be a finite number"),
    ([{"verifier": "format"}, {"verifier": "nope"}], "reward entry 1: unknown verifier 'nope'; available: "),
    ([{"verifier": "exact", "params": {"extrct": "full"}}], "reward entry 0: verifier 'exact' has no parameter 'extrct'"),
    ([{"verifier": "exact"}, {"verifier": "exact"}], "name 'exact' is used twice"),
    ([], "non-empty list"),
    (["exact"], "reward entry 0 must be a dict"),
])
def test_bad_spec(spec, match):
    with pytest.raises(ConfigError, match=match):
        build_reward(spec)


class _BatchOnlyJudge:
    """A verifier whose batch path is the only one allowed: it records how it was called."""

    name = "judge"

    def __init__(self):
        self.batches = []

    def __call__(self, completion, record):
        raise AssertionError("the composite must use verify_batch when a component offers it")

    def verify_batch(self, completions, records, workers=None, progress=None):
        self.batches.append(len(completions))
        return [VerifyResult(1.0 if c == r["answer"] else 0.0, Status.CORRECT if c == r["answer"] else Status.INCORRECT)
                for c, r in zip(completions, records)]


def test_verify_batch_uses_component_batches_and_matches_per_item_rules():
    judge = _BatchOnlyJudge()
    fmt = build_reward([{"verifier": "format"}]).components[0].verifier
    composite = Composite([Component("judge", judge, 0.9, gate="format"), Component("format", fmt, 0.1)])
    good = "<think></think><answer>7</answer>"
    completions = [good, "7", good]
    records = [{"answer": good}, {"answer": "7"}, {"answer": "nope"}]
    done = []
    results = composite.verify_batch(completions, records, progress=done.append)
    assert judge.batches == [3]  # one call for the whole batch
    assert sum(done) == 3
    # row 0: judge 1 and format 1 -> 0.9 + 0.1; row 1: judge right but format fails -> gated off, 0;
    # row 2: judge wrong, format right -> 0.1
    assert [r.reward for r in results] == pytest.approx([1.0, 0.0, 0.1])
    assert [r.status for r in results] == [Status.CORRECT, Status.INCORRECT, Status.INCORRECT]
