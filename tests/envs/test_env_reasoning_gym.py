"""reasoning_gym: any task + config, its score_answer as a verifier, and the substring leak guarded."""

import pytest

from rlvr.envs import load_env
from rlvr.verifiers.reasoning_gym import ReasoningGymVerifier, guard_substring
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status

pytest.importorskip("reasoning_gym")


def answer(text):
    return f"<think></think><answer>{text}</answer>"


def test_rows_splits_and_reference():
    env = load_env("reasoning_gym", task="leg_counting", config={"min_animals": 2, "max_animals": 3})
    train, test = env.rows("train", 50, seed=0), env.rows("test", 10, seed=0)
    assert not {r["id"] for r in train} & {r["id"] for r in test}
    assert env.rows("test", 10, seed=0) == test
    assert [r.reward for r in env.score([r["reference"] for r in test], test)] == [1.0] * 10


def test_substring_leak_is_guarded():
    # reasoning-gym itself gives len(oracle)/len(answer) when the oracle is a substring of a wrong answer
    env = load_env("reasoning_gym", task="leg_counting", partial_credit=True)
    row = env.rows("test", 1)[0]
    oracle = row["answer"]
    import reasoning_gym

    raw = reasoning_gym.create_dataset("leg_counting", size=1, seed=0).score_answer(oracle + "0", row["rg_entry"])
    assert 0 < raw < 1  # the leak exists upstream
    padded = [oracle + "0", "1 2 3 " + oracle, f"{oracle} or {int(oracle) + 1}"]
    results = env.score([answer(a) for a in padded], [row] * 3)
    assert [(r.reward, r.status) for r in results] == [(0.0, Status.INCORRECT)] * 3
    assert all("guard" in r.details["components"]["reasoning_gym"]["details"] for r in results)
    assert guard_substring(0.5, "abc", "abc ") == (0.5, False)  # not a substring case: partial score kept
    assert env.score([answer(oracle), "no tags"], [row] * 2)[1].status is Status.UNPARSABLE


def test_partial_credit_off_rounds_down_and_cross_check():
    verifier = ReasoningGymVerifier(cross_check=True)
    env = load_env("reasoning_gym", task="basic_arithmetic", reward=[{"verifier": "reasoning_gym", "params": {"cross_check": True}}])
    row = env.rows("test", 1)[0]
    right = verifier(answer(row["answer"]), row)
    assert right.status is Status.CORRECT and right.details["math"] == "correct"
    assert verifier(answer("not a number"), row).reward == 0.0


def test_bad_config_named():
    with pytest.raises(ConfigError, match="unknown 'task' 'nope'"):
        load_env("reasoning_gym", task="nope")
    with pytest.raises(ConfigError, match="refused 'config'"):
        load_env("reasoning_gym", task="leg_counting", config={"no_such_param": 1})
    bad = ReasoningGymVerifier()("x", {"answer": "1"})
    assert bad.status is Status.ERROR and "rg_entry" in bad.details["error"]
