"""`rlvr eval 'models=[RUN]'` and `model.name_or_path=CHECKPOINT` evaluate what the run trained on: its environment
(name, files, columns, reward, system prompt), its model.kind and its generation length, unless the command line
sets them, and print what they took (issue 51: it evaluated the default arithmetic env with 16 tokens and printed a
confident table). A real two-step run of the tiny test model on env=dataset, then `rlvr eval` in this process."""

import json
import shutil

import pytest
from omegaconf import OmegaConf

from rlvr.errors import ConfigError

SYSTEM = "Add the numbers; answer in <answer></answer> tags."
RUN_LENGTH = 6  # neither eval's default for arithmetic (16) nor for dataset (512)


@pytest.fixture(scope="module")
def dataset_run(tiny_lm, tmp_path_factory):
    """`rlvr train env=dataset` with mapped columns, an exact reward, a system prompt, model.kind=instruct and
    rollout.max_new_tokens=6: two steps, a checkpoint at step 2."""
    from rlvr import api

    root = tmp_path_factory.mktemp("dataset_run")
    rows = [{"question": f"{a}+{b}=", "solution": str(a + b)} for a in range(9) for b in range(9)]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:70]))
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[70:]))
    run = api.train(
        "env=dataset", "rollout=hf", f"output_dir={root / 'run'}", log=lambda *a, **k: None,
        env={"train_file": str(root / "train.jsonl"), "test_file": str(root / "test.jsonl"),
             "columns": {"prompt": "question", "answer": "solution"}, "system_prompt": SYSTEM,
             "reward": [{"verifier": "exact"}]},
        model={"name": "hf", "name_or_path": str(tiny_lm.path), "kind": "instruct"},
        rollout={"max_new_tokens": RUN_LENGTH},
        train={"steps": 2, "prompts_per_step": 2, "completions_per_prompt": 2, "eval_prompts": 2})
    assert run.checkpoint is not None
    return run


def _eval(rlvr_cli, *overrides):
    code, output = rlvr_cli("eval", *overrides, "n_prompts=3", "threads=1", "output_dir=out")
    return code, output


def _results(tmp_path):
    return json.loads((tmp_path / "out" / "results.json").read_text())


def test_eval_of_a_run_uses_its_env_prompt_reward_kind_and_length(dataset_run, rlvr_cli, tmp_path):
    code, output = _eval(rlvr_cli, f"models=[{dataset_run.run_dir}]")
    assert code == 0, output[-3000:]
    results = _results(tmp_path)
    (env,) = results["envs"]
    assert env["name"] == "dataset" and env["split"] == "test" and env["n_prompts"] == 3
    assert env["params"]["columns"]["prompt"] == "question" and env["params"]["columns"]["answer"] == "solution"
    assert env["params"]["reward"] == [{"verifier": "exact"}] and env["params"]["system_prompt"] == SYSTEM
    assert results["settings"]["max_new_tokens"] == RUN_LENGTH
    assert results["from_run"]["taken"]["model.kind"] == "instruct"
    assert results["from_run"]["taken"]["rollout.max_new_tokens"] == RUN_LENGTH
    assert results["from_run"]["overridden"] == {}
    assert {r["model"] for r in results["results"]} == {"run/base", "run/step_2"}
    record = json.loads((tmp_path / "out" / "completions.jsonl").read_text().splitlines()[0])
    assert record["messages"][0] == {"role": "system", "content": SYSTEM}  # the run's prompt
    assert record["answer"] and record["response_tokens"] <= RUN_LENGTH
    assert set(record["details"]["components"]) == {"exact"}  # the run's reward, not dataset's default math
    # the printed block names what it took, each key and value
    for line in ("env.name=dataset", "env.columns.prompt=question", "env.columns.answer=solution",
                 f"env.system_prompt={SYSTEM}", 'env.reward=[{"verifier": "exact"}]', "model.kind=instruct",
                 f"rollout.max_new_tokens={RUN_LENGTH}", "rollout.truncated_reward=zero"):
        assert f"\n  {line}\n" in output, line


def test_the_command_line_wins_over_the_run(dataset_run, rlvr_cli, tmp_path):
    checkpoint = dataset_run.checkpoint
    code, output = _eval(rlvr_cli, f"model.name_or_path={checkpoint}", "rollout.max_new_tokens=3",
                         "model.kind=base", "env.system_prompt=Be brief.")
    assert code == 0, output[-3000:]
    results = _results(tmp_path)
    (env,) = results["envs"]
    assert env["name"] == "dataset" and env["params"]["columns"]["prompt"] == "question"  # the rest is the run's
    assert env["params"]["system_prompt"] == "Be brief." and results["settings"]["max_new_tokens"] == 3
    assert results["from_run"]["overridden"] == {"env.system_prompt": "Be brief.", "rollout.max_new_tokens": 3,
                                                 "model.kind": "base"}
    assert results["from_run"]["configs"] == [str(checkpoint / "rlvr_config.yaml")]
    assert "set on the command line instead of the run's:\n" in output and "\n  rollout.max_new_tokens=3\n" in output
    assert "\n  model.kind=base\n" in output


