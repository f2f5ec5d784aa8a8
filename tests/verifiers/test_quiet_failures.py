"""What a training run must say out loud (issue 51's quiet failures): a reward that errors on every completion stops
the run with one line naming it and its first error, before any generation where the environment has reference
answers; one that errors on some warns with the count; `rollout=auto` names the engine it took in the log,
config.yaml and the model card; a run on the local sandbox backend says what that backend cannot contain here
(the doctor's own list). Ctrl-C and SIGTERM: tests/trainer/test_interrupts.py."""

import json
import sys
import textwrap

import pytest
from omegaconf import OmegaConf

from tests.cli_run import run_rlvr
from rlvr import api
from rlvr.trainer.experience.rewards import RewardFailed, check_reward_errors, reward_errors
from rlvr.verifiers.registry import verifier_registry
from rlvr.verifiers.result import Status, VerifyResult

MY_REWARDS = '''
def raises(completions, **kwargs):
    return [1.0 / 0 for _ in completions]


def one_value(completions, **kwargs):
    return [1.0]


def returns_none(completions, **kwargs):
    return None


def half(completions, **kwargs):
    return [0.5 for _ in completions]
'''


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """my_rewards.py and two JSONL files in the working directory: `with_answers.jsonl` has an answer column (each
    row's reference completion is `<answer>N</answer>`), `no_answers.jsonl` has none (no reference to check)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(MY_REWARDS))
    sys.modules.pop("my_rewards", None)
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(6) for b in range(6)]
    (tmp_path / "with_answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "no_answers.jsonl").write_text("".join(json.dumps({"prompt": r["prompt"]}) + "\n" for r in rows))
    return tmp_path


def small(tiny_lm, **extra):
    """rlvr.train keywords for a run of a few seconds on the tests' tiny model."""
    return {"model": {"name": "hf", "name_or_path": str(tiny_lm.path)}, "rollout": {"name": "hf", "max_new_tokens": 8},
            "train": {"steps": 1, "prompts_per_step": 2, "completions_per_prompt": 2, "micro_batch_size": 4,
                      "eval_prompts": 2}, "threads": 1, **extra}


def result(status: Status, error: str | None = None, second: Status = Status.CORRECT) -> VerifyResult:
    """A composite's result of two components, `first` (with `status`) and `second`."""
    first = {"reward": 0.0, "status": status.value, "details": {"error": error} if error else {}}
    other = {"reward": 1.0, "status": second.value, "details": {"error": "second broke"} if second is Status.ERROR
             else {}}
    return VerifyResult(0.0, status, {"components": {"first": first, "second": other}})


class Env:
    verifier_names = ["first", "second"]


# ---- 1. a reward that errors --------------------------------------------------------------------------------

def test_errors_are_counted_per_component_and_the_first_message_kept():
    results = [result(Status.INCORRECT), result(Status.ERROR, "f raised ValueError: no"),
               result(Status.ERROR, "f raised KeyError: k", second=Status.ERROR)]
    assert reward_errors(results) == {"first": (2, "f raised ValueError: no"), "second": (1, "second broke")}
    assert reward_errors([VerifyResult(0.0, Status.ERROR, {"error": "bad\nrecord"})]) == {"reward": (1, "bad record")}


def test_every_completion_errored_stops_with_one_line_some_warn_with_the_count():
    lines = []
    check_reward_errors([result(Status.CORRECT)] * 4, Env(), "step 1's completions", lines.append)
    assert lines == []  # nothing failed: nothing said
    some = [result(Status.ERROR, "f raised ZeroDivisionError: division by zero")] + [result(Status.CORRECT)] * 3
    check_reward_errors(some, Env(), "step 2's completions", lines.append)
    assert lines == ["warning: reward 'first' failed on 1 of 4 of step 2's completions (status error, reward 0); its "
                     "first error: f raised ZeroDivisionError: division by zero"]
    with pytest.raises(RewardFailed) as stopped:
        check_reward_errors([result(Status.CORRECT, second=Status.ERROR)] * 4, Env(), "step 3's completions",
                            lines.append)
    assert str(stopped.value) == ("reward 'second' failed on all 4 of step 3's completions (status error: no reward "
                                  "to learn from); its first error: second broke")
    assert "\n" not in str(stopped.value) and len(lines) == 1


@pytest.mark.parametrize("function, error", [
    ("raises", r"raised ZeroDivisionError"),
    ("one_value", r"returned 1 value for 2 completions"),
    ("returns_none", r"returned NoneType, not a list of 2 numbers"),
])
def test_a_reward_that_fails_on_the_reference_answers_stops_before_any_generation(workdir, tiny_lm, function, error):
    """The dataset's answer column gives each row a reference completion; the reward fails on all of them, so the
    run stops before a model is loaded or a token generated, and leaves no run behind."""
    with pytest.raises(RewardFailed, match=rf"^reward '{function}' failed on all 2 of the reference answers of "
                                           rf"dataset's train rows, before any generation \(status error.*my_rewards:"
                                           rf"{function} {error}"):
        api.train("env=dataset", "env.train_file=with_answers.jsonl", reward_funcs=[f"my_rewards:{function}"],
                  output_dir="run", log=lambda *a, **k: None, **small(tiny_lm))
    assert not (workdir / "run" / "config.yaml").exists() and not (workdir / "run" / "metrics.jsonl").exists()


