"""env=dataset (envs/dataset.py): any file's columns mapped onto prompt, answer, system and tests; JSONL, Parquet
and save_to_disk folders; a test split carved from the train file; one-line errors naming the column and row."""

import json

import pytest

from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status

QA = [{"question": f"What is {a} + {b}?", "solution": str(a + b), "topic": "sums"} for a in range(4) for b in range(2)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_mapped_columns_become_rows_the_math_verifier_scores(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", QA)
    env = load_env("dataset", train_file=path, test_file=path, columns={"prompt": "question", "answer": "solution"})
    rows = env.rows("test", 8)
    assert sorted(r["answer"] for r in rows) == sorted(r["solution"] for r in QA)
    row = next(r for r in rows if r["prompt"] == "What is 3 + 1?")
    assert row["messages"] == [{"role": "user", "content": "What is 3 + 1?"}]
    assert row["columns"] == {"solution": "4", "topic": "sums"}  # the data's row without its prompt, for python rewards
    assert row["topic"] == "sums"  # every column is a record field too (a plugin verifier's, countdown's)
    assert len({r["id"] for r in rows}) == 8 and env.rows("test", 8) == rows
    results = env.score([r["reference"] for r in rows] + ["<answer>5</answer>", "no idea"], rows + [row, row])
    assert [r.status for r in results] == [Status.CORRECT] * 8 + [Status.INCORRECT, Status.UNPARSABLE]
    assert env.verifier_names == ["math"]


def test_chat_prompts_and_system_prompts(tmp_path):
    chat = [{"prompt": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "1+1?"}], "answer": "2"},
            {"prompt": [{"role": "user", "content": "2+2?"}], "answer": "4"}]
    path = write_jsonl(tmp_path / "chat.jsonl", chat)
    env = load_env("dataset", train_file=path, test_file=path, system_prompt="You are a calculator.")
    rows = {r["answer"]: r for r in env.rows("test", 2)}
    assert env.messages(rows["2"]) == chat[0]["prompt"]  # the row's own system message, not system_prompt
    assert env.messages(rows["4"]) == [{"role": "system", "content": "You are a calculator."}, *chat[1]["prompt"]]
    assert rows["4"]["prompt"] == chat[1]["prompt"]  # as TRL's reward functions get it

    per_row = [{"q": "3+3?", "a": "6", "sys": "Answer in digits."}, {"q": "4+4?", "a": "8", "sys": None}]
    path = write_jsonl(tmp_path / "sys.jsonl", per_row)
    env = load_env("dataset", test_file=path, columns={"prompt": "q", "answer": "a", "system": "sys"},
                   prompt_template="{prompt} Put the answer in <answer></answer>.")
    rows = {r["answer"]: r for r in env.rows("test", 2)}
    assert env.messages(rows["6"]) == [{"role": "system", "content": "Answer in digits."},
                                       {"role": "user", "content": "3+3? Put the answer in <answer></answer>."}]
    assert env.messages(rows["8"]) == [{"role": "user", "content": "4+4? Put the answer in <answer></answer>."}]


def test_without_a_test_file_a_stable_share_of_train_rows_is_held_out(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", QA)
    columns = {"prompt": "question", "answer": "solution"}
    env = load_env("dataset", train_file=path, columns=columns, test_fraction=0.25)
    test = env.rows("test", env.test_size())
    assert env.test_size() == 2 and len({r["id"] for r in test}) == 2
    train_ids = {r["id"] for r in env.problems("train")}
    assert len(train_ids) == 6 and not train_ids & {r["id"] for r in test}
    again = load_env("dataset", train_file=path, columns=columns, test_fraction=0.25)
    assert again.rows("test", 2) == test  # the same rows every time the file is read
    env = load_env("dataset", train_file=path, columns=columns, test_fraction=0)
    assert len(env.rows("train", 20)) == 20
    with pytest.raises(ValueError, match="no test rows: env.test_fraction=0 .* set env.test_file"):
        env.rows("test", 1)


def test_parquet_and_save_to_disk_folders(tmp_path):
    import datasets

    columns = {"prompt": "question", "answer": "solution"}
    table = datasets.Dataset.from_list(QA)
    table.to_parquet(str(tmp_path / "qa.parquet"))
    table.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": table.select(range(6)), "test": table.select(range(6, 8))}).save_to_disk(
        str(tmp_path / "both"))
    assert load_env("dataset", test_file=str(tmp_path / "qa.parquet"), columns=columns).test_size() == 8
    assert load_env("dataset", test_file=str(tmp_path / "one"), columns=columns).test_size() == 8
    env = load_env("dataset", train_file=str(tmp_path / "both"), test_file=str(tmp_path / "both"), columns=columns)
    assert (len(env.problems("train")), env.test_size()) == (6, 2)
    datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / "train_only"))
    with pytest.raises(ConfigError, match=r"train_only holds the splits train, not 'test'"):
        load_env("dataset", test_file=str(tmp_path / "train_only"), columns=columns).test_size()
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="not one written by datasets' save_to_disk"):
        load_env("dataset", test_file=str(tmp_path / "plain"), columns=columns).test_size()


