"""Per-turn rewards (envs/multi_turn.py): a trajectory's reward is the verifiers' score plus
`turn_reward_weight` x the mean of its turns' `Reply.reward`; weight 0 leaves the score as it was. The numbers
are derived by hand from a scripted policy and an env whose turn rewards are fixed."""

from __future__ import annotations

import pytest

from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.trainer.rollout.agent_loop import run_trajectories, trajectory_metrics
from rlvr.trainer.rollout.types import SamplingParams
from tests.verifiers.code.test_code_feedback import ScriptedEngine


class TwoTurns(MultiTurnEnv):
    """Rewards the first turn 0.25 and the second 0.5 (then ends); the third row's turns get no reward."""

    name = "two_turns"
    default_reward = [{"verifier": "exact", "weight": 1.0}]

    def rows(self, split, n, seed=0):
        return [{"id": f"t/{i}", "messages": [{"role": "user", "content": f"{i}+1="}], "answer": "7", "reference": "",
                 "silent": i == 2} for i in range(n)]

    def start(self, row):
        return {"turn": 0}

    def step(self, row, state, assistant_text):
        state["turn"] += 1
        reward = None if row["silent"] else [0.25, 0.5][state["turn"] - 1]
        return Reply([], done=True, reward=reward) if state["turn"] == 2 else Reply(
            [{"role": "user", "content": "again"}], reward=reward)


def rollout_and_score(env, tokenizer, answer="<answer>7</answer>"):
    rows = env.rows("train", 3)
    rollout = run_trajectories(ScriptedEngine(tokenizer, [answer]), env, rows, SamplingParams(n=1, max_new_tokens=32))
    scored = env.score_trajectories([t["messages"] for t in rollout.trajectories], rows)
    return rollout, scored, env.add_turn_rewards(scored, [t["turn_rewards"] for t in rollout.trajectories])


def test_the_reward_is_the_score_plus_the_weighted_mean_of_turn_rewards(tiny_lm):
    rollout, scored, rewarded = rollout_and_score(TwoTurns(turn_reward_weight=0.5), tiny_lm.tokenizer)
    assert [t["turn_rewards"] for t in rollout.trajectories] == [[0.25, 0.5], [0.25, 0.5], []]
    assert [r.reward for r in scored] == [1.0, 1.0, 1.0]
    assert [r.reward for r in rewarded] == [1.1875, 1.1875, 1.0]  # 1 + 0.5 * (0.25 + 0.5) / 2; no turn reward: 1
    assert rewarded[0].details["turn_reward"] == 0.375 and rewarded[0].status == scored[0].status
    assert trajectory_metrics(rollout.trajectories)["reward/turn_mean"] == pytest.approx(0.25)  # (0.375 * 2 + 0) / 3
    # a wrong final answer keeps its turn rewards: 0 + 0.5 * 0.375
    assert [r.reward for r in rollout_and_score(TwoTurns(turn_reward_weight=0.5), tiny_lm.tokenizer,
                                                "<answer>8</answer>")[2]] == [0.1875, 0.1875, 0.0]


def test_failing_on_purpose_before_the_right_answer_never_beats_answering_right_at_once(tiny_lm):
    """A sum of turn rewards paid for extra turns: two deliberate misses at 0.9 then a pass (0.9 + 0.9 + 1) beat
    one pass (1). The mean pays the one-turn answer most."""
    class Attempts(TwoTurns):
        def rows(self, split, n, seed=0):
            return [{**row, "misses": i} for i, row in enumerate(super().rows(split, n, seed))]

        def step(self, row, state, assistant_text):
            state["turn"] += 1
            if state["turn"] > row["misses"]:
                return Reply([], done=True, reward=1.0)
            return Reply([{"role": "user", "content": "again"}], reward=0.9)

    rewarded = rollout_and_score(Attempts(turn_reward_weight=1.0, max_turns=3), tiny_lm.tokenizer)[2]
    at_once, after_one_miss, after_two = (r.reward for r in rewarded)
    assert at_once == 2.0 and after_one_miss == pytest.approx(1.95) and after_two == pytest.approx(1 + 2.8 / 3)
    assert at_once > after_one_miss > after_two


def test_weight_zero_leaves_the_verifiers_results_untouched(tiny_lm):
    _, scored, rewarded = rollout_and_score(TwoTurns(), tiny_lm.tokenizer)
    assert all(a is b for a, b in zip(scored, rewarded))
    with pytest.raises(Exception, match="'turn_reward_weight'"):
        TwoTurns(turn_reward_weight=float("nan"))


def test_a_turn_reward_that_is_not_a_finite_number_stops_the_rollout_naming_the_env(tiny_lm):
    class Broken(TwoTurns):
        def step(self, row, state, assistant_text):
            return Reply([], done=True, reward=float("inf"))

    with pytest.raises(ValueError, match=r"two_turns: step returned Reply.reward=inf"):
        rollout_and_score(Broken(turn_reward_weight=1.0), tiny_lm.tokenizer)


def test_the_training_step_reward_carries_the_turn_rewards(tiny_lm, compose_train):
    """sample_and_score (what every algorithm's step calls) applies the env's weight."""
    from rlvr.trainer.experience.collect import sample_and_score
    from tests.trainer.algos.test_algorithm_steps import _context
    from tests.trainer.test_trainer_step import STEP_OVERRIDES

    cfg = compose_train(STEP_OVERRIDES + ["train.completions_per_prompt=2"])
    ctx = _context(cfg, tiny_lm)
    ctx.env, ctx.engine = TwoTurns(turn_reward_weight=0.5), ScriptedEngine(tiny_lm.tokenizer, ["<answer>7</answer>"])
    sampled = sample_and_score(ctx, 1, {})
    expected = [[1.0 if r["silent"] else 1.1875] * 2 for r in sampled.rows]
    assert sampled.rewards.tolist() == expected