def test_a_reward_that_fails_on_every_completion_stops_the_command_in_the_first_step(workdir, tiny_lm):
    """No answer column, so no reference to check: step 1 finds the reward failed on all its completions and the
    command ends with its usual one-line refusal, naming the function and its error; exit status 1."""
    done = run_rlvr("train", "env=dataset", "env.train_file=no_answers.jsonl", "model=hf",
                    f"model.name_or_path={tiny_lm.path}", "rollout=hf", "rollout.max_new_tokens=8",
                    'env.reward=[{verifier:python,params:{function:"my_rewards:raises"}}]', "train.steps=3",
                    "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=2",
                    "threads=1", "output_dir=run", cwd=workdir, env_extra={"PYTHONPATH": str(workdir)})
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rlvr train: reward 'raises' failed on all 4 of step 1's completions (status error") \
        and "my_rewards:raises raised ZeroDivisionError: float division by zero" in last, done.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (workdir / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0]  # the held-out eval before step 1, then the stop


@pytest.fixture
def flaky(monkeypatch):
    """verifier=flaky_test: status error for every second completion of a batch (by its place: deterministic)."""
    class Flaky:
        name = "flaky_test"

        def __call__(self, completion, record):
            return self.verify_batch([completion], [record])[0]

        def verify_batch(self, completions, records, workers=None, progress=None):
            return [VerifyResult(0.0, Status.ERROR, {"error": f"flaky_test broke on completion {i}"}) if i % 2 else
                    VerifyResult(1.0, Status.CORRECT, {}) for i in range(len(completions))]

    verifier_registry.get("exact")  # the built-ins load first, so the test's entry is not overwritten
    monkeypatch.setitem(verifier_registry._factories, "flaky_test", Flaky)


def test_some_errors_warn_once_per_step_with_the_count_and_the_run_goes_on(workdir, tiny_lm, flaky):
    lines = []
    run = api.train("env=dataset", "env.train_file=with_answers.jsonl", "env.reward=[{verifier:flaky_test}]",
                    output_dir="run", log=lambda *a, **k: lines.append(" ".join(map(str, a))),
                    **small(tiny_lm, train={"steps": 2, "prompts_per_step": 2, "completions_per_prompt": 2,
                                            "micro_batch_size": 4, "eval_prompts": 2}))
    warnings = [line for line in lines if line.startswith("warning: reward")]
    assert warnings == [
        "warning: reward 'flaky_test' failed on 1 of 2 of the reference answers of dataset's train rows, before any "
        "generation (status error, reward 0); its first error: flaky_test broke on completion 1",
        *[f"warning: reward 'flaky_test' failed on 2 of 4 of step {step}'s completions (status error, reward 0); its "
          f"first error: flaky_test broke on completion 1" for step in (1, 2)]]
    assert run.summary["steps"] == 2


# ---- 4. rollout=auto names its engine ----------------------------------------------------------------------

def test_rollout_auto_records_the_engine_it_took(workdir, tiny_lm):
    """vLLM is not installed here, or cannot run the tiny model's 16-wide heads on the CPU: auto takes hf and says
    why; config.yaml, the checkpoint's config and its model card record hf, never auto."""
    lines = []
    run = api.train("env=dataset", "env.train_file=with_answers.jsonl", reward_funcs=["my_rewards:half"],
                    output_dir="run", log=lambda *a, **k: lines.append(" ".join(map(str, a))),
                    **small(tiny_lm, rollout={"name": "auto", "max_new_tokens": 8}))
    [said] = [line for line in lines if line.startswith("engine:")]
    assert said.startswith("engine: hf (rollout=auto: ") and ("vLLM is not installed" in said
                                                               or "head sizes" in said), said
    assert OmegaConf.load(run.run_dir / "config.yaml").rollout.engine == "hf"
    assert OmegaConf.load(run.checkpoint / "rlvr_config.yaml").rollout.engine == "hf"
    assert "| `rollout.engine` | hf |" in (run.checkpoint / "README.md").read_text()


# ---- 6. the local sandbox's weaknesses ----------------------------------------------------------------------

def test_a_run_on_the_local_sandbox_warns_with_the_doctors_list(workdir, tiny_lm):
    from rlvr.sandboxes.doctor import local_limitations

    problems = [{"prompt": f"Print the sum of two integers (problem {i}).",
                 "tests": json.dumps([{"stdin": "1 2\n", "stdout": "3\n"}]),
                 "solution": "```python\na, b = map(int, input().split())\nprint(a + b)\n```"} for i in range(20)]
    (workdir / "code.jsonl").write_text("".join(json.dumps(problem) + "\n" for problem in problems))
    lines = []
    api.train("env=dataset", "env.train_file=code.jsonl", "env.backend=local", "env.columns.tests=tests",
              "env.columns.reference=solution", "env.columns.answer=null", output_dir="run",
              log=lambda *a, **k: lines.append(" ".join(map(str, a))), **small(tiny_lm))
    said = [line for line in lines if "local sandbox backend" in line]
    weaknesses = local_limitations()
    assert weaknesses and said == [f"warning: the local sandbox backend does not contain this (rlvr sandbox doctor "
                                   f"--backend local): {line}" for line in weaknesses]


def test_a_run_on_docker_says_nothing_of_the_local_backend(workdir, tiny_lm):
    lines = []
    api.train("env=dataset", "env.train_file=with_answers.jsonl", reward_funcs=["my_rewards:half"], output_dir="run",
              log=lambda *a, **k: lines.append(" ".join(map(str, a))), **small(tiny_lm))
    assert not [line for line in lines if "sandbox" in line]