def test_a_tests_column_is_scored_by_the_code_verifier(tmp_path):
    problems = [{"prompt": "Print the sum of two integers.", "tests": json.dumps([{"stdin": "1 2\n", "stdout": "3\n"}]),
                 "solution": "```python\na, b = map(int, input().split())\nprint(a + b)\n```"}]
    path = write_jsonl(tmp_path / "code.jsonl", problems)
    env = load_env("dataset", test_file=path, backend="local",  # the reference solution is trusted code
                   columns={"tests": "tests", "reference": "solution"})
    assert env.verifier_names == ["code"]
    row = env.rows("test", 1)[0]
    assert row["tests"] == {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}]}
    assert [r.status for r in env.score([row["reference"], "print(0)"], [row, row])] == [Status.CORRECT,
                                                                                          Status.INCORRECT]
    env.shutdown()


@pytest.mark.parametrize("rows,config,match", [
    ([{"question": "q1", "solution": "1"}, {"question": "q2"}], {"columns": {"prompt": "question", "answer": "solution"}},
     r"^dataset: row 2 of .*data\.jsonl: has no column 'solution' \(env\.columns\.answer\); its columns: "
     r"question$"),  # the row's own: not the null that the file's other rows' key leaves in it
    ([{"question": "q1", "answer": "1"}], {}, r"^dataset: row 1 of .*data\.jsonl: has no column 'prompt' "
                                              r"\(env\.columns\.prompt\); its columns: question, answer$"),
    ([{"prompt": "q", "answer": "1"}], {"columns": {"system": "sys"}}, r"row 1 of .*: has no column 'sys' "
                                                                       r"\(env\.columns\.system\)"),
    ([{"prompt": 7, "answer": "1"}], {}, r"row 1 of .*: column 'prompt' \(env\.columns\.prompt\) must hold a string "
                                         r"or a list of \{role, content\} messages, got 7"),
    ([{"prompt": "q", "tests": [{"stdin": "1"}]}], {"columns": {"tests": "tests"}},
     r"row 1 of .*: column 'tests' \(env\.columns\.tests\): test 0 needs string 'stdout'"),
])
def test_a_bad_row_is_one_line_naming_column_row_and_file(tmp_path, rows, config, match):
    path = write_jsonl(tmp_path / "data.jsonl", rows)
    with pytest.raises(ConfigError, match=match) as info:
        load_env("dataset", test_file=path, **config).test_size()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("config,match", [
    ({"columns": {"promt": "q"}}, r"env.columns has no key 'promt' \(keys: prompt, answer, system, tests"),
    ({"columns": {"answer": None}}, r"the math verifier reads the answer; map the column that holds it: "
                                    r"env.columns.answer=COLUMN"),
    ({"reward": [{"verifier": "code"}]}, r"the code verifier reads the tests; .* env.columns.tests=COLUMN"),
    ({"columns": {"prompt": None}}, r"env.columns.prompt must name the column"),
    ({"test_fraction": 1}, r"'test_fraction' must be a number in \[0, 1\)"),
    ({"prompt_template": "{question}"}, r"'prompt_template' '\{question\}' does not format with prompt"),
])
def test_bad_config_names_the_key(config, match):
    with pytest.raises(ConfigError, match=match):
        load_env("dataset", **config)


def test_without_the_answer_column_a_reward_that_does_not_read_it_still_loads(tmp_path):
    path = write_jsonl(tmp_path / "data.jsonl", [{"prompt": "Say hi.", "style": "friendly"}])
    env = load_env("dataset", test_file=path, reward=[{"verifier": "format"}])
    row = env.rows("test", 1)[0]
    assert (row["answer"], row["reference"], row["columns"]) == ("", "", {"style": "friendly"})
