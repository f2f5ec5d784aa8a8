"""What a user who trains twice into one directory, or resumes with a bare `resume=DIR`, sees.

A second run into a directory that holds a run is refused before anything in it is touched (naming
`resume=` and `overwrite=true`); `overwrite=true` replaces the earlier run's files; `resume=DIR` alone
continues the saved run's config (its steps, save_every, env) with the command line's overrides on top,
and leaves no stray outputs/<date>/<time>/ behind. In-process through `rlvr.cli.main`, as test_cli.py."""

import dataclasses
import json

import pytest
import yaml

from tests.cli_run import tiny_train


@pytest.fixture
def rlvr(rlvr_cli):
    return rlvr_cli


def _steps(run_dir):
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_second_run_into_a_run_directory_is_refused_and_nothing_is_touched(tiny_lm, tmp_path, rlvr):
    code, out = rlvr(*tiny_train(tiny_lm, "train.steps=2", "output_dir=run"))
    assert code in (0, None), out
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    hydra_before = (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text()

    code, out = rlvr(*tiny_train(tiny_lm, "algo=reinforce", "train.steps=1", "output_dir=run"))
    assert code not in (0, None)
    assert "already holds a run" in out and "resume=run" in out and "overwrite=true" in out
    assert "Traceback" not in out
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == before
    assert (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text() == hydra_before
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["step_2"]


def test_overwrite_true_replaces_the_earlier_run(tiny_lm, tmp_path, rlvr):
    assert rlvr(*tiny_train(tiny_lm, "train.steps=2", "output_dir=run"))[0] in (0, None)
    code, out = rlvr(*tiny_train(tiny_lm, "algo=reinforce", "train.steps=1", "output_dir=run", "overwrite=true"))
    assert code in (0, None), out
    assert _steps(tmp_path / "run") == [0, 1]
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["step_1"]
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["algo"]["name"] == "reinforce"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 1


def test_train_api_refuses_a_run_directory_too(tiny_lm, tmp_path, compose_train, rlvr):
    from rlvr.trainer.run import train
    from rlvr.errors import ConfigError

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 0}\n')
    cfg = compose_train(tiny_train(tiny_lm, "train.steps=1", f"output_dir={tmp_path / 'run'}")[1:])
    with pytest.raises(ConfigError, match="already holds a run"):
        train(cfg, log=lambda *_: None)
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == '{"step": 0}\n'


def test_bare_resume_continues_the_saved_config_with_overrides_on_top(tiny_lm, tmp_path, rlvr):
    first = tiny_train(tiny_lm, "train.steps=2", "train.save_every=1", "train.eval_every=1", "seed=3", "output_dir=run")
    assert rlvr(*first)[0] in (0, None)
    (tmp_path / "run" / "checkpoints" / "step_2").rename(tmp_path / "run" / "checkpoints" / "killed")  # as if killed
    saved_hydra = (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text()

    code, out = rlvr("train", "resume=run")  # no other override: the saved run goes on as it was
    assert code in (0, None), out
    assert "resuming run from step_1" in out
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert config["train"]["steps"] == 2 and config["train"]["save_every"] == 1 and config["seed"] == 3
    assert config["env"]["digits"] == 1 and config["resume"] == "run"
    assert _steps(tmp_path / "run") == [0, 1, 2]
    assert not (tmp_path / "outputs").exists(), "a resume must not leave a stray outputs/<date>/<time>/"
    assert (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text() == saved_hydra

    code, out = rlvr("train", "resume=run", "train.steps=3", "rollout=hf")  # overrides on top of the saved config
    assert code in (0, None), out
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert config["train"]["steps"] == 3 and config["train"]["save_every"] == 1
    assert _steps(tmp_path / "run") == [0, 1, 2, 3]
    assert "1 step (of 3; the rest before a resume)" in out  # the steps this process ran, not all of them
    log = (tmp_path / "run" / "train.log").read_text()  # every session's log, not an empty file
    assert log.count("run directory: run") == 3 and "resuming run from step_2" in log and "| held-out" in log


def test_resume_of_a_directory_that_holds_no_run_is_one_line(tmp_path, rlvr):
    code, out = rlvr("train", "resume=nothing_here")
    assert code not in (0, None) and "resume=nothing_here" in out and "Traceback" not in out
    (tmp_path / "empty").mkdir()
    code, out = rlvr("train", "resume=empty")
    assert code not in (0, None) and "no config.yaml" in out and "Traceback" not in out
    code, out = rlvr("train", "resume=empty", "output_dir=elsewhere")
    assert code not in (0, None) and "drop output_dir=elsewhere" in out
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "elsewhere").exists()


def test_a_start_that_fails_never_blocks_its_retry(tiny_lm, tmp_path, rlvr, monkeypatch):
    """`rollout=vllm` without vLLM, a server that does not come up, a logger that cannot start: the same command
    run again once the cause is fixed must train, not find "a run" its failed start wrote."""
    import rlvr.trainer.loggers as loggers
    import rlvr.trainer.setup as setup

    real_engine, real_wandb = setup.build_engine, loggers.WandbLogger

    def no_engine(*args, **kwargs):
        raise RuntimeError("the engine did not start")

    monkeypatch.setattr(setup, "build_engine", no_engine)
    command = tiny_train(tiny_lm, "train.steps=1", "output_dir=run", "logger=[tensorboard,wandb]")
    code, out = rlvr(*command)
    assert code not in (0, None) and "the engine did not start" in out
    assert not (tmp_path / "run" / "config.yaml").exists()

    monkeypatch.setattr(setup, "build_engine", real_engine)  # the engine is fixed; now W&B fails after TensorBoard began

    def no_wandb(*args, **kwargs):
        raise RuntimeError("wandb did not start")

    monkeypatch.setattr(loggers, "WandbLogger", no_wandb)
    code, out = rlvr(*command)
    assert code not in (0, None) and "wandb did not start" in out
    assert not (tmp_path / "run" / "config.yaml").exists() and (tmp_path / "run" / "tensorboard").exists()

    monkeypatch.setattr(loggers, "WandbLogger", real_wandb)
    code, out = rlvr(*command[:-1], "logger=[tensorboard]")  # fixed: the same output_dir trains
    assert code in (0, None), out
    assert _steps(tmp_path / "run") == [0, 1]


def test_a_resume_that_changes_what_the_checkpoint_is_is_refused_before_anything_is_written(tiny_lm, tmp_path, rlvr):
    """`resume=RUN env=countdown` used to build countdown's model, load the run's checkpoint into it, crash, and leave
    the run's config.yaml rewritten, so that a plain `resume=RUN` crashed too from then on. The refusal's one line is
    appended to train.log (why a command stopped, trainer/run_dir.py:log_stop); every other file is as it was."""
    assert rlvr(*tiny_train(tiny_lm, "train.steps=2", "train.save_every=1", "output_dir=run"))[0] in (0, None)
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    code, out = rlvr("train", "resume=run", "env=countdown", "train.steps=3")
    assert code not in (0, None)
    assert "env.name: 'arithmetic' in the run, 'countdown' now" in out and "Traceback" not in out
    after = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    log_before, log_after = before.pop("train.log"), after.pop("train.log")
    assert after == before
    assert log_after.startswith(log_before) and b"'countdown' now" in log_after[len(log_before):]
    code, out = rlvr("train", "resume=run", "train.steps=3")  # the run still resumes as it was
    assert code in (0, None), out
    assert _steps(tmp_path / "run") == [0, 1, 2, 3]
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["train"]["steps"] == 3


def test_a_resume_that_fails_in_its_first_step_leaves_the_config_as_it_was(tiny_lm, tmp_path, rlvr, monkeypatch):
    from rlvr.trainer import run

    assert rlvr(*tiny_train(tiny_lm, "train.steps=1", "output_dir=run"))[0] in (0, None)
    saved = (tmp_path / "run" / "config.yaml").read_text()

    def broken(ctx, step, algorithm):
        raise RuntimeError("step failed")

    monkeypatch.setattr(run, "train_step", broken)
    code, out = rlvr("train", "resume=run", "train.steps=2", "optim.lr=0.5")
    assert code not in (0, None) and "step failed" in out
    assert (tmp_path / "run" / "config.yaml").read_text() == saved


def test_samples_jsonl_is_strict_json_whatever_the_rewards_hold(tmp_path):
    """A NaN or infinite reward or detail is written as the string "NaN" / "Infinity" (verifiers/batch.py's
    jsonl_line), never the bare NaN that strict JSON readers refuse."""
    from rlvr.trainer.run_dir import RunFiles

    def strict(constant):
        raise ValueError(f"not strict JSON: {constant}")

    files = RunFiles(tmp_path)
    files.log_samples([{"step": 1, "completions": [{"text": "x", "reward": float("nan"),
                                                   "details": {"score": float("inf")}}]},
                       {"step": 1, "completions": [{"text": "y", "reward": 1.0},
                                                   {"text": "z", "reward": 0.0, "details": {"seen": {1, 2}}}]}])
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    first, second = (json.loads(line, parse_constant=strict) for line in lines)
    assert first["completions"][0]["reward"] == "NaN" and first["completions"][0]["details"]["score"] == "Infinity"
    assert second["completions"][0] == {"text": "y", "reward": 1.0}
    # a detail JSON has no form for (a set) is replaced by a note in its own completion; the rest is kept
    assert second["completions"][1] == {"text": "z", "reward": 0.0, "details": {
        "error": "this record's details could not be written as JSON"}}
