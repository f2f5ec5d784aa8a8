"""Held-back tests: code_stdio's `hidden_tests` split, the code verifier's shown/hidden pass rates and
`hidden_reward`, and the step metrics (tests/shown_pass, tests/hidden_pass, hack/hidden_gap)."""

from __future__ import annotations

import json
import os

import pytest
from rlvr.envs.code_stdio import CodeStdioEnv
from rlvr.errors import ConfigError
from rlvr.trainer.experience.metrics import hack_metrics
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.result import Status, VerifyResult

pytestmark = pytest.mark.xdist_group("sandbox")

CASES = [{"stdin": f"{a} {b}\n", "stdout": f"{a + b}\n"} for a, b in ((1, 2), (5, 7), (10, 20), (3, 3))]
HONEST = "a, b = map(int, input().split())\nprint(a + b)\n"
FITS_SHOWN = "s = input()\nprint({'1 2': 3, '5 7': 12}.get(s.strip(), 0))\n"  # knows the two shown cases only
CALL = {"kind": "call", "fn": "add", "cases": [{"args": [1, 2], "expected": 3}]}
CALL_HIDDEN = {"kind": "call", "fn": "add", "cases": [{"args": [4, 4], "expected": 8}, {"args": [0, 9], "expected": 9}]}


def _record(held=2):
    return {"tests": {"kind": "stdio", "cases": CASES[:4 - held]}, "hidden_tests": {"kind": "stdio", "cases": CASES[4 - held:]}}


@pytest.fixture(scope="module")
def sandboxed():
    if os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    made = []

    def make(**params):
        made.append(CodeVerifier(timeout_s=5, workers=2, **params))
        return made[-1]
    yield make
    for v in made:
        v.close()


def test_reward_from_shown_logs_both_pass_rates(sandboxed):
    v = sandboxed(hidden_reward="shown")
    honest, fitted = v.verify_batch([f"```python\n{HONEST}```", f"```python\n{FITS_SHOWN}```"], [_record()] * 2)
    assert (honest.reward, honest.status, honest.details["hidden_gap"]) == (1.0, Status.CORRECT, 0.0)
    assert (fitted.reward, fitted.status) == (1.0, Status.CORRECT)  # the reward sees the shown cases only
    assert (fitted.details["shown_pass"], fitted.details["hidden_pass"], fitted.details["hidden_gap"]) == (1.0, 0.0, 1.0)
    assert "hidden_gap" not in v(f"```python\n{HONEST}```", {"tests": {"kind": "stdio", "cases": CASES}}).details


def test_by_default_the_reward_counts_the_hidden_cases_and_call_cases_too(sandboxed):
    v = sandboxed()  # hidden_reward=both: a lookup table of the shown cases earns their share only
    fitted = v(f"```python\n{FITS_SHOWN}```", _record())
    assert (fitted.reward, fitted.status, fitted.details["hidden_gap"]) == (0.5, Status.INCORRECT, 1.0)
    fake = "def add(a, b):\n    return 3\n"
    result = sandboxed(hidden_reward="shown")(f"```python\n{fake}```", {"tests": CALL, "hidden_tests": CALL_HIDDEN})
    assert (result.reward, result.details["hidden_pass"], result.details["hidden_gap"]) == (1.0, 0.0, 1.0)


def test_bad_hidden_tests_and_params():
    v = CodeVerifier()
    assert v("x", {"tests": CALL, "hidden_tests": {"kind": "stdio", "cases": CASES}}).status is Status.ERROR
    assert "hidden_tests" in v("x", {"tests": CALL, "hidden_tests": {"kind": "call"}}).details["error"]
    with pytest.raises(ConfigError, match="hidden_reward"):
        CodeVerifier(hidden_reward="hidden")
    with pytest.raises(ConfigError, match="hidden_tests"):
        CodeStdioEnv(train_file="x.jsonl", hidden_tests=-1)


def test_code_stdio_holds_back_the_last_cases(tmp_path):
    path = tmp_path / "add.jsonl"
    path.write_text(json.dumps({"statement": "Add two numbers.", "tests": CASES}) + "\n"
                    + json.dumps({"statement": "One case.", "tests": CASES[:1]}) + "\n")
    plain = {r["messages"][0]["content"]: r for r in CodeStdioEnv(train_file=str(path), test_file=str(path)).rows("train", 2)}
    held = {r["id"]: r for r in CodeStdioEnv(train_file=str(path), test_file=str(path), hidden_tests=3).rows("train", 2)}
    assert all("hidden_tests" not in r and "Example" not in r["messages"][0]["content"] for r in plain.values())
    two = next(r for r in held.values() if len(r["tests"]["cases"]) + len(r.get("hidden_tests", {}).get("cases", [])) == 4)
    assert two["tests"]["cases"] == CASES[:1] and two["hidden_tests"]["cases"] == CASES[1:]
    assert "Example input:\n1 2\n" in two["messages"][0]["content"] and "10 20" not in two["messages"][0]["content"]
    one = next(r for r in held.values() if r is not two)
    assert one["tests"]["cases"] == CASES[:1] and "hidden_tests" not in one  # one case stays shown


def test_step_metrics_report_the_gap():
    results = [VerifyResult(1.0, Status.CORRECT, {"shown_pass": 1.0, "hidden_pass": 0.0}),
               VerifyResult(1.0, Status.CORRECT, {"components": {"code": {"reward": 1.0, "details": {
                   "shown_pass": 1.0, "hidden_pass": 1.0}}}})]
    metrics = hack_metrics(results)
    assert (metrics["tests/shown_pass"], metrics["tests/hidden_pass"], metrics["hack/hidden_gap"]) == (1.0, 0.5, 0.5)
    assert "hack/hidden_gap" not in hack_metrics([VerifyResult(1.0, Status.CORRECT)])
