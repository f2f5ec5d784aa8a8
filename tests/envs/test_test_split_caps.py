"""Documented commands that asked for more test problems than exist, or needed a `+`, now work as written:
`rlvr eval` takes a small test split whole (as HumanEval's 164), the error that remains names the settings and a
value that works, `env.taskset_args={...}` composes without `+`, and a scaffolded plugin counts its test
problems and says how to install pytest for its own test (trainer/evaluation/specs.py, envs/split.py,
conf/env/vf.yaml, envs/scaffold.py)."""

import re
import tomllib

import pytest

from rlvr.envs import load_env
from rlvr.envs import split
from rlvr.envs.scaffold import main, scaffold
from rlvr.trainer.evaluation.specs import EnvSpec, select_rows


def test_rlvr_eval_takes_a_counted_test_split_whole():
    env = load_env("guess_number")  # 16 secrets, 3 of them test: `rlvr eval env=guess_number n_prompts=100`
    lines = []
    rows = select_rows(env, EnvSpec("guess_number", "guess_number"), 100, seed=0, log=lines.append)
    assert len(rows) == env.test_size() == 3 and len({r["id"] for r in rows}) == 3
    assert lines == ["guess_number: n_prompts=100: it has 3 test problems; evaluating all 3"]


def test_rlvr_eval_takes_an_uncounted_test_split_whole_and_names_how_many():
    env = load_env("countdown", num_numbers=2, max_number=4, test_fraction=0.5)  # test_size() None: procedural
    with pytest.raises(split.TooFewTestProblems) as error:
        env.rows("test", 100)
    exist = error.value.available
    assert 0 < exist < 100 and f"ask for at most {exist} (train.eval_prompts in rlvr train, n_prompts in rlvr eval)" \
        in str(error.value)
    lines = []
    rows = select_rows(env, EnvSpec("countdown", "countdown"), 100, seed=0, log=lines.append)
    assert [r["id"] for r in rows] == [r["id"] for r in env.rows("test", exist)]
    assert lines == [f"countdown: n_prompts=100: only {exist} distinct test problems exist for these parameters; "
                     f"evaluating all {exist}"]


def test_rlvr_train_takes_an_uncounted_test_split_whole_as_rlvr_eval_does(tiny_lm, tmp_path, monkeypatch):
    """`rlvr train env=arithmetic env.digits=1` (the default eval_prompts=200; 23 test sums exist) trains."""
    from rlvr import api

    monkeypatch.chdir(tmp_path)
    lines = []
    run = api.train("env=arithmetic", "env.digits=1", "train.steps=1", "train.prompts_per_step=2",
                    "train.completions_per_prompt=2", "rollout=hf", "rollout.max_new_tokens=8", "model=hf",
                    f"model.name_or_path={tiny_lm.path}", "model.kind=base", "output_dir=run",
                    log=lambda *a, **k: lines.append(" ".join(map(str, a))))
    [said] = [m for m in map(re.compile(r"train.eval_prompts=200: only (\d+) distinct test problems of arithmetic "
                                        r"exist for these parameters; the held-out eval uses all (\d+)$").match, lines) if m]
    exist = int(said.group(1))
    assert int(said.group(2)) == exist and 0 < exist < 200
    assert run.summary["eval_prompts"] == exist and run.metrics[0]["eval/n"] == exist


def test_an_enumerated_test_split_names_the_settings_too():
    env = load_env("arithmetic", digits=1, ops=["+"])  # `rlvr train env=arithmetic env.digits=1`
    with pytest.raises(ValueError, match=r"asked for 200 test rows but only (\d+) distinct test problems exist; "
                                         r"ask for at most \1 \(train.eval_prompts in rlvr train, n_prompts in rlvr "
                                         r"eval\)"):
        env.rows("test", 200)


def test_taskset_args_compose_without_a_plus(compose_train):
    cfg = compose_train(["env=vf", "env.taskset=my_taskset", "env.taskset_args={num_tasks:500}"])
    assert dict(cfg.env.taskset_args) == {"num_tasks": 500}
    assert compose_train(["env=vf", "env.taskset=my_taskset"]).env.taskset_args is None  # the taskset's defaults


def test_a_reference_format_string_composes_as_the_yaml_comment_writes_it(compose_train):
    cfg = compose_train(["env=vf", "env.taskset=my_taskset", 'env.reference="<answer>{answer}</answer>"'])
    assert cfg.env.reference == "<answer>{answer}</answer>"


@pytest.mark.parametrize("multi_turn", [False, True])
def test_a_scaffolded_plugin_counts_its_test_problems_and_says_how_to_get_pytest(tmp_path, multi_turn, capsys,
                                                                                monkeypatch):
    import importlib
    import sys

    name = "cap_demo_multi" if multi_turn else "cap_demo"
    root = scaffold(name, tmp_path / "pkg", multi_turn=multi_turn)
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["test"] == ["pytest"]
    assert pyproject["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    readme = (root / "README.md").read_text()
    assert 'pip install -e ".[test]"' in readme and "python -m pytest tests" in readme
    assert not re.search(r"^\s*pytest", readme, re.M)  # not a bare `pytest`: the venv `make demo` makes has none

    monkeypatch.syspath_prepend(str(root))
    try:
        env_class = importlib.import_module(f"rlvr_env_{name}.env").load_env
        env = env_class() if multi_turn else env_class(max_number=99)  # the README's `env.max_number=99`
        size = env.test_size()
        assert size is not None and size < 200  # train.eval_prompts' default 200: rlvr train caps it to this
        assert len({r["id"] for r in env.rows("test", size)}) == size
        with pytest.raises(split.TooFewTestProblems):
            env.rows("test", size + 1)
    finally:
        for module in [m for m in sys.modules if m.startswith(f"rlvr_env_{name}")]:
            del sys.modules[module]

    assert main([f"{name}_cli", "--dir", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert f"pip install -e '{tmp_path / 'cli'}[test]'" in out and f"python -m pytest {tmp_path / 'cli'}/tests" in out
