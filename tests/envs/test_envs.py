"""Built-in environments: split disjointness, determinism, references that verify, config errors."""

import pytest

from rlvr.envs import Env, load_env
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status

ENVS = ["arithmetic", "countdown"]


@pytest.mark.parametrize("name", ENVS)
def test_train_and_test_never_share_a_problem(name):
    env = load_env(name)
    test_ids = {r["id"] for r in env.rows("test", 500, seed=0)}
    train_ids = {r["id"] for seed in range(5) for r in env.rows("train", 2000, seed=seed)}
    assert len(test_ids) == 500 and len(train_ids) > 1000
    assert not test_ids & train_ids


@pytest.mark.parametrize("name", ENVS)
def test_deterministic_and_seeded(name):
    env = load_env(name)
    for split in ("train", "test"):
        assert env.rows(split, 50, seed=3) == load_env(name).rows(split, 50, seed=3)
        assert env.rows(split, 50, seed=3) != env.rows(split, 50, seed=4)
        assert env.rows(split, 20, seed=3) == env.rows(split, 50, seed=3)[:20]


@pytest.mark.parametrize("name", ENVS)
def test_test_rows_distinct(name):
    rows = load_env(name).rows("test", 1000, seed=1)
    assert len({r["id"] for r in rows}) == 1000


@pytest.mark.parametrize("name", ENVS)
def test_references_score_full_reward(name):
    env = load_env(name)
    rows = env.rows("train", 1000, seed=7) + env.rows("test", 300, seed=7)
    results = env.score([r["reference"] for r in rows], rows)
    assert {(r.reward, r.status) for r in results} == {(1.0, Status.CORRECT)}
    assert env.verifier_names == [name if name == "countdown" else "exact", "format"]


@pytest.mark.parametrize("name", ENVS)
def test_row_shape(name):
    row = load_env(name).rows("train", 1, seed=0)[0]
    assert {"id", "messages", "answer", "reference"} <= set(row)
    assert row["id"].startswith(f"{name}/")
    assert row["messages"][0]["role"] == "user" and isinstance(row["answer"], str)


def test_arithmetic_rows_exact():
    env = load_env("arithmetic", ops=["-"], digits=1, prompt_template="What is {a} {op} {b}?")
    for row in env.rows("train", 200, seed=0) + env.rows("test", 5, seed=0):
        assert row["a"] >= row["b"] and int(row["answer"]) == row["a"] - row["b"] >= 0
        assert row["messages"] == [{"role": "user", "content": f"What is {row['a']} - {row['b']}?"}]
        assert row["id"] == f"arithmetic/{row['a']}-{row['b']}"
        assert row["reference"] == f"<think></think><answer>{row['answer']}</answer>"
    negative = load_env("arithmetic", ops=["-"], allow_negative=True).rows("train", 200, seed=0)
    assert any(int(r["answer"]) < 0 for r in negative)


def test_arithmetic_operand_range():
    rows = load_env("arithmetic", digits=3, ops=["+"]).rows("train", 500, seed=0)
    assert all(0 <= r["a"] < 1000 and 0 <= r["b"] < 1000 for r in rows)
    assert max(r["a"] for r in rows) >= 100
    assert len({r["id"] for r in load_env("arithmetic", digits=3).rows("test", 300, seed=0)}) == 300


def test_countdown_rows():
    env = load_env("countdown", num_numbers=4, max_number=9)
    for row in env.rows("train", 300, seed=0):
        assert len(row["numbers"]) == 4 and all(1 <= x <= 9 for x in row["numbers"])
        assert 1 <= row["target"] <= 1000 and row["answer"] == str(row["target"])
    for k in (2, 6):
        env = load_env("countdown", num_numbers=k, max_number=100)
        rows = env.rows("train", 200, seed=0)
        assert {r.status for r in env.score([r["reference"] for r in rows], rows)} == {Status.CORRECT}


def test_too_many_test_rows_reports_how_many_exist():
    env = load_env("arithmetic", digits=1, ops=["+"], test_fraction=0.2)
    exists = len(env._all_test())  # about 20 of the 100 problems a+b with one digit
    assert 0 < exists < 100
    assert len(env.rows("test", exists, seed=0)) == exists
    with pytest.raises(ValueError, match=f"asked for {exists + 1} test rows but only {exists} distinct test problems exist"):
        env.rows("test", exists + 1)
    tiny = load_env("countdown", num_numbers=2, max_number=2, test_fraction=0.5)
    with pytest.raises(ValueError, match=r"asked for 100 distinct test problems but only \d+ exist"):
        tiny.rows("test", 100)


def test_unknown_split_named():
    with pytest.raises(ValueError, match="unknown split 'validation'; available: train, test"):
        load_env("arithmetic").rows("validation", 3)


@pytest.mark.parametrize("name,config,match", [
    ("arithmetic", {"ops": ["+", "/"]}, "'ops' has unknown op '/'"),
    ("arithmetic", {"ops": ["+", "+"]}, "'ops' lists an op twice"),
    ("arithmetic", {"digits": 0}, "'digits' must be an int >= 1"),
    ("arithmetic", {"test_fraction": 1.0}, "'test_fraction' must be a number in \\[0, 1\\)"),
    ("arithmetic", {"prompt_template": "{x}+{y}"}, "'prompt_template'"),
    ("countdown", {"num_numbers": 7}, "'num_numbers' must be an int in 2..6"),
    ("countdown", {"max_number": 0}, "'max_number' must be an int in 1..1000"),
    ("countdown", {"prompt_template": "{nums}"}, "'prompt_template'"),
    ("arithmetic", {"reward": [{"verifier": "exact", "wieght": 1}]}, "reward entry 0 has unknown key 'wieght'"),
])
def test_bad_config_names_field(name, config, match):
    with pytest.raises(ConfigError, match=match):
        load_env(name, **config)


def test_score_and_messages():
    env = load_env("arithmetic", system_prompt="Be brief.", reward=[{"verifier": "exact"}])
    rows = env.rows("train", 2, seed=0)
    assert env.messages(rows[0]) == [{"role": "system", "content": "Be brief."}] + rows[0]["messages"]
    assert load_env("arithmetic").messages(rows[0]) == rows[0]["messages"]
    results = env.score([rows[0]["answer"], f"<answer>{rows[1]['answer']}</answer>"], rows)
    assert [r.status for r in results] == [Status.UNPARSABLE, Status.CORRECT]
    with pytest.raises(ValueError, match="score got 1 completions for 2 rows"):
        env.score(["x"], rows)
    assert isinstance(env, Env) and env.verifier_names == ["exact"]


def test_load_env_refuses_non_env_plugin(monkeypatch):
    from rlvr.envs.registry import env_registry
    monkeypatch.setitem(env_registry._factories, "notenv", lambda: object())
    with pytest.raises(TypeError, match="env 'notenv' factory returned object, not an rlvr.envs.Env"):
        load_env("notenv")
