"""A run's train.log says why the run stopped (issue 51): a reward that fails on every completion stops the run with
one console line (`RewardFailed`), Ctrl-C with two; the file a user reads afterwards ended at the last step's log,
silent on why. Now it ends with the same line(s), from `rlvr train` and from `rlvr.train()`."""

import json
import sys
import textwrap

import pytest

from rlvr import api
from rlvr.trainer.experience.rewards import RewardFailed

RAISES = """
def raises(completions, **kwargs):
    return [1.0 / 0 for _ in completions]
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """my_rewards.py importable here and in the reward's worker processes; rows without an answer column, so no
    reference answer is checked before generation and the reward fails in step 1."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(RAISES))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sys.modules.pop("my_rewards", None)
    rows = [{"prompt": f"{a}+{b}="} for a in range(6) for b in range(6)]
    (tmp_path / "no_answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def tiny(tiny_lm) -> list[str]:
    return ["model=hf", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "rollout.max_new_tokens=8",
            "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=2", "threads=1"]


def test_a_failed_reward_ends_train_log_with_the_line_the_console_printed(workdir, tiny_lm, rlvr_cli):
    code, output = rlvr_cli("train", "env=dataset", "env.train_file=no_answers.jsonl",
                            'env.reward=[{verifier:python,params:{function:"my_rewards:raises"}}]', "train.steps=3",
                            *tiny(tiny_lm), "output_dir=run")
    console = code  # the SystemExit's message: what the command prints last, on stderr
    assert isinstance(console, str), output[-3000:]
    assert console.startswith("rlvr train: reward 'raises' failed on all 4 of step 1's completions"), console
    log = (workdir / "run" / "train.log").read_text().strip().splitlines()
    assert log[-1] == console and log.count(console) == 1


def test_ctrl_c_ends_train_log_with_the_two_lines_the_console_printed(workdir, tiny_lm, rlvr_cli, monkeypatch):
    """Ctrl-C lands in step 2, after step 1's checkpoint: both lines, the second the command that continues."""
    from rlvr.trainer import run as loop

    real = loop.take_step

    def interrupted_at_2(run, step):
        if step == 2:
            raise KeyboardInterrupt
        return real(run, step)

    monkeypatch.setattr(loop, "take_step", interrupted_at_2)
    code, output = rlvr_cli("train", "env.digits=1", "train.steps=5", "train.save_every=1", *tiny(tiny_lm),
                            "output_dir=run")
    assert isinstance(code, str) and code.startswith("rlvr train: interrupted (KeyboardInterrupt); continue from "
                                                     "step_1 with `rlvr train resume=run`"), output[-3000:]
    log = (workdir / "run" / "train.log").read_text()
    assert log.endswith(code + "\n"), log[-1000:]


def test_rlvr_train_from_python_ends_train_log_with_why(workdir, tiny_lm, capsys):
    with pytest.raises(RewardFailed) as stopped:
        api.train("env=dataset", "env.train_file=no_answers.jsonl", *tiny(tiny_lm), "train.steps=3",
                  reward_funcs=["my_rewards:raises"], output_dir="run")
    log = (workdir / "run" / "train.log").read_text().strip().splitlines()
    assert log[-1] == f"rlvr train: {stopped.value}"
    assert "my_rewards:raises raised ZeroDivisionError" in log[-1]
