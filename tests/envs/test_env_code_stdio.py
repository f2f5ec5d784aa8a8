"""code_stdio: statement + stdin/stdout tests from JSONL, scored by the code verifier in the Docker sandbox."""

import json
import os

import pytest

from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


@pytest.fixture
def path(tmp_path, env_data):
    return str(env_data.write_jsonl(tmp_path / "code.jsonl", env_data.CODE_STDIO))


def test_rows_normalise_the_test_formats(path):
    env = load_env("code_stdio", test_file=path)
    rows = {r["messages"][0]["content"].split("\n")[0]: r for r in env.rows("test", 3)}
    assert rows["Read a word and print it reversed."]["tests"] == {"kind": "stdio", "cases": [{"stdin": "abc\n", "stdout": "cba\n"}]}
    assert rows["Read n and print n squared."]["tests"]["cases"] == [{"stdin": "3\n", "stdout": "9\n"}]  # JSON string
    assert all(r["reference"].startswith("```python\n") for r in rows.values())
    assert env.verifier_names == ["code"]


def test_bad_rows_name_field_and_row(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"statement": "s", "tests": [{"stdin": "1"}]}) + "\n")
    with pytest.raises(ConfigError, match=r"row 1 of .*test 0 needs string 'stdout'"):
        load_env("code_stdio", test_file=str(bad)).rows("test", 1)
    bad.write_text(json.dumps({"statement": "s", "tests": [{"stdin": "", "stdout": "1"}]}) + "\n" + json.dumps({"statement": "t"}) + "\n")
    with pytest.raises(ConfigError, match=r"row 2 of .*has no field 'tests'"):
        load_env("code_stdio", test_file=str(bad)).rows("test", 1)
    with pytest.raises(ConfigError, match="'backend' must be one of"):
        load_env("code_stdio", backend="nope")


@pytest.mark.skipif(os.environ.get("RLVR_SKIP_DOCKER") == "1", reason="RLVR_SKIP_DOCKER=1")
def test_references_pass_and_wrong_programs_fail_in_the_sandbox(path):
    env = load_env("code_stdio", test_file=path)
    rows = env.rows("test", 3)
    wrong = ["```python\nprint(0)\n```"] * 3
    try:
        good, bad = env.score([r["reference"] for r in rows], rows), env.score(wrong, rows)
    finally:
        env.verifier.components[0].verifier.close()
    assert [r.status for r in good] == [Status.CORRECT] * 3, [r.details for r in good]
    assert all(r.status is Status.INCORRECT and r.reward < 1 for r in bad)
