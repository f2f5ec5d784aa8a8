"""`rlvr.train(...)` and `rlvr.evaluate(...)` (rlvr/api.py): the README's example (your JSONL, your TRL-style
reward function, env=dataset) trains two steps and evaluates, in this process; keyword config becomes the
command's overrides; a bad config is the command's one-line ConfigError; `import rlvr` stays light."""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlvr
from rlvr import api
from rlvr.errors import ConfigError

# The README's example ("Your own data and reward in a few lines"), read from the README itself.
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
_SECTION = README.split("### Your own data and reward in a few lines", 1)[1]
MY_REWARDS, EXAMPLE = re.findall(r"```python\n(.*?)```", _SECTION, re.S)[:2]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python script.py` puts the script's folder first
    return tmp_path


def test_readme_example_trains_two_steps_and_evaluates(workdir, tiny_lm, monkeypatch):
    """The example as written; the test only swaps the model for the tiny test model and shrinks the batch and
    the completions (rollout=hf: the tiny model's 16-dim heads are below vLLM's CPU minimum)."""
    assert len(EXAMPLE.strip().splitlines()) + len(MY_REWARDS.strip().splitlines()) <= 12  # 10 lines of code
    (workdir / "my_rewards.py").write_text(textwrap.dedent(MY_REWARDS))
    sys.modules.pop("my_rewards", None)
    real_train, real_evaluate, seen = api.train, api.evaluate, {}

    def small_train(*args, **kwargs):
        kwargs["model"] = {"name": "hf", "name_or_path": str(tiny_lm.path)}
        kwargs["train"] = {**kwargs["train"], "prompts_per_step": 2, "completions_per_prompt": 2, "eval_prompts": 2}
        kwargs["rollout"] = {"name": "hf", "max_new_tokens": 8}
        seen["run"] = real_train(*args, log=lambda *a, **k: None, **kwargs)
        return seen["run"]

    def small_evaluate(*args, **kwargs):
        seen["eval"] = real_evaluate(*args, rollout={"max_new_tokens": 8}, log=lambda *a, **k: None, **kwargs)
        return seen["eval"]

    monkeypatch.setattr(api, "train", small_train)
    monkeypatch.setattr(api, "evaluate", small_evaluate)
    exec(compile(EXAMPLE, "README example", "exec"), {"__name__": "readme_example"})

    run = seen["run"]
    assert [m["step"] for m in run.metrics] == [0, 1, 2]
    assert all("reward/accuracy" in m and "status/error" not in m for m in run.metrics[1:])  # the function's rewards
    assert run.checkpoint == run.run_dir / "checkpoints" / "step_2" and (run.checkpoint / "config.json").exists()
    assert run.summary["steps"] == 2 and run.summary["eval_prompts"] == 2
    config = (run.run_dir / "config.yaml").read_text()
    assert "function: my_rewards:accuracy" in config and "name: dataset" in config
    [result] = seen["eval"]["results"]
    assert result["env"] == "dataset" and result["n_prompts"] == 9  # ceil(10% of 81 rows) held out as the test split
    assert 0.0 <= result["pass@1"] <= 1.0 and (workdir / "outputs" / "eval").is_dir()


def test_a_bad_config_is_the_commands_one_line_error(workdir):
    (workdir / "data.jsonl").write_text(json.dumps({"question": "1+1=", "solution": "2"}) + "\n")
    with pytest.raises(ConfigError, match=r"^train.stepz=3: train has no key 'stepz'; did you mean train.steps\?"):
        rlvr.train("env=dataset", train={"stepz": 3})
    with pytest.raises(ConfigError, match=r"^dataset: row 1 of data.jsonl: has no column 'prompt' "
                                          r"\(env.columns.prompt\); its columns: question, solution$"):
        rlvr.train("env=dataset", "env.train_file=data.jsonl", "env.test_file=data.jsonl", rollout="hf")
    with pytest.raises(ConfigError, match=r"python verifier: function 'no_such_module:f': cannot import module"):
        rlvr.train("env=dataset", "env.train_file=data.jsonl", reward_funcs=["no_such_module:f"], rollout="hf")
    with pytest.raises(ConfigError, match="reward_weights has 2 weights for 1 reward_funcs"):
        rlvr.train(reward_funcs=["a:b"], reward_weights=[1, 2])
    assert not (workdir / "outputs").exists()  # refused before a run directory was made


def test_keywords_become_overrides():
    def accuracy(completions, **kwargs):
        return [0.0] * len(completions)

    accuracy.__module__, accuracy.__qualname__ = "my_rewards", "accuracy"
    got = api.to_overrides(["env=dataset", ["seed=1"]], {
        "env": {"train_file": "my data's.jsonl", "columns": {"prompt": "question", "system": None}},
        "train": {"steps": 2, "eval_every": 1}, "rollout": {"name": "hf", "temperature": 0.7}, "model": "smollm2",
        "algo": {"beta": 0.04, "clip_eps_high": 2e-4}, "curriculum": {"levels": [{"digits": 1}, {"digits": 2}]},
        "logger": ["jsonl"], "overwrite": True}, api.TRAIN_GROUPS)
    assert got == ["env=dataset", "seed=1", "env.train_file='my data\\'s.jsonl'", "env.columns.prompt=question",
                   "env.columns.system=null", "train.steps=2", "train.eval_every=1", "rollout=hf",
                   "rollout.temperature=0.7", "model=smollm2", "algo.beta=0.04", "algo.clip_eps_high=0.0002",
                   "curriculum.levels=[{digits:1},{digits:2}]", "logger=[jsonl]", "overwrite=true"]
    assert api.reward_override([accuracy, "trl.rewards:accuracy_reward"], [0.8, 0.2]) == [
        "env.reward=[{verifier:python,weight:0.8,params:{function:my_rewards:accuracy}},"
        "{verifier:python,weight:0.2,params:{function:trl.rewards:accuracy_reward}}]"]
    with pytest.raises(TypeError, match="overrides are strings"):
        api.to_overrides([{"train.steps": 2}], {}, api.TRAIN_GROUPS)


@pytest.mark.parametrize("value", ["data.jsonl", "Qwen/Qwen2.5-0.5B-Instruct", "my_rewards:accuracy", "a b/it's.jsonl",
                                   "true", "null", "1", "1e3", "", "a=b,c", "C:\\data\\x y.jsonl", "end\\",
                                   "quote\\'s", [1, "two", None, {"k": "v w"}], {"a": {"b": False}}, 0.1, -3])
def test_every_value_reads_back_as_given(value):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    [override] = OverridesParser.create().parse_overrides([f"key={api.override_value(value)}"])
    assert override.value() == value


def test_the_overrides_compose_to_the_values_given(workdir):
    cfg = api.train_config(api.to_overrides(["env=dataset"], {
        "env": {"train_file": "a b/it's.jsonl", "columns": {"answer": "solution"}}, "train": {"steps": 3},
        "output_dir": str(workdir / "run")}, api.TRAIN_GROUPS) + api.reward_override(["my_rewards:accuracy"], None))
    assert cfg.env.train_file == "a b/it's.jsonl" and cfg.env.columns.answer == "solution" and cfg.train.steps == 3
    assert list(cfg.env.reward) == [{"verifier": "python", "weight": 1.0,
                                     "params": {"function": "my_rewards:accuracy"}}]
    assert cfg.output_dir == str(workdir / "run")


@pytest.mark.parametrize("fn,match", [
    (lambda completions, **kw: [], "cannot be imported by name"),
    (type("Fn", (), {"__call__": lambda self, **kw: []})(), "cannot be imported by name"),
])
def test_a_function_workers_cannot_import_is_refused(fn, match):
    with pytest.raises(ConfigError, match=match):
        api.reward_override([fn], None)


def test_a_function_in_main_is_refused_with_the_fix():
    def accuracy(completions, **kwargs):
        return []

    accuracy.__module__, accuracy.__qualname__ = "__main__", "accuracy"
    with pytest.raises(ConfigError, match=r"'accuracy' is defined in __main__ .* move it into a module"):
        api.function_path(accuracy)


def test_import_rlvr_stays_light():
    code = "import sys, rlvr; rlvr.train; print([m for m in ('torch', 'hydra', 'rlvr.api') if m in sys.modules])"
    light = subprocess.run([sys.executable, "-c", "import sys, rlvr; print([m for m in ('torch', 'hydra', "
                            "'transformers', 'datasets') if m in sys.modules])"], capture_output=True, text=True)
    assert light.stdout.strip() == "[]", light.stderr
    lazy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert lazy.stdout.strip() == "['rlvr.api']", lazy.stderr  # rlvr.train is found on first use
