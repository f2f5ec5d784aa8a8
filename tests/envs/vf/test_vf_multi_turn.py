"""`env=vf:NAME` with a multi-turn `verifiers` (0.4.x) package: its `Env.run` answers each turn rlvr samples.

The package, written and pip-installed here, is a guessing game in the `verifiers.v1` API: the task holds a secret
(1 + idx % 8) and no prompt; the env's `run` opens the conversation ("Game K: guess my number ..."), answers each
guess with "higher", "lower" or a format reminder, and stops at the right guess (a `@vf.stop` on the Trace) or at
the role's `max_turns` (4). Rewards, by hand: `found` (weight 1) is 1 when the last guess is the secret, `quick`
(weight 0.5) is 1/turns when found, so a player that guesses 1, 2, 3, ... scores 1 + 0.5/s for a secret s <= 4
and 0 otherwise; `Env.finalize` records the user messages' count as the metric `user_turns`. A guess "HANG"
makes `run` sleep, "CRASH" makes it raise. Sibling packages hold environments rlvr refuses and a single-turn taskset.
"""

import contextlib
import json
import os
import re
import textwrap

import pytest
import torch

from rlvr.envs import load_env
from rlvr.envs.multi_turn import is_multi_turn
from rlvr.errors import ConfigError
from rlvr.trainer.rollout.agent_loop import observation_text, run_trajectories
from rlvr.trainer.rollout.types import Rollout, SamplingParams
from rlvr.verifiers.result import Status
from tests.cli_run import run_rlvr
from tests.editable_package import editable_install

pytest.importorskip("verifiers.v1")

# one worker runs this file: its module-scoped fixture is built once, not once per xdist worker
pytestmark = pytest.mark.xdist_group("vf_multi_turn")