def test_a_checkpoint_without_its_config_reads_its_runs_and_env_replaces_the_runs(dataset_run, rlvr_cli, tmp_path):
    run = tmp_path / "copy"
    shutil.copytree(dataset_run.run_dir, run)
    (run / "checkpoints" / "step_2" / "rlvr_config.yaml").unlink()
    code, output = _eval(rlvr_cli, f"model.name_or_path={run}/checkpoints/step_2")
    assert code == 0, output[-3000:]
    assert _results(tmp_path)["envs"][0]["name"] == "dataset"
    assert _results(tmp_path)["from_run"]["configs"] == [str(run / "config.yaml")]

    shutil.rmtree(tmp_path / "out")
    code, output = _eval(rlvr_cli, f"model.name_or_path={run}/checkpoints/step_2", "env=arithmetic")
    assert code == 0, output[-3000:]
    results = _results(tmp_path)
    assert results["envs"][0]["name"] == "arithmetic" and "env.name=dataset" not in output
    assert results["settings"]["max_new_tokens"] == RUN_LENGTH  # the length is still the run's


def test_runs_of_different_envs_are_refused_naming_both(dataset_run, rlvr_cli, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(dataset_run.run_dir, other)
    config = OmegaConf.load(other / "config.yaml")
    config.env = {"name": "arithmetic", "digits": 1}
    OmegaConf.save(config, other / "config.yaml")
    code, output = _eval(rlvr_cli, f"models=[{dataset_run.run_dir},{other}]")
    assert code != 0
    assert "different env" in output and "env=dataset vs env=arithmetic" in output
    assert str(dataset_run.run_dir / "config.yaml") in output and str(other / "config.yaml") in output
    code, output = _eval(rlvr_cli, f"models=[{dataset_run.run_dir},{other}]", "env=arithmetic", "env.digits=1")
    assert code == 0, output[-3000:]  # one env for both, given on the command line


def test_run_eval_from_python_without_overrides_keeps_a_composed_env(dataset_run, tmp_path):
    """A config composed in Python and handed to run_eval: the keys that differ from eval's defaults count as set."""
    from rlvr.trainer.evaluation.eval_config import compose_eval_config
    from rlvr.trainer.evaluation.run_config import adopt_run_config, command_keys

    cfg = compose_eval_config([f"models=[{dataset_run.run_dir}]", "env=countdown", "rollout.max_new_tokens=5"])
    assert {"env", "models", "rollout.max_new_tokens"} <= set(command_keys(cfg, None))
    taken = adopt_run_config(cfg, None)
    assert cfg.env.name == "countdown" and cfg.rollout.max_new_tokens == 5 and cfg.model.kind == "instruct"
    assert "rollout.max_new_tokens" in taken.overridden and taken.taken == {"model.kind": "instruct",
                                                                          "model.prompt_format": "chat",
                                                                          "rollout.truncated_reward": "zero",
                                                                          "rollout.stop": [],
                                                                          "rollout.repetition_penalty": 1.0,
                                                                          "rollout.min_p": 0.0}
    with pytest.raises(ConfigError, match="no env.name"):
        broken = tmp_path / "run"
        shutil.copytree(dataset_run.run_dir, broken)
        config = OmegaConf.load(broken / "config.yaml")
        del config["env"]
        OmegaConf.save(config, broken / "config.yaml")
        adopt_run_config(compose_eval_config([f"models=[{broken}]"]), [f"models=[{broken}]"])


def test_the_runs_generation_settings_are_taken(dataset_run, tmp_path):
    """A run that decoded with a repetition penalty, min-p and extra generate arguments is evaluated with them."""
    from rlvr.trainer.evaluation.eval_config import compose_eval_config
    from rlvr.trainer.evaluation.run_config import adopt_run_config

    run = tmp_path / "penalised"
    shutil.copytree(dataset_run.run_dir, run)
    config = OmegaConf.load(run / "config.yaml")
    config.rollout.repetition_penalty, config.rollout.min_p = 1.3, 0.05
    config.rollout.generation_kwargs = {"no_repeat_ngram_size": 3}
    OmegaConf.save(config, run / "config.yaml")
    cfg = compose_eval_config([f"models=[{run}]"])
    taken = adopt_run_config(cfg, [f"models=[{run}]"])
    assert (cfg.rollout.repetition_penalty, cfg.rollout.min_p) == (1.3, 0.05)
    assert OmegaConf.to_container(cfg.rollout.generation_kwargs) == {"no_repeat_ngram_size": 3}
    assert taken.taken["rollout.repetition_penalty"] == 1.3 and taken.taken["rollout.min_p"] == 0.05
    assert taken.taken["rollout.generation_kwargs"] == {"no_repeat_ngram_size": 3}
