"""gsm8k: local JSONL/Parquet rows, gold after `####`, math verifier with the last-number fallback."""

import json

import pytest

from rlvr.envs import load_env
from rlvr.envs.gsm8k import gold_answer
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status


@pytest.fixture
def files(tmp_path, env_data):
    return env_data.write_jsonl(tmp_path / "train.jsonl", env_data.GSM8K), env_data.write_jsonl(tmp_path / "test.jsonl", env_data.GSM8K)


def test_gold_is_after_the_last_hashes_without_thousands_commas():
    assert gold_answer("2 + 2 = 4\n#### 4") == "4"
    assert gold_answer("x #### 1\n#### 1,234,567") == "1234567"
    assert gold_answer("no marker") is None


def test_rows_and_scores(files):
    env = load_env("gsm8k", train_file=str(files[0]), test_file=str(files[1]))
    rows = env.rows("test", 4)
    assert sorted(r["answer"] for r in rows) == ["10", "1200", "6", "7"]
    assert env.rows("test", 4) == rows and len({r["id"] for r in rows}) == 4
    assert [r.reward for r in env.score([r["reference"] for r in rows], rows)] == [1.0] * 4
    row = next(r for r in rows if r["answer"] == "1200")
    # last-number fallback on: a bare final number counts; a wrong one does not
    results = env.score(["so the total is 1,200 eggs", "The answer is 1300.", "no number here"], [row] * 3)
    assert [r.status for r in results] == [Status.CORRECT, Status.INCORRECT, Status.UNPARSABLE]
    assert len(env.rows("train", 10, seed=3)) == 10  # train repeats in passes
    with pytest.raises(ValueError, match="only 4 exist"):
        env.rows("test", 5)


def test_parquet_and_format_gate(tmp_path, env_data):
    import datasets

    path = tmp_path / "test.parquet"
    datasets.Dataset.from_list(env_data.GSM8K).to_parquet(str(path))
    env = load_env("gsm8k", test_file=str(path), format_gate=True)
    assert env.verifier_names == ["math", "format"]
    row = env.rows("test", 1)[0]
    assert env.score([row["reference"], row["answer"]], [row, row])[0].reward == pytest.approx(1.0)
    assert env.score([row["answer"]], [row])[0].reward == 0.0  # right number, wrong format: gated off
    with pytest.raises(ValueError, match="no train data; set 'train_file'"):
        env.rows("train", 1)


def test_missing_field_names_field_and_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n" + json.dumps({"question": "q2"}) + "\n")
    with pytest.raises(ConfigError, match=r"gsm8k: row 2 of .*bad.jsonl has no field 'answer'"):
        load_env("gsm8k", test_file=str(path)).rows("test", 1)
    path.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    with pytest.raises(ConfigError, match=r"row 1 of .*'answer' has no final answer after '####'"):
        load_env("gsm8k", test_file=str(path)).rows("test", 1)
    with pytest.raises(ConfigError, match="does not exist"):
        load_env("gsm8k", test_file=str(tmp_path / "nope.jsonl")).rows("test", 1)