PACKAGE = f"rlvr_test_vf_guess_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
GAME = '''
import re
import time

import verifiers.v1 as vf


def guess_of(text):
    found = re.findall(r"<answer>\\s*(-?\\d+)\\s*</answer>", text or "")
    return int(found[-1]) if found else None


class GuessData(vf.TaskData):
    secret: int


class GuessTask(vf.Task[GuessData]):
    @vf.stop
    async def guessed(self, trace: vf.Trace) -> bool:
        return guess_of(trace.last_reply) == self.data.secret

    @vf.reward(weight=1.0)
    async def found(self, trace: vf.Trace) -> float:
        return 1.0 if guess_of(trace.last_reply) == self.data.secret else 0.0

    @vf.reward(weight=0.5)
    async def quick(self, trace: vf.Trace) -> float:
        return 1.0 / trace.num_turns if guess_of(trace.last_reply) == self.data.secret else 0.0


class GuessConfig(vf.TasksetConfig):
    num_tasks: int = 16


class GuessTaskset(vf.Taskset[GuessTask, GuessConfig]):
    def load(self):
        for i in range(self.config.num_tasks):
            yield GuessTask(GuessData(secret=1 + i % 8), self.config.task)


class GuessEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(max_turns=4)
    high: int = 8


class GuessEnv(vf.Env[GuessEnvConfig]):
    async def run(self, task, agents):
        async with agents.player.interaction(task) as game:
            segment = await game.turn(f"Game {task.data.idx}: guess my number from 1 to {self.config.high} "
                                      f"as <answer>N</answer>.")
            while not segment.terminated:
                if segment.last_reply == "HANG":
                    time.sleep(3600)
                if segment.last_reply == "CRASH":
                    raise RuntimeError("the game fell over")
                guess = guess_of(segment.last_reply)
                hint = ("write <answer>N</answer>" if guess is None else "correct" if guess == task.data.secret
                        else "higher" if guess < task.data.secret else "lower")
                segment = await game.turn(hint)

    async def finalize(self, task, episode):
        for trace in episode.traces:
            trace.record_metric("user_turns", float(sum(m.role == "user" for m in trace.messages)))


__all__ = ["GuessTaskset", "GuessEnv"]
'''
SIBLINGS = {  # module: (source, what it exports); each is a top-level package beside the game, importing from it
    "two_roles": ('''
class TwoRolesConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()
    host: vf.AgentConfig = vf.AgentConfig()


class TwoRolesEnv(vf.Env[TwoRolesConfig]):
    async def run(self, task, agents):
        await agents.player.run(task)
''', ["GuessTaskset", "TwoRolesEnv"]),
    "bash_harness": ('''
class BashConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "bash"})


class BashEnv(vf.Env[BashConfig]):
    async def run(self, task, agents):
        await agents.player.run(task)
''', ["GuessTaskset", "BashEnv"]),
    "request_stop": ('''
class RequestStopTask(GuessTask):
    @vf.stop
    async def long_request(self, request: vf.Request) -> bool:
        return len(request.messages) > 9


class RequestStopTaskset(vf.Taskset[RequestStopTask, GuessConfig]):
    def load(self):
        yield RequestStopTask(GuessData(secret=1), self.config.task)


class RequestStopEnv(GuessEnv):
    pass
''', ["RequestStopTaskset", "RequestStopEnv"]),
    "toolset": ('''
class Calculator(vf.Toolset):
    @vf.tool
    async def add(self, a: int, b: int) -> int:
        """Add two numbers."""
        return a + b


class ToolTask(GuessTask):
    @classmethod
    def toolsets(cls, config):
        return [Calculator(vf.ToolsetConfig())]


class ToolTaskset(vf.Taskset[ToolTask, GuessConfig]):
    def load(self):
        yield ToolTask(GuessData(secret=1), self.config.task)


class ToolEnv(GuessEnv):
    pass
''', ["ToolTaskset", "ToolEnv"]),
    "single": ("", ["GuessTaskset"]),
    # a prompted game: `run` takes the opening reply with a bare turn(); by task idx % 4 it plays (0), or misuses
    # the API (1: a message on the prompted opening, 2: Interaction.send), or is not deterministic (3: its hint
    # counts the replays this worker has run)
    "prompted": ('''
import itertools

REPLAYS = itertools.count()


class PromptedTaskset(vf.Taskset[GuessTask, GuessConfig]):
    def load(self):
        for i in range(self.config.num_tasks):
            yield GuessTask(GuessData(prompt=f"Game {i}: guess my number from 1 to 8 as <answer>N</answer>.",
                                      secret=1 + i % 8), self.config.task)


class PromptedEnv(GuessEnv):
    async def run(self, task, agents):
        case = task.data.idx % 4
        async with agents.player.interaction(task) as game:
            segment = await (game.turn("hello") if case == 1 else game.turn())
            if case == 2:
                await game.send("psst")
            while not segment.terminated:
                hint = "higher" if case != 3 else f"higher ({next(REPLAYS)})"
                segment = await game.turn(hint)
''', ["PromptedTaskset", "PromptedEnv"]),
}
REFUSED = {  # module: (its Env's name, what the refusal says)
    "two_roles": ("TwoRolesEnv", "roles player, host"),
    "bash_harness": ("BashEnv", "harness 'bash'"),
    "request_stop": ("RequestStopEnv", "long_request"),
    "toolset": ("ToolEnv", "Toolsets (Calculator"),
}


def hand_reward(secret: int) -> float:
    """The counting player (guesses 1, 2, 3, ...) within 4 turns."""
    return 1.0 + 0.5 / secret if secret <= 4 else 0.0


@pytest.fixture(scope="module")
def vf_package(tmp_path_factory):
    root = tmp_path_factory.mktemp("vf_guess_pkg")
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text(textwrap.dedent(GAME))
    packages = [PACKAGE]
    for module, (source, exported) in SIBLINGS.items():
        packages.append(f"{PACKAGE}_{module}")  # verifiers finds a taskset by a top-level import name
        (root / packages[-1]).mkdir()
        (root / packages[-1] / "__init__.py").write_text(
            f"import verifiers.v1 as vf\nfrom {PACKAGE} import GuessConfig, GuessData, GuessEnv, GuessTask, "
            f"GuessTaskset\n{textwrap.dedent(source)}\n__all__ = {exported!r}\n")
    with editable_install(root, PACKAGE.replace("_", "-"), packages):
        yield root


