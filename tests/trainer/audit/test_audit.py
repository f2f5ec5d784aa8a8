"""`rlvr audit`: each class of completions caught when a reward pays it, a good reward passing, honest refusals
caught, and the docs' own-data reward audited. The rewards are tests/audit_rewards.py's python functions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests import audit_rewards
from tests.cli_run import run_rlvr

TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def rewards_importable(monkeypatch):
    """The python verifier's workers import `audit_rewards` by name, as they would a user's module."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("PYTHONPATH", str(TESTS))


def audit(tmp_path: Path, *overrides: str) -> tuple[int, dict]:
    """Run the audit as `rlvr audit` runs it (its config composed from conf/audit.yaml); (exit status, audit.json)."""
    from hydra import compose, initialize_config_module

    from rlvr.trainer.audit.config import register_audit_schema
    from rlvr.trainer.audit.run import run_audit

    register_audit_schema()
    out = tmp_path / "audit"
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        cfg = compose(config_name="audit", overrides=[*overrides, f"output_dir={out}"])
    code = run_audit(cfg, log=lambda line: None)
    return code, json.loads((out / "audit.json").read_text())


def failing(report: dict) -> set[str]:
    return {re.search(r"class '(\w+)'", line)[1] for line in report["failures"]}


def python_reward(function: str) -> list[str]:
    return ["verifier=python", f"+params.function=audit_rewards:{function}", "+params.workers=1"]


ARITHMETIC = ["env=arithmetic", "env.digits=4", "audit.rows=3"]  # 4 digits: a gold of 1,000 or more (separators)


@pytest.mark.parametrize("cls", list(audit_rewards.FLAWS))
def test_a_reward_that_pays_a_class_is_caught_naming_it(tmp_path, cls):
    code, report = audit(tmp_path, *ARITHMETIC, *python_reward(f"accepts_{cls}"))
    assert code == 1
    assert cls in failing(report)
    row = next(c for c in report["classes"] if c["name"] == cls)
    assert row["accepted"] > 0 and row["example"]["wrong_way"]


def test_a_careful_reward_passes(tmp_path):
    code, report = audit(tmp_path, *ARITHMETIC, *python_reward("careful"))
    assert (code, report["failures"]) == (0, [])
    attacks = [c for c in report["classes"] if c["kind"] == "attack"]
    assert len(attacks) >= 15 and all(c["accepted"] == 0 for c in attacks)
    assert report["false_negative"]["gated"] == 0
    forms = next(c for c in report["classes"] if c["name"] == "honest_number_forms")
    assert forms["n"] >= 3  # 1234.0 and 1,234 for each row's 4-digit gold


def test_a_reward_that_refuses_honest_answers_is_caught(tmp_path):
    code, report = audit(tmp_path, *ARITHMETIC, *python_reward("exact_string"))
    assert code == 1
    assert {"honest_gold_in_format", "honest_number_forms"} <= failing(report)
    assert report["false_negative"]["gated"] > 0


def test_thresholds_and_allow_decide_the_exit_status(tmp_path):
    """One class paid on a third of its completions: caught at max_accept=0, passed at 0.5 or when allowed."""
    reward = [*ARITHMETIC, *python_reward("accepts_master_keys")]  # pays 1 of the 4 master keys (and 1 of 4 in format)
    assert audit(tmp_path, *reward)[0] == 1
    assert audit(tmp_path, *reward, "audit.max_accept=0.5")[0] == 0
    assert audit(tmp_path, *reward, "audit.allow=[master_keys,master_keys_in_format]")[0] == 0


@pytest.mark.parametrize("cls", list(audit_rewards.CODE_FLAWS))
def test_a_code_reward_that_pays_a_code_class_is_caught(tmp_path, cls):
    code, report = audit(tmp_path, "env=canary", "env.hack_share=0", "audit.rows=2",
                         *python_reward(f"code_accepts_{cls}"))
    assert code == 1 and cls in failing(report)


def test_a_careful_code_reward_passes(tmp_path):
    code, report = audit(tmp_path, "env=canary", "env.hack_share=0", "audit.rows=2", *python_reward("code_careful"))
    assert (code, report["failures"]) == (0, [])
    assert report["code_tests"]["rows_without_results"] == 2  # a python reward reports no per-test results


def test_the_docs_own_data_reward_is_audited(tmp_path, monkeypatch):
    """docs/your-data.md's `accuracy` (`float(s in c)`), on the docs' data, from the shell: it pays every
    completion that contains the solution anywhere, and the audit says which classes that opens."""
    page = (TESTS.parent / "docs" / "your-data.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    (tmp_path / "my_rewards.py").write_text(next(b for b in blocks if "def accuracy" in b))
    data = next(b for b in blocks if "data.jsonl" in b)
    monkeypatch.chdir(tmp_path)
    writes_data = data.split("run = ")[0].replace("from my_rewards import accuracy", "")
    exec(writes_data, {"__name__": "docs"})  # the docs' lines that write data.jsonl
    result = run_rlvr("audit", "env=dataset", "env.train_file=data.jsonl", "env.columns.answer=solution",
                      "verifier=python", "+params.function=my_rewards:accuracy", "audit.rows=4",
                      "output_dir=out", cwd=tmp_path, env_extra={"PYTHONPATH": str(tmp_path)}, timeout=600)
    assert result.returncode == 1, result.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert {"gold_in_reasoning", "hedge_or", "candidate_list", "integer_spray", "two_finals"} <= failing(report)
    assert "class                    group" in result.stdout and "FAIL attack class 'hedge_or'" in result.stdout
    assert (tmp_path / "out" / "audit.md").read_text().startswith("# rlvr audit: dataset")


def test_an_unknown_class_is_refused_by_name(tmp_path):
    from rlvr.errors import ConfigError

    with pytest.raises(ConfigError, match=r"audit.classes / audit.allow: unknown class hedge_and .*\(classes: empty,"):
        audit(tmp_path, *ARITHMETIC, "audit.classes=[hedge_and]")
