"""code_feedback (envs/code_feedback.py): a failed attempt gets the failing shown test back and another turn,
the reward is the code verifier on the last attempt, and held-back tests never reach the conversation.

The policy is scripted (an engine that writes fixed programs, token ids in and out like the real ones) so
the turns are known; the programs run in the Docker sandbox like any completion's."""

from __future__ import annotations

import os

import pytest
import torch

from rlvr.envs import load_env
from rlvr.errors import ConfigError
from rlvr.trainer.rollout.agent_loop import run_trajectories, trajectory_metrics
from rlvr.trainer.rollout.types import Rollout, SamplingParams

pytestmark = [pytest.mark.xdist_group("sandbox"),
              pytest.mark.skipif(os.environ.get("RLVR_SKIP_DOCKER") == "1", reason="RLVR_SKIP_DOCKER=1")]

REVERSE = {"statement": "Read a word and print it reversed.", "tests": [{"stdin": "abc\n", "stdout": "cba\n"}]}
SUM = {"statement": "Read two integers and print their sum.",
       "tests": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "40 60\n", "stdout": "100\n"}]}


class ScriptedEngine:
    """Answers the k-th generate_ids call with `attempts[k]` (then EOS) for every trajectory; keeps the ids it saw."""

    def __init__(self, tokenizer, attempts: list[str]):
        self.tokenizer, self.attempts, self.seen = tokenizer, attempts, []

    def generate_ids(self, prompt_ids, params):
        self.seen.append([list(p) for p in prompt_ids])
        text = self.attempts[min(len(self.seen) - 1, len(self.attempts) - 1)]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return Rollout([list(p) for p in prompt_ids], [list(ids) for _ in prompt_ids], [text] * len(prompt_ids),
                       [torch.zeros(len(ids)) for _ in prompt_ids], [False] * len(prompt_ids))


def program(code: str) -> str:
    return f"```python\n{code}\n```"


def play(tmp_path, env_data, tokenizer, problem, attempts, **env_args):
    env = load_env("code_feedback", test_file=str(env_data.write_jsonl(tmp_path / "p.jsonl", [problem])), **env_args)
    row = env.rows("test", 1)[0]
    engine = ScriptedEngine(tokenizer, attempts)
    try:
        rollout = run_trajectories(engine, env, [row], SamplingParams(n=1, max_new_tokens=200))
        result = env.score_trajectories([t["messages"] for t in rollout.trajectories], [row])[0]
    finally:
        env.close_sandbox()
        env.verifier.components[0].verifier.close()
    return row, engine, rollout.trajectories[0], result


def test_a_failed_attempt_sees_the_failing_test_and_the_second_attempt_passes(tmp_path, env_data, tiny_lm):
    row, engine, traj, result = play(tmp_path, env_data, tiny_lm.tokenizer, REVERSE,
                                     [program("print(input())"), program("print(input()[::-1])")])
    assert "Example input:\nabc" in row["messages"][0]["content"]  # one case: nothing held back, it is shown
    assert (traj["turns"], traj["end"]) == (2, "done")
    assert result.reward == 1.0 and result.status.value == "correct"
    feedback = traj["messages"][2]
    assert feedback["role"] == "user"
    assert "failed test 1 of 1" in feedback["content"] and "Expected output:\ncba" in feedback["content"]
    assert "Your output:\nabc" in feedback["content"]
    # the second attempt was sampled after exactly that feedback, rendered into its ids
    second_prompt = tiny_lm.tokenizer.decode(engine.seen[1][0])
    assert "Your output:\nabc" in second_prompt and "Expected output:\ncba" in second_prompt
    assert trajectory_metrics([traj])["turns/mean"] == 2


def test_a_program_that_never_passes_ends_at_max_turns_with_reward_zero(tmp_path, env_data, tiny_lm):
    _, _, traj, result = play(tmp_path, env_data, tiny_lm.tokenizer, REVERSE, ["print('cba') without a fence (",
                                                                                program("import sys; sys.exit(3)")],
                              max_turns=3)
    assert (traj["turns"], traj["end"]) == (3, "max_turns")
    assert result.reward == 0.0
    crashed = traj["messages"][4]["content"]  # the second attempt's feedback: the exit code, not an output
    assert "exited with code 3" in crashed and "Expected output:\ncba" in crashed