@pytest.fixture
def game(vf_package, monkeypatch):
    """The package's name, importable in this process too (an editable install's .pth is read at start-up only;
    the workers inherit sys.path)."""
    monkeypatch.syspath_prepend(str(vf_package))
    return PACKAGE


@contextlib.contextmanager
def built(**params):
    env = load_env("vf", **params)
    try:
        yield env
    finally:
        env.shutdown()


def secret_of(env, row) -> int:
    opening = env.messages(row)[-1]["content"]
    return 1 + int(re.match(r"Game (\d+):", opening).group(1)) % 8


class CountingPlayer:
    """An engine that reads the game number and the turn from the ids it is given and answers turn t with
    `<answer>t</answer>` (or `say(game, turn)`), then EOS: scripted, but token in and token out like a real one."""

    def __init__(self, tokenizer, say=None):
        self.tokenizer, self.say, self.calls = tokenizer, say, []

    def generate_ids(self, prompt_ids, params):
        completions = []
        for ids in prompt_ids:
            text = self.tokenizer.decode(ids)
            game, turn = int(re.search(r"Game (\d+):", text).group(1)), text.count("<|im_start|>assistant")
            reply = self.say(game, turn) if self.say else None
            reply = f"<answer>{turn}</answer>" if reply is None else reply
            completions.append(self.tokenizer(reply, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id])
        self.calls.append(([list(p) for p in prompt_ids], completions))
        return Rollout([list(p) for p in prompt_ids], completions, [""] * len(completions),
                       [torch.full((len(c),), -0.5) for c in completions], [False] * len(completions))


