"""The `rlvr` command: help, listing, and bad input refused at start with a message naming the problem.

`--help` and `envs` run as real subprocesses (exit codes, console script); the bad-input cases call
`rlvr.cli.main` in-process, which is the same code path, to keep them fast, plus one subprocess
to check the exit status a shell sees."""

import sys

import pytest

from rlvr.cli import main
from tests.cli_run import run_rlvr


def _rlvr(*args, cwd, env_extra=None):
    return run_rlvr(*args, cwd=cwd, env_extra=env_extra)


def test_help(tmp_path):
    result = _rlvr("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "train" in result.stdout and "envs" in result.stdout


def test_unknown_command(tmp_path):
    result = _rlvr("trian", cwd=tmp_path)
    assert result.returncode != 0 and "trian" in result.stderr


def test_train_help_lists_the_config_groups(tmp_path):
    """The command a shell runs: the choices first, each group's options (tests/rlvr/test_help.py checks the keys)."""
    result = _rlvr("train", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("Choices", 1)[1].split("\n\n", 1)[0]
    groups = {line.split("=", 1)[0].strip(): line for line in block.splitlines()[1:] if line.startswith("  ") and
              not line.startswith("   ")}
    expected = {"env": {"arithmetic", "countdown"}, "model": {"hf", "tiny"}, "algo": {"grpo"}, "rollout": {"auto", "hf"},
                "reward": {"env", "random"}, "train": {"fast"}}
    assert list(groups) == list(expected), result.stdout
    for group, options in expected.items():
        assert all(f" {o}," in groups[group] or groups[group].endswith(f" {o}") for o in options), groups[group]
    assert "algo_schema" not in result.stdout
    assert not (tmp_path / "outputs").exists()


def test_envs_lists_builtins(tmp_path):
    result = _rlvr("envs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in ("arithmetic", "countdown", "exact", "format"):
        assert any(line.split()[:2] == [name, "built-in"] for line in lines), f"{name} not listed as built-in"
    assert "failed to load" not in result.stdout


BAD_INPUTS = [
    ("train.stepz=3", "stepz"),
    ("env=nope", "nope"),
    ("env.digitz=3", "digitz"),  # Hydra: not in struct (and suggests +env.digitz)
    ("+env.digitz=3", "digitz"),  # the environment: no such parameter
    ("env.reward=[{verifier:nope}]", "reward"),  # Hydra: arithmetic.yaml lists no reward key; suggests +env.reward
    ("+env.reward=[{verifier:nope}]", "nope"),
    ("algo.aggregation=foo", "aggregation"),
    ("train.completions_per_prompt=1", "completions_per_prompt"),
    ("rollout.engine=nope", "rollout.engine"),
    ("+train.stepz=3", "did you mean train.steps?"),  # Hydra's suggested fix for train.stepz must not run silently
    ("algo=grpo algo.loss_type=ipo", "read by algo=dpo"),  # another algorithm family's key
    ("algo=dpo algo.clip_eps_high=0.5", "algo.clip_eps_high is not a key of algo=dpo (family dpo"),
    ("algo=reinforce algo.mu=4", "not by algo=reinforce"),  # a key of its family that it does not read
    ("train.samples_per_step=3", "train.samples_per_step is now train.logged_prompts_per_step"),
]


@pytest.mark.parametrize("override,named", BAD_INPUTS, ids=[o for o, _ in BAD_INPUTS])
def test_bad_input_stops_at_start(tiny_lm, tmp_path, monkeypatch, capsys, override, named):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # cli rewrites sys.argv for Hydra
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["train", *override.split(), f"model.name_or_path={tiny_lm.path}", f"output_dir={out}", "threads=1"])
    captured = capsys.readouterr()
    message = f"{info.value.code}\n{captured.out}\n{captured.err}"
    assert info.value.code not in (0, None), message
    assert named in message
    assert "Traceback" not in message
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


COMPOSITION_ERRORS = [
    ("train.stepz=3", "rlvr train: train.stepz=3: train has no key 'stepz'; did you mean train.steps?"),
    ("env.digitz=3", "rlvr train: env.digitz=3: env has no key 'digitz'; did you mean env.digits?"),
    ("train.steps=abc", "rlvr train: train.steps=abc: Value 'abc' of type 'str' could not be converted to Integer"),
    ("algo=nope", "Could not find 'algo/nope' (options: dapo, distill, dpo, dr_grpo, grpo, gspo, npg, ppo, reinforce, sft, trpo)"),
]


@pytest.mark.parametrize("override,line", COMPOSITION_ERRORS, ids=[o for o, _ in COMPOSITION_ERRORS])
def test_a_misspelt_key_or_a_bad_type_is_one_line_that_never_suggests_plus(tmp_path, monkeypatch, capsys, override,
                                                                          line):
    """Hydra's own message is a 7-line block whose fix (`+train.stepz=3`) adds the typo as a new key."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["train", override])
    captured = capsys.readouterr()
    assert isinstance(info.value.code, str) and "\n" not in info.value.code and line in info.value.code
    assert "To append" not in captured.err + captured.out and "+" + override not in info.value.code
    assert not list(tmp_path.iterdir())  # nothing written, not even outputs/<date>/


@pytest.mark.slow  # a fresh interpreter importing torch: about 10 s on a busy 2-core machine
def test_bad_input_exit_status_in_a_shell(tiny_lm, tmp_path):
    result = _rlvr("train", "algo.aggregation=foo", f"model.name_or_path={tiny_lm.path}", "output_dir=run",
                   cwd=tmp_path)
    assert result.returncode == 1
    assert "rlvr train: algo.aggregation='foo'" in result.stderr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_model_hf_without_path_is_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["train", "model=hf", f"output_dir={tmp_path / 'run'}", "threads=1"])
    captured = capsys.readouterr()
    message = f"{info.value.code}\n{captured.out}\n{captured.err}"
    assert info.value.code not in (0, None)
    assert "model.name_or_path" in message and "Traceback" not in message


def test_more_eval_prompts_than_test_problems_caps_the_eval_with_a_message(tiny_lm, tmp_path, monkeypatch, capsys):
    """digits=1 has about 20 test problems and the default asks for 200: the run evaluates on the ones there are
    and says so, naming train.eval_prompts (a run that stops here would be lost for a line of config)."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    main(["train", "env.digits=1", f"model.name_or_path={tiny_lm.path}", f"output_dir={tmp_path / 'run'}",
          "threads=1", "rollout=hf", "train.steps=1", "train.prompts_per_step=2", "train.completions_per_prompt=2"])
    captured = capsys.readouterr()
    message = f"{captured.out}\n{captured.err}"
    assert "train.eval_prompts=200" in message and "distinct test problems" in message, message
    assert "Traceback" not in message and (tmp_path / "run" / "checkpoints" / "step_1").is_dir()


