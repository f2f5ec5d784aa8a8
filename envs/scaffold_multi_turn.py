"""The templates `rlvr envs new NAME --multi-turn` writes instead of the one-turn ones (envs/scaffold.py).

The example is a small game with state, so every part of the multi-turn contract (envs/multi_turn.py) has
something to do: a running sum. The prompt gives the first number; each assistant message is the total
so far as `<answer>N</answer>`; a right total gets the next number (role "user"), a wrong one or the last
number ends the game. `start` makes the per-trajectory state, `step` plays one turn, `close` frees the state.
The verifiers score the last message against the final total, so only a game played to the end earns 1.
"""

ENV = '''"""{name}: a running sum, played over several turns. Replace the game with yours; keep the `MultiTurnEnv` contract.

Rows: "id" (stable per problem), "messages" (the first prompt), "answer" (what the verifiers compare the last
assistant message with), "reference" (a last message they score 1), plus the env's own fields ("numbers").
Per trajectory: `start(row)` makes its state, `step(row, state, text)` answers each assistant message with a
`Reply` (messages to append, or done=True), `close(state)` frees the state (also after an error). Limits
(`max_turns`, `max_total_tokens`, `max_tool_output_chars`) are the agent loop's; `rlvr train` logs
turns/mean and end/<reason>. Train and test never share a problem (`is_test` hashes its key).
"""

from __future__ import annotations

import itertools
import random
from typing import Any, ClassVar

from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.envs.split import check_fraction, draw_test, draw_train, is_test
from rlvr.errors import ConfigError
from rlvr.verifiers.extract import extract_answer_tag


class {cls}(MultiTurnEnv):
    """Add `rounds` numbers from 1 to `max_number`, one per turn; reply with the running total each turn."""

    name: ClassVar[str] = "{name}"
    # the verifiers read the last assistant message (the final total); any registered verifier works
    default_reward: ClassVar[list[dict]] = [{{"verifier": "exact", "weight": 1.0}}]
    # rollout.max_new_tokens's default here: per turn, room for "<think></think><answer>27</answer>"
    default_max_new_tokens: ClassVar[int] = 24
    # a turn cut at that length: "zero" (no positive reward) or "keep" (the verifiers' score)
    truncated_reward: ClassVar[str] = "zero"

    def __init__(self, *, rounds: int = 3, max_number: int = 9, test_fraction: float = 0.2, max_turns: int = 3,
                 max_total_tokens: int | None = None, reward: list[dict] | None = None, system_prompt: str | None = None):
        for field, value, low in (("rounds", rounds, 1), ("max_number", max_number, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name}: {{field!r}} must be an int >= {{low}}, got {{value!r}}")
        self.rounds, self.max_number = rounds, max_number
        self.test_fraction = check_fraction(test_fraction, "{name}")
        super().__init__(max_turns=max_turns, max_total_tokens=max_total_tokens, reward=reward,
                         system_prompt=system_prompt)

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        draw = draw_train if split == "train" else draw_test
        return [self._row(numbers) for numbers in draw(self._draw, _key, self.test_fraction, n, seed)]

    def test_size(self) -> int | None:
        """How many distinct test problems exist: rlvr's held-out evals (train.eval_prompts, `rlvr eval`'s
        n_prompts) take at most this many. None where counting would be slow; asking for too many then fails
        with how many the draw found."""
        if self.max_number ** self.rounds > 100_000:
            return None
        games = itertools.product(range(1, self.max_number + 1), repeat=self.rounds)
        return sum(is_test(_key(numbers), self.test_fraction) for numbers in games)

    def _draw(self, rng: random.Random) -> tuple[int, ...]:
        return tuple(rng.randint(1, self.max_number) for _ in range(self.rounds))

    def _row(self, numbers: tuple[int, ...]) -> dict[str, Any]:
        prompt = (f"Keep a running total. I say one number per turn; reply with the total so far as "
                  f"<answer>N</answer>. First number: {{numbers[0]}}.")
        return {{"id": f"{name}/{{_key(numbers)}}", "messages": [{{"role": "user", "content": prompt}}],
                "answer": str(sum(numbers)), "reference": f"<think></think><answer>{{sum(numbers)}}</answer>",
                "numbers": list(numbers)}}

    def start(self, row: dict) -> dict[str, Any]:
        return {{"said": 1}}  # how many of the row's numbers the game has said

    def step(self, row: dict, state: dict[str, Any], assistant_text: str) -> Reply:
        numbers = row["numbers"]
        total = extract_answer_tag(assistant_text)
        if total is None or total.strip() != str(sum(numbers[:state["said"]])) or state["said"] == len(numbers):
            return Reply([], done=True)  # a wrong total, or the last one: the verifiers judge this message
        state["said"] += 1
        return Reply([{{"role": "user", "content": f"Next number: {{numbers[state['said'] - 1]}}."}}])

    def close(self, state: dict[str, Any]) -> None:
        state.clear()  # nothing external here; an env holding a sandbox session closes it in close


def _key(numbers: tuple[int, ...]) -> str:
    return "+".join(map(str, numbers))


# The entry point. A class is a factory: rlvr checks `env.KEY=V` overrides against its signature.
load_env = {cls}
'''

YAML = '''# {name} (multi-turn): parameters of {pkg}.env.{cls} with their defaults (override with env.KEY=V).
name: {name}
rounds: 3            # numbers per game, one per turn
max_number: 9        # each number is from 1 to max_number
test_fraction: 0.2
max_turns: 3         # assistant messages per trajectory (status max_turns after the last)
max_total_tokens: null  # prompt + turns + replies in tokens (null: the model's context)
reward: null         # a list of {{verifier, weight, gate, params}}; null = the env default
system_prompt: null
'''

TEST = '''"""{name}: the env builds from its YAML, a game played right scores 1, a wrong total ends it, splits are disjoint."""

from pathlib import Path

import yaml

from rlvr.envs import load_env


def make_env():
    config = yaml.safe_load((Path(__import__("{pkg}").__file__).parent / "{name}.yaml").read_text())
    return load_env(config.pop("name"), **config)


def play(env, row, totals):
    """The conversation of a policy that replies `totals` in turn, as the agent loop builds it."""
    state, messages = env.start(row), list(env.messages(row))
    try:
        for total in totals:
            messages.append({{"role": "assistant", "content": f"<think></think><answer>{{total}}</answer>"}})
            reply = env.step(row, state, messages[-1]["content"])
            if reply.done:
                return messages
            messages += reply.messages
        return messages
    finally:
        env.close(state)


def test_a_game_played_right_scores_one_and_a_wrong_total_ends_it():
    env = make_env()
    rows = env.rows("train", 8, seed=0)
    right = [play(env, r, [sum(r["numbers"][:k + 1]) for k in range(len(r["numbers"]))]) for r in rows]
    assert all(len([m for m in t if m["role"] == "assistant"]) == len(r["numbers"]) for t, r in zip(right, rows))
    assert [s.reward for s in env.score_trajectories(right, rows)] == [1.0] * 8
    wrong = [play(env, r, [r["numbers"][0] + 1, 0, 0]) for r in rows]
    assert all(len(t) == len(env.messages(r)) + 1 for t, r in zip(wrong, rows))  # ended at the first wrong total
    assert all(s.reward == 0.0 for s in env.score_trajectories(wrong, rows))


def test_train_and_test_never_share_a_problem():
    env = make_env()
    train = {{r["id"] for r in env.rows("train", 500, seed=0)}}
    test = {{r["id"] for r in env.rows("test", 20, seed=0)}}
    assert len(test) == 20 and not train & test
'''