def test_turns_masks_and_rewards_follow_the_environments_run(game, tiny_lm):
    tok = tiny_lm.tokenizer
    with built(taskset=game, test_fraction=0.25) as env:
        assert is_multi_turn(env) and env.max_turns == 4  # the role's AgentConfig.max_turns
        rows = env.rows("train", 4, seed=1)
        secrets = [secret_of(env, row) for row in rows]
        opening = env.messages(rows[0])  # no prompt: the environment's run() opens the conversation
        assert len(opening) == 1 and opening[0]["role"] == "user"
        assert re.fullmatch(r"Game \d+: guess my number from 1 to 8 as <answer>N</answer>\.", opening[0]["content"])
        engine = CountingPlayer(tok)
        rollout = run_trajectories(engine, env, rows, SamplingParams(n=2, max_new_tokens=16))
        assert len(rollout.trajectories) == 8
        for i, traj in enumerate(rollout.trajectories):
            secret = secrets[i // 2]
            turns = min(secret, 4)
            assert traj["turns"] == turns and traj["end"] == "done"  # the @vf.stop or the role's limit ended it
            guesses = [m["content"] for m in traj["messages"] if m["role"] == "assistant"]
            hints = [m["content"] for m in traj["messages"][1:] if m["role"] == "user"]
            assert guesses == [f"<answer>{t}</answer>" for t in range(1, turns + 1)]
            assert hints == ["higher"] * (turns - 1)  # a hint between turns; none after the last
            ids, mask = rollout.completion_ids[i], rollout.loss_mask[i]
            assert [role for role, _, _ in traj["segments"]] == ["assistant", "environment"] * (turns - 1) + ["assistant"]
            assert sum((seg for _, seg, _ in traj["segments"]), []) == ids
            assert mask == sum(([m] * len(seg) for _, seg, m in traj["segments"]), [])
            for role, seg, m in traj["segments"]:
                if role == "environment":  # the hint rendered alone and tokenised alone, never trained on
                    text = observation_text(tok, [{"role": "user", "content": "higher"}], None, ended_with_eos=True)
                    assert seg == tok(text, add_special_tokens=False)["input_ids"] and m == 0
                else:
                    assert m == 1 and seg[-1] == tok.eos_token_id
            assert torch.equal(rollout.logprobs[i][torch.tensor(mask) == 0], torch.zeros(mask.count(0)))
        results = env.score_trajectories([t["messages"] for t in rollout.trajectories], [r for r in rows for _ in "ab"])
        assert [r.reward for r in results] == pytest.approx([hand_reward(s) for s in secrets for _ in "ab"])
        assert [r.status for r in results] == [Status.CORRECT if s <= 4 else Status.INCORRECT for s in secrets for _ in "ab"]
        for result, secret in zip(results[::2], secrets):
            details = result.details["components"]["vf"]["details"]
            # verifiers checks the turn limit before the @vf.stops: a secret found on the 4th turn ends as max_turns
            assert details["stop"] == ("guessed" if secret < 4 else "max_turns")
            # finalize's metric: the opening and the reply to every guess, the last one's included ("correct" or a
            # hint the exchange ended on)
            assert details["metrics"]["user_turns"] == 1 + min(secret, 4)


def test_the_environments_config_and_a_turn_limit_from_rlvr(game):
    with built(taskset=game, env_args={"high": 20}, max_turns=2, test_fraction=0.25) as env:
        assert env.max_turns == 2  # the smaller of rlvr's and the role's
        row = env.rows("train", 1)[0]
        assert "from 1 to 20" in env.messages(row)[-1]["content"]
        state = env.start(row)
        assert env.step(row, state, "no guess").messages == [{"role": "user", "content": "write <answer>N</answer>"}]
        assert not env.step(row, state, "<answer>99</answer>").done  # rlvr's agent loop ends it at max_turns


def test_a_hanging_or_crashing_run_ends_that_trajectory_as_a_failure(game, tiny_lm):
    def say(game_number, turn):
        return {(0, 2): "HANG", (1, 1): "CRASH"}.get((game_number % 2, turn))

    with built(taskset=game, step_timeout=3.0, test_fraction=0.25) as env:
        rows = env.rows("train", 4, seed=3)
        games = [int(re.search(r"Game (\d+):", env.messages(r)[-1]["content"]).group(1)) for r in rows]
        assert {g % 2 for g in games} == {0, 1}
        rollout = run_trajectories(CountingPlayer(tiny_lm.tokenizer, say), env, rows, SamplingParams(n=1, max_new_tokens=16))
        results = env.score_trajectories([t["messages"] for t in rollout.trajectories], rows)
        for g, traj, result in zip(games, rollout.trajectories, results):
            assert traj["end"] == "done"
            if g % 2 == 0:  # hangs after its second guess (unless the first was right)
                if 1 + g % 8 == 1:
                    assert result.status is Status.CORRECT
                    continue
                assert traj["turns"] == 2 and result.status is Status.TIMEOUT and result.reward == 0.0
                assert result.details == {"reason": "GuessEnv.run() took over 3 s after turn 2; worker killed",
                                          "turn": 2}
            else:  # raises after its first
                assert traj["turns"] == 1 and result.status is Status.ERROR and result.reward == 0.0
                assert "the game fell over" in result.details["error"] and result.details["turn"] == 1
        assert not env._failures  # forgotten once scored


@pytest.mark.parametrize("module", sorted(REFUSED))
def test_what_cannot_map_is_refused_by_name(game, module):
    env_name, says = REFUSED[module]
    with pytest.raises(ConfigError, match=re.escape(says)) as refused:
        load_env("vf", taskset=f"{game}_{module}")
    assert env_name in str(refused.value)


def test_a_prompted_task_and_what_run_may_not_do(game):
    with built(taskset=f"{game}_prompted", test_fraction=0.1) as env:
        train = env.rows("train", env.num_rows - env.test_size())
        by_case = {}
        for row in train:
            by_case.setdefault(int(re.match(r"Game (\d+):", row["messages"][0]["content"]).group(1)) % 4, row)
        assert sorted(by_case) == [0, 1, 2, 3]
        row = by_case[0]  # the task's own prompt opens; no worker is asked for it
        assert env.messages(row) == row["messages"] and row["messages"][0]["role"] == "user"
        replies, states = {}, {}
        for case, row in by_case.items():  # "<answer>0</answer>" is below every secret: never the right guess
            states[case], replies[case] = env.start(row), ["<answer>0</answer>"]
            assert env.step(row, states[case], replies[case][0]).done == (case in (1, 2)), case
        for case in (0, 3):
            replies[case].append("<answer>0</answer>")
            reply = env.step(by_case[case], states[case], replies[case][-1])
            assert reply.done == (case == 3)  # the game goes on; the counting one's second replay says otherwise
            assert reply.done or reply.messages == [{"role": "user", "content": "higher"}]
        trajectories = [env.messages(by_case[c]) + [{"role": "assistant", "content": r} for r in replies[c]]
                        for c in range(4)]
        results = env.score_trajectories(trajectories, [by_case[c] for c in range(4)])
        played = results[0].details["components"]["vf"]["details"]  # scored by its rewards, still under way
        assert (results[0].status, played["rewards"]["found"], played["stop"]) == (Status.INCORRECT, [0.0, 1.0],
                                                                                    "user_closed")
        assert results[1].status is Status.ERROR and "a prompted task speaks first" in results[1].details["error"]
        assert results[2].status is Status.ERROR and "Interaction.send is not supported" in results[2].details["error"]
        assert results[3].status is Status.ERROR and "not a deterministic function" in results[3].details["error"]
        assert "turn 2 said 'higher (" in results[3].details["error"] and results[3].details["turn"] == 2
        assert all(r.reward == 0.0 for r in results[1:])


def test_bad_configuration_names_the_field(game):
    with pytest.raises(ConfigError, match="high"):
        load_env("vf", taskset=game, env_args={"high": "many"})
    with pytest.raises(ConfigError, match="step_timeout"):
        load_env("vf", taskset=game, step_timeout=0)
    with pytest.raises(ConfigError, match="single-turn"):  # the multi-turn keys on a single-turn taskset
        load_env("vf", taskset=f"{game}_single", max_turns=3)


def _rlvr(*args, cwd):
    return run_rlvr(*args, cwd=cwd, env_extra={"OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_trains_two_steps_and_evaluates_from_the_command_line(vf_package, tmp_path, tiny_lm):
    """Subprocesses, which find the package through its editable install."""
    common = ["rollout=hf", "rollout.max_new_tokens=8", "threads=1"]
    train = _rlvr("train", f"env=vf:{PACKAGE}", f"model.name_or_path={tiny_lm.path}", "train.steps=2",
                  "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=2",
                  "train.logged_prompts_per_step=2", "env.max_turns=2", *common, "output_dir=run", cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "reward/mean" in m]
    assert [m["step"] for m in steps] == [1, 2] and all(m["turns/mean"] >= 1 for m in steps)
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    completions = [c for s in samples for c in s["completions"]]
    assert len(completions) == 2 * 2 * 2
    for c in completions:  # the tiny random model never guesses: each trajectory is noise, a reminder, noise
        segments = c["trajectory"]["segments"]
        assert [s["mask"] for s in segments] in ([1], [1, 0, 1])
        assert all("write <answer>N</answer>" in s["text"] for s in segments if s["mask"] == 0)
    ev = _rlvr("eval", f"model.name_or_path={tmp_path / 'run' / 'checkpoints' / 'step_2'}", f"env=vf:{PACKAGE}",
               "n_prompts=2", "n_samples=2", "temperature=1.0", "env.max_turns=2", *common, "output_dir=ev",
               cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-3000:]
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert (results["envs"][0]["label"], results["envs"][0]["name"]) == (f"vf:{PACKAGE}", "vf")
