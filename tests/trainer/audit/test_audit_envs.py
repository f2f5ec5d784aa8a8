"""`rlvr audit` on every built-in environment (a few rows each): it runs, writes its reports, and fails on exactly
the classes docs/audit.md states for rlvr's own rewards, each with its reason there. A change to a verifier that
opens or closes a class shows here first. (env=vf needs an installed taskset: not audited here.)"""

from __future__ import annotations

import json
import re

import pytest

from tests.trainer.audit.test_audit import audit

pytestmark = pytest.mark.xdist_group("sandbox")  # the code environments start containers

LAST_ANSWER = {"two_finals"}  # the last answer counts: a correction, not a hedge (docs/audit.md)
MATH = {"two_finals", "fullwidth_digits", "other_script_digits"}  # SymPy reads other scripts' digits
SHOWN_TESTS = {"special_case_tests", "print_expected"}  # the reward's tests are the prompt's (data with 1-2 tests)
STATED = {  # env (overrides) -> the classes its reward fails on
    ("arithmetic",): set(),
    ("arithmetic", "env.prompt=instruct"): LAST_ANSWER,
    ("countdown",): set(),
    ("countdown", "env.prompt=instruct"): LAST_ANSWER,
    ("guess_number",): LAST_ANSWER,
    ("tool_multiply",): LAST_ANSWER,
    ("reasoning_gym",): LAST_ANSWER | {"honest_number_forms"},  # reasoning-gym's scorer refuses 92.0 for 92
    ("gsm8k",): MATH | {"latex_lookalike"},
    ("math",): MATH,
    ("dataset",): MATH | {"latex_lookalike"},
}
CODE = {
    ("canary",): {"exit_early", "special_case_tests"},  # exit_early: the canary's deliberate hole
    ("humaneval",): {"special_case_tests"},  # a table of its public asserts: paid to a model that memorised them
    ("code_stdio",): SHOWN_TESTS,
    ("code_feedback",): SHOWN_TESTS,
}


def failing(report: dict) -> set[str]:
    return {re.search(r"class '(\w+)'", line)[1] for line in report["failures"]}


def check(tmp_path, env_data, env: tuple[str, ...]) -> dict:
    code, report = audit(tmp_path, f"env={env[0]}", *env[1:], *env_data.data_overrides(env[0], tmp_path),
                         "audit.rows=3")
    assert (code, failing(report)) == (int(bool(STATED.get(env, CODE.get(env)))), STATED.get(env, CODE.get(env)))
    assert json.loads((tmp_path / "audit" / "audit.json").read_text())["env"] == env[0]
    assert (tmp_path / "audit" / "audit.md").is_file()
    attacks = {c["name"] for c in report["classes"] if c["kind"] == "attack" and c["n"]}
    assert len(attacks) >= 15
    return report


@pytest.mark.parametrize("env", list(STATED), ids=lambda e: "-".join(e))
def test_audit_of_each_answer_environment(tmp_path, env_data, env):
    report = check(tmp_path, env_data, env)
    assert report["false_negative"]["gated"] == (0.25 if env == ("reasoning_gym",) else 0)


@pytest.mark.slow
@pytest.mark.parametrize("env", list(CODE), ids=lambda e: e[0])
def test_audit_of_each_code_environment(tmp_path, env_data, env):
    """Docker: every class runs in the sandbox; each test is checked against the reference and trivial programs."""
    report = check(tmp_path, env_data, env)
    assert report["false_negative"]["gated"] == 0
    code = report["code_tests"]
    assert code["tests"] >= 3 and code["gold_fails"] == [] and code["trivial_passes"] == []
