"""`rlvr.train(train_dataset=..., eval_dataset=...)` (trainer/data_args.py, envs/dataset.py): rows in memory, a list of
dicts or a `datasets.Dataset`, train under `env.columns` as a file's rows do, are saved into the run directory that
config.yaml names, and a bad row gets the message a file's gets."""

import json

import datasets
import pytest

import rlvr
from rlvr.errors import ConfigError

ROWS = [{"question": f"{a}+{b}=", "solution": str(a + b)} for a in range(5) for b in range(4)]


def small(tiny_lm, tmp_path, **kwargs):
    return rlvr.train(env={"columns": {"prompt": "question", "answer": "solution"}},
                      model={"name": "hf", "name_or_path": str(tiny_lm.path)},
                      rollout={"name": "hf", "max_new_tokens": 8}, output_dir=str(tmp_path / "run"),
                      train={"steps": 2, "prompts_per_step": 2, "completions_per_prompt": 2, "eval_prompts": 2},
                      log=lambda *a, **k: None, **kwargs)


@pytest.mark.parametrize("form", ["list", "Dataset"])
def test_rows_in_memory_train_two_steps(form, tiny_lm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train, test = ROWS[:16], ROWS[16:]
    if form == "Dataset":
        train, test = datasets.Dataset.from_list(train), datasets.Dataset.from_list(test)
    run = small(tiny_lm, tmp_path, train_dataset=train, eval_dataset=test)
    assert [m["step"] for m in run.metrics] == [0, 1, 2] and run.summary["eval_prompts"] == 2
    assert run.checkpoint == run.run_dir / "checkpoints" / "step_2"
    prompts = {s["prompt"][-1]["content"] for line in (run.run_dir / "samples.jsonl").read_text().splitlines()
               for s in [json.loads(line)]}
    assert prompts and prompts <= {r["question"] for r in ROWS[:16]}  # trained on the train rows, mapped
    config = (run.run_dir / "config.yaml").read_text()
    assert "name: dataset" in config and f"train_file: {run.run_dir / 'data' / 'train'}" in config
    assert datasets.load_from_disk(str(run.run_dir / "data" / "test")).to_list() == ROWS[16:]  # what eval reads


def test_a_bad_row_in_memory_gets_a_files_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = ROWS[:3] + [{"solution": "2", "text": "1+1="}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    columns = {"columns": {"prompt": "question", "answer": "solution"}}
    message = "has no column 'question' (env.columns.prompt); its columns: solution, text"
    with pytest.raises(ConfigError) as from_file:
        rlvr.train(env={"name": "dataset", "train_file": "data.jsonl", "test_file": "data.jsonl", **columns},
                   rollout="hf", output_dir="file_run")
    with pytest.raises(ConfigError) as from_memory:
        rlvr.train(env=columns, rollout="hf", train_dataset=rows, output_dir="memory_run")
    assert str(from_file.value) == f"dataset: row 4 of data.jsonl: {message}"
    assert str(from_memory.value) == f"dataset: row 4 of train_dataset: {message}"
    assert not (tmp_path / "memory_run" / "data").exists()  # refused before anything was saved


def test_rows_in_memory_refuse_what_conflicts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^train_dataset: rows in memory are read by env=dataset .*not "
                                          r"env=gsm8k"):
        rlvr.train(env="gsm8k", train_dataset=ROWS)
    with pytest.raises(ConfigError, match=r"^train_dataset and env.train_file=data.jsonl both give the train rows"):
        rlvr.train("env.train_file=data.jsonl", train_dataset=ROWS)
    with pytest.raises(TypeError, match=r"a DatasetDict holds the splits train; give one"):
        rlvr.train(train_dataset=datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS)}))
    with pytest.raises(ConfigError, match=r"^dataset: row 2 of eval_dataset: a str, not a mapping"):
        rlvr.train(train_dataset=ROWS, eval_dataset=[ROWS[0], "2+2="])


def test_samples_show_the_mapped_gold_or_null(tiny_lm, tmp_path, monkeypatch):
    """samples.jsonl's `answer`: the mapped gold column's value; null (not "") when no column holds the gold, with
    the row's columns that a python reward reads beside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "zero_reward.py").write_text("def zero(completions, solution, **kwargs):\n"
                                             "    return [0.0 for _ in completions]\n")
    mapped = small(tiny_lm, tmp_path, train_dataset=ROWS)
    unmapped = rlvr.train(env={"columns": {"prompt": "question", "answer": None}}, reward_funcs=["zero_reward:zero"],
                          model={"name": "hf", "name_or_path": str(tiny_lm.path)},
                          rollout={"name": "hf", "max_new_tokens": 8}, output_dir=str(tmp_path / "unmapped"),
                          train={"steps": 1, "prompts_per_step": 2, "completions_per_prompt": 2, "eval_prompts": 2},
                          train_dataset=ROWS, log=lambda *a, **k: None)
    gold = {r["question"]: r["solution"] for r in ROWS}
    samples = {run.run_dir.name: [json.loads(line) for line in (run.run_dir / "samples.jsonl").read_text().splitlines()]
               for run in (mapped, unmapped)}
    assert [s["answer"] for s in samples["run"]] == [gold[s["prompt"][-1]["content"]] for s in samples["run"]]
    assert [s["answer"] for s in samples["unmapped"]] == [None, None]  # not "": no column holds the gold
    for sample in samples["run"] + samples["unmapped"]:
        assert sample["columns"]["solution"] == gold[sample["prompt"][-1]["content"]]