def test_feedback_never_shows_held_back_tests(tmp_path, env_data, tiny_lm):
    # shown: "1 2" -> "3"; held back: "40 60" -> "100". print(0) fails both, print(3) passes only the shown one
    _, _, traj, result = play(tmp_path, env_data, tiny_lm.tokenizer, SUM, [program("print(0)"), program("print(3)")],
                              hidden_tests=1, hidden_reward="both", max_turns=3)
    conversation = "\n".join(m["content"] for m in traj["messages"])
    assert "Expected output:\n3" in conversation
    assert "40 60" not in conversation and "100" not in conversation
    assert (traj["turns"], traj["end"]) == (2, "done")  # the shown test passed: no hint the hidden one failed
    assert (result.reward, result.status.value) == (0.5, "incorrect")  # hidden_reward=both: 1 of 2 cases pass


def test_feedback_is_cut_to_max_tool_output_chars(tmp_path, env_data, tiny_lm):
    _, _, traj, _ = play(tmp_path, env_data, tiny_lm.tokenizer, REVERSE, [program("print('x' * 5000)")],
                         max_turns=2, max_tool_output_chars=100)
    feedback = traj["messages"][2]["content"]
    assert "[output truncated:" in feedback and feedback.endswith("```python code block.")  # the request survives
    assert len(feedback) < 100 + 150
    assert traj["output_truncated"] == 2  # both attempts' reports were cut (the last one is not appended)


def test_by_default_the_shown_cases_lookup_table_earns_only_its_share(tmp_path, env_data, tiny_lm):
    """With the defaults (one case held back, every case rewarded) a program that prints what the prompt showed
    passes the feedback and scores the shown share only; before, the reward was the shown cases' alone (1.0)."""
    table = "print({'1 2': 3}.get(input().strip(), 0))"
    row, _, traj, result = play(tmp_path, env_data, tiny_lm.tokenizer, SUM, [program(table)])
    assert "40 60" not in row["messages"][0]["content"]
    assert (traj["turns"], traj["end"]) == (1, "done")
    assert (result.reward, result.status.value) == (0.5, "incorrect")


def test_the_reward_runs_with_the_feedback_runs_limits(tmp_path, env_data):
    """A program that could tell a scored run from a feedback run by its limits could fail only where unscored."""
    env = load_env("code_feedback", test_file=str(env_data.write_jsonl(tmp_path / "p.jsonl", [SUM])),
                   test_timeout_s=2.5, test_memory_mb=300)
    assert env.verifier.components[0].verifier.limits == env.runner.limits
    with pytest.raises(ConfigError, match="hidden_reward"):
        load_env("code_feedback", test_file=str(tmp_path / "p.jsonl"), hidden_reward="shown",
                 reward=[{"verifier": "code"}])


def test_turn_rewards_are_each_attempts_shown_pass_fraction(tmp_path, env_data, tiny_lm):
    # both SUM cases shown; print(100) fails the first and passes the second (so every case runs, not only up to
    # the first failure), the real program passes both: 1.0 + 0.1 * (0.5 + 1.0) / 2
    _, _, traj, result = play(tmp_path, env_data, tiny_lm.tokenizer, SUM,
                              [program("print(100)"), program("a, b = map(int, input().split())\nprint(a + b)")],
                              turn_reward_weight=0.1, hidden_tests=0)
    assert traj["turn_rewards"] == [0.5, 1.0] and result.reward == 1.0
    env = load_env("code_feedback", turn_reward_weight=0.1)
    assert env.add_turn_rewards([result], [traj["turn_rewards"]])[0].reward == pytest.approx(1.075)


def test_bad_config_and_rows_name_code_feedback_and_the_row(tmp_path, env_data):
    with pytest.raises(ConfigError, match="code_feedback: 'backend' must be one of"):
        load_env("code_feedback", backend="vm")
    with pytest.raises(ConfigError, match="code_feedback: 'test_timeout_s'"):
        load_env("code_feedback", test_timeout_s=0)
    bad = env_data.write_jsonl(tmp_path / "bad.jsonl", [REVERSE, {"statement": "s", "tests": [{"stdin": "1"}]}])
    with pytest.raises(ConfigError, match=r"code_feedback: row 2 of .*test 0 needs string 'stdout'"):
        load_env("code_feedback", test_file=str(bad)).rows("test", 1)
    with pytest.raises(ValueError, match="code_feedback: no train data"):
        load_env("code_feedback").rows("train", 1)
