"""`env=vf:NAME`: a `verifiers` (PyPI, 0.4.x) taskset package, built and pip-installed here, trains and evaluates.

The package is written by the test in the layout verifiers' own `vf-init` scaffolds (a Taskset subclass exported
in `__all__`, tasks with `@vf.reward` functions); its rewards are simple enough to derive by hand:
`correct` (weight 1) when the reply's last `<answer>` is the sum, `tagged` (weight 0.5) when the reply has an
`<answer>` block at all, so a reply scores 1.5, 0.5 or 0. Two replies make its functions hang or raise.
"""

import contextlib
import json
import os
import re
import textwrap

import pytest

from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status
from tests.cli_run import run_rlvr
from tests.editable_package import editable_install

pytest.importorskip("verifiers.v1")

# one worker runs this file: its module-scoped fixture is built once, not once per xdist worker
pytestmark = pytest.mark.xdist_group("vf_env")

# a name per xdist worker: each worker's module fixture installs and uninstalls its own copy
PACKAGE = f"rlvr_test_vf_sums_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
TASKSET = '''
import time

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        reply = trace.last_reply
        if reply == "HANG":
            time.sleep(3600)
        if reply == "CRASH":
            raise RuntimeError("the rubric fell over")
        found = re.findall(r"<answer>(.*?)</answer>", reply)
        return 1.0 if found and found[-1].strip() == self.data.answer else 0.0

    @vf.reward(weight=0.5)
    async def tagged(self, trace: vf.Trace) -> float:
        return 1.0 if "<answer>" in trace.last_reply else 0.0

    @vf.metric
    async def length(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class SumConfig(vf.TasksetConfig):
    num_tasks: int = 40


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self):
        for i in range(self.config.num_tasks):
            a, b = i % 9, i // 9
            yield SumTask(SumData(prompt=f"{a}+{b}=", system_prompt="Answer in <answer></answer>.",
                                  answer=str(a + b)), self.config.task)


__all__ = ["SumTaskset"]
'''


def hand_reward(reply: str, answer: str) -> float:
    found = re.findall(r"<answer>(.*?)</answer>", reply)
    return (1.0 if found and found[-1].strip() == answer else 0.0) + 0.5 * ("<answer>" in reply)


@pytest.fixture(scope="module")
def vf_package(tmp_path_factory):
    root = tmp_path_factory.mktemp("vf_pkg")
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text("import re\n" + textwrap.dedent(TASKSET))
    with editable_install(root, PACKAGE.replace("_", "-"), [PACKAGE]):
        yield root


@pytest.fixture
def vf_taskset(vf_package, monkeypatch):
    """The package's name, importable in this process too (an editable install's .pth is read at start-up only;
    the scoring workers inherit sys.path)."""
    monkeypatch.syspath_prepend(str(vf_package))
    return PACKAGE


@contextlib.contextmanager
def built(**params):
    env = load_env("vf", **params)
    try:
        yield env
    finally:
        for component in env.verifier.components:
            component.verifier.close()


def test_rows_split_and_rewards_are_the_tasks_own(vf_taskset):
    with built(taskset=vf_taskset, taskset_args={"num_tasks": 60}, reference="<answer>{answer}</answer>") as env:
        train, test = env.rows("train", 100, seed=0), env.rows("test", env.test_size(), seed=0)
        assert env.num_rows == 60 and 0 < len(test) < 60
        assert not {r["vf_key"] for r in train} & {r["vf_key"] for r in test}
        assert len({r["vf_key"] for r in train}) == 60 - len(test)  # 100 draws cover every train task
        assert env.rows("test", len(test), seed=0) == test
        row = test[0]
        a, b = row["messages"][1]["content"].rstrip("=").split("+")
        assert row["answer"] == str(int(a) + int(b)) and row["reference"] == f"<answer>{row['answer']}</answer>"
        assert env.messages(row)[0] == {"role": "system", "content": "Answer in <answer></answer>."}
        replies = [row["reference"], f"<answer>{int(row['answer']) + 1}</answer>", "no tag", "<answer>1</answer> x "
                   f"<answer>{row['answer']}</answer>"]
        results = env.score(replies, [row] * len(replies))
        assert [r.reward for r in results] == [hand_reward(x, row["answer"]) for x in replies] == [1.5, 0.5, 0.0, 1.5]
        assert [r.status for r in results] == [Status.CORRECT, Status.INCORRECT, Status.INCORRECT, Status.CORRECT]
        details = results[1].details["components"]["vf"]["details"]
        assert details == {"rewards": {"correct": [0.0, 1.0], "tagged": [1.0, 0.5]},
                           "metrics": {"length": float(len(replies[1]))}}


def test_a_hanging_or_crashing_rubric_is_a_status_not_a_hang(vf_taskset):
    with built(taskset=vf_taskset, score_timeout=5.0) as env:
        row = env.rows("train", 1)[0]
        good = f"<answer>{row['answer']}</answer>"
        results = env.score(["HANG", "CRASH", good], [row] * 3)
        assert results[0].status is Status.TIMEOUT and "5 s" in results[0].details["components"]["vf"]["details"]["reason"]
        assert results[1].status is Status.ERROR
        assert "the rubric fell over" in results[1].details["components"]["vf"]["details"]["error"]
        assert (results[2].reward, results[2].status) == (1.5, Status.CORRECT)  # the batch goes on


def test_bad_configuration_names_the_field(vf_taskset):
    with pytest.raises(ConfigError, match="env=vf:NAME"):
        load_env("vf")
    with pytest.raises(ConfigError, match="no_such_taskset_pkg"):
        load_env("vf", taskset="no_such_taskset_pkg")
    with pytest.raises(ConfigError, match="num_tasks"):
        load_env("vf", taskset=vf_taskset, taskset_args={"num_tasks": "many"})
    with pytest.raises(ConfigError, match="reference"):
        load_env("vf", taskset=vf_taskset, reference="{no_such_field}")


def _rlvr(*args, cwd):
    return run_rlvr(*args, cwd=cwd, env_extra={"OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_trains_two_steps_and_evaluates_from_the_command_line(vf_package, tmp_path, tiny_lm):
    """Subprocesses, which find the package through its editable install."""
    common = ["rollout=hf", "rollout.max_new_tokens=8", "threads=1"]
    train = _rlvr("train", f"env=vf:{PACKAGE}", f"model.name_or_path={tiny_lm.path}", "train.steps=2",
                  "train.prompts_per_step=2", "train.completions_per_prompt=4", "train.eval_prompts=4",
                  "train.logged_prompts_per_step=2", *common, "output_dir=run", cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "reward/mean" in m] == [1, 2]
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    scored = [(c["text"], c["reward"], s["answer"]) for s in samples for c in s["completions"]]
    assert len(scored) == 2 * 2 * 4
    assert all(reward == hand_reward(text, answer) for text, reward, answer in scored)  # the task's own rewards

    ev = _rlvr("eval", f"model.name_or_path={tmp_path / 'run' / 'checkpoints' / 'step_2'}", f"env=vf:{PACKAGE}",
               "n_prompts=4", "n_samples=2", "temperature=1.0", *common, "output_dir=ev", cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-3000:]
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert (results["envs"][0]["label"], results["envs"][0]["name"]) == (f"vf:{PACKAGE}", "vf")