def _one_line_failure(args, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(args)
    captured = capsys.readouterr()
    message = f"{info.value.code}\n{captured.out}\n{captured.err}"
    assert info.value.code not in (0, None), message
    assert "Traceback" not in message
    return str(info.value.code)


def test_model_path_that_does_not_exist_is_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "no_such_model"  # (a Hub name that does not exist fails the same way, after network retries)
    message = _one_line_failure(["train", f"model.name_or_path={path}", "output_dir=run", "threads=1",
                                 "env.digits=1", "train.eval_prompts=4"], monkeypatch, tmp_path, capsys)
    assert f"model.name_or_path={path}: no such directory" in message and len(message.splitlines()) == 1, message
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_broken_jsonl_line_is_one_line_naming_the_line(tiny_lm, tmp_path, monkeypatch, capsys):
    good = '{"problem": "1+1", "solution": "\\\\boxed{2}"}'
    (tmp_path / "bad.jsonl").write_text(f"{good}\n\n{{bad\n{good}\n")
    message = _one_line_failure(["train", "env=math", "env.train_file=bad.jsonl", "env.test_file=bad.jsonl",
                                 f"model.name_or_path={tiny_lm.path}", "output_dir=run", "threads=1"],
                                monkeypatch, tmp_path, capsys)
    assert "bad.jsonl line 3 is not JSON" in message and "'{bad'" in message, message
    assert len(message.splitlines()) == 1, message


def test_verify_refuses_to_write_over_its_input(tmp_path, monkeypatch, capsys):
    record = '{"completion": "<answer>2</answer>", "answer": "2", "verifier": "exact"}\n'
    (tmp_path / "in.jsonl").write_text(record)
    message = _one_line_failure(["verify", "input=in.jsonl", "output=./in.jsonl"], monkeypatch, tmp_path, capsys)
    assert "output=./in.jsonl is the input file" in message, message
    assert (tmp_path / "in.jsonl").read_text() == record  # untouched


def test_a_failed_eval_leaves_no_output_folder_behind(tmp_path, monkeypatch, capsys):
    (tmp_path / "outputs" / "train_run").mkdir(parents=True)  # what was there before stays
    message = _one_line_failure(["eval"], monkeypatch, tmp_path, capsys)  # no model given: fails before any work
    assert "no model to evaluate" in message, message
    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("*"))] == ["outputs",
                                                                                        "outputs/train_run"]


