"""math: MATH-style rows, gold = the solution's last \\boxed{}, level and subject filters."""

import pytest

from rlvr.envs import load_env
from rlvr.envs.math_env import last_boxed
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status


@pytest.fixture
def path(tmp_path, env_data):
    return str(env_data.write_jsonl(tmp_path / "math.jsonl", env_data.MATH))


def test_last_boxed():
    assert last_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{x^{2}}") == "x^{2}"
    assert last_boxed("none") is None


def test_rows_gold_and_scores(path):
    env = load_env("math", train_file=path, test_file=path)
    rows = {r["answer"]: r for r in env.rows("test", 4)}
    assert set(rows) == {"\\frac{3}{4}", "3", "2\\sqrt{2}", "4"}
    ordered = list(rows.values())
    assert [r.reward for r in env.score([r["reference"] for r in ordered], ordered)] == [1.0] * 4
    results = env.score(["$\\boxed{0.75}$", "\\boxed{\\sqrt{8}}", "\\boxed{5}"],
                        [rows["\\frac{3}{4}"], rows["2\\sqrt{2}"], rows["4"]])
    assert [r.status for r in results] == [Status.CORRECT, Status.CORRECT, Status.INCORRECT]


def test_filters(path, tmp_path):
    assert {r["answer"] for r in load_env("math", test_file=path, levels=[1]).rows("test", 2)} == {"\\frac{3}{4}", "4"}
    env = load_env("math", test_file=path, subjects=["algebra"], levels=[2, 3])
    assert {r["subject"] for r in env.rows("test", 2)} == {"Algebra"}
    with pytest.raises(ValueError, match="only 2 exist"):
        env.rows("test", 3)
    with pytest.raises(ConfigError, match="'levels' must be a list of ints"):
        load_env("math", levels="5")
    bare = tmp_path / "bare.jsonl"
    bare.write_text('{"problem": "p", "solution": "\\\\boxed{1}"}\n')
    with pytest.raises(ConfigError, match="row 1 of .*has no field 'level'"):
        load_env("math", test_file=str(bare), levels=[1]).rows("test", 1)