def test_directory_without_a_tokenizer_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "not_a_model").mkdir()
    message = _one_line_failure(["train", f"model.name_or_path={tmp_path / 'not_a_model'}", "output_dir=run",
                                 "threads=1", "env.digits=1", "train.eval_prompts=4"], monkeypatch, tmp_path, capsys)
    assert "cannot load a tokenizer" in message and len(message.splitlines()) == 1, message


def _without_chat_template(model_dir, copy):
    """A copy of a saved model whose tokenizer has no chat template (a base model's)."""
    import json
    import shutil

    shutil.copytree(model_dir, copy)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    for extra in copy.glob("chat_template.*"):
        extra.unlink()
    return copy


def test_tokenizer_without_a_chat_template_is_one_line(tiny_lm, tmp_path, monkeypatch, capsys):
    plain = _without_chat_template(tiny_lm.path, tmp_path / "base_model")
    message = _one_line_failure(["train", f"model.name_or_path={plain}", "output_dir=run", "threads=1",
                                 "env.digits=1", "train.eval_prompts=4"], monkeypatch, tmp_path, capsys)
    assert "no chat template" in message and str(plain) in message and len(message.splitlines()) == 1, message
    assert "model.prompt_format=plain" in message


def test_a_base_model_trains_with_plain_prompts(tiny_lm, tmp_path, monkeypatch, capsys):
    """What the message above suggests: model.prompt_format=plain trains a model whose tokenizer has no template."""
    import json

    from transformers import AutoTokenizer

    plain = _without_chat_template(tiny_lm.path, tmp_path / "base_model")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    main(["train", f"model.name_or_path={plain}", "model.prompt_format=plain", "rollout=hf", "env.digits=1",
          "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=4", "train.steps=1",
          "output_dir=run", "threads=1"])
    sample = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])
    saved = AutoTokenizer.from_pretrained(tmp_path / "run" / "checkpoints" / "step_1")
    rendered = saved.apply_chat_template(sample["prompt"], tokenize=False, add_generation_prompt=True)
    assert rendered == sample["prompt"][-1]["content"] + "\n\n"  # the question as plain text, then a blank line


def test_ctrl_c_says_how_to_resume(tiny_lm, tmp_path, monkeypatch, capsys):
    import rlvr.trainer.run as run

    step_of = run.train_step

    def interrupted(ctx, step, algorithm):  # what Ctrl-C does in step 2, after step 1's checkpoint
        if step == 2:
            raise KeyboardInterrupt
        return step_of(ctx, step, algorithm)

    monkeypatch.setattr(run, "train_step", interrupted)
    message = _one_line_failure(["train", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1",
                                 "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=4",
                                 "train.steps=3", "train.save_every=1", "output_dir=run", "threads=1"],
                                monkeypatch, tmp_path, capsys)
    first, where = message.splitlines()
    assert "interrupted" in first and "step_1" in first and "rlvr train resume=run" in first, message
    assert "run.py:train" in where and "interrupted" in where, message


def test_offline_dpo_does_not_claim_to_sample(tiny_lm, tmp_path, monkeypatch, capsys):
    import json

    data = tmp_path / "scored.jsonl"
    records = [{"prompt_id": p, "messages": [{"role": "user", "content": f"{p}+1="}], "completion": text,
                "reward": reward} for p in (1, 2) for text, reward in ((f"<answer>{p + 1}</answer>", 1.0), ("x", 0.0))]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    main(["train", "algo=dpo", f"data={data}", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1",
          "train.eval_prompts=4", "train.steps=1", "algo.pairs_per_step=2", "output_dir=run", "threads=1"])
    out = capsys.readouterr().out
    assert f"per step: 2 preference pairs from data={data} (nothing is sampled)" in out, out
    assert "prompts x" not in out


def test_a_plugin_envs_parameters_need_no_plus(compose_train, monkeypatch):
    """A plugin ships no YAML: its node lists the factory's parameters, so `env.level=5` composes and --help shows it."""
    from hydra.core.config_store import ConfigStore

    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry

    def load_env(*, level: int = 3, words: tuple = ("a", "b"), reward=None, rng=object()):
        raise AssertionError("not built here")

    monkeypatch.setattr(env_registry, "names", lambda: {"fake_plugin_env": "plugin fake"})
    monkeypatch.setattr(env_registry, "get", lambda name: load_env)
    offer_plugin_envs(ConfigStore.instance(), env_registry)
    cfg = compose_train(["env=fake_plugin_env", "env.level=5"])
    assert dict(cfg.env) == {"name": "fake_plugin_env", "level": 5, "words": ["a", "b"], "reward": None}
