"""Guess the number: a multi-turn game without tools. The policy guesses, the game says higher or lower.

Each assistant message should hold one guess as `<answer>N</answer>`; the reply (role "user") is
"higher", "lower" or, for a message without a readable guess, a reminder of the format. The game ends
at the right guess or at `max_turns`; the verifiers score the last guess against the secret (exact
match), so a trajectory earns its reward by finding the number within the turns it has.

Choice: the secret is the whole problem, so the split is by secret (`split.py`'s hash of "secret of
high"): test secrets are never trained on. Rows repeat secrets freely in train.

`reference_trajectory(row)` is the tiny model's warm-start transcript (trainer/models/transcripts.py): a binary
search, guessing the middle of the range still open after each reply, cut at `max_turns` guesses (high=16 needs
at most 5). Why: every prompt is the same text, so the one-turn `reference` (the secret) is a label the prompt
does not predict; trained on it alone, the tiny model guesses one fixed number and, never having seen a reply,
does no better after one, and its validation accuracy sat at 8-16% for 1,500 steps against a 30% target.
Trained on whole games it learns to act on the replies, which is the skill RL then sharpens: the default tiny
model reached 42% in 50 steps.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rlvr.envs.multi_turn import MultiTurnEnv, Reply
from rlvr.envs.registry import register_env
from rlvr.envs.split import check_fraction, draw_train, is_test, pick_test
from rlvr.errors import ConfigError
from rlvr.verifiers.extract import extract_answer_tag


@register_env("guess_number")
class GuessNumberEnv(MultiTurnEnv):
    name: ClassVar[str] = "guess_number"
    default_max_new_tokens: ClassVar[int] = 16
    truncated_reward: ClassVar[str] = "keep"
    default_reward: ClassVar[list[dict]] = [{"verifier": "exact", "weight": 1.0}]

    def __init__(self, *, high: int = 16, test_fraction: float = 0.25, max_turns: int = 5,
                 max_total_tokens: int | None = None, reward: list[dict] | None = None, system_prompt: str | None = None):
        if isinstance(high, bool) or not isinstance(high, int) or high < 2:
            raise ConfigError(f"guess_number: 'high' must be an int >= 2, got {high!r}")
        self.high = high
        self.test_fraction = check_fraction(test_fraction, "guess_number")
        super().__init__(max_turns=max_turns, max_total_tokens=max_total_tokens, reward=reward,
                         system_prompt=system_prompt)

    def _key(self, secret: int) -> str:
        return f"{secret} of {self.high}"

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        if split == "train":
            secrets = draw_train(lambda rng: rng.randint(1, self.high), self._key, self.test_fraction, n, seed)
        else:
            secrets = pick_test(self._test_secrets(), n, seed)
        return [self._row(s) for s in secrets]

    def test_size(self) -> int | None:
        return len(self._test_secrets())

    def _test_secrets(self) -> list[int]:
        return [s for s in range(1, self.high + 1) if is_test(self._key(s), self.test_fraction)]

    def _row(self, secret: int) -> dict[str, Any]:
        prompt = (f"I am thinking of a whole number from 1 to {self.high}. Guess it: write <answer>N</answer>. "
                  "I will reply higher or lower.")
        return {"id": f"guess_number/{self._key(secret)}", "messages": [{"role": "user", "content": prompt}],
                "answer": str(secret), "reference": f"<think></think><answer>{secret}</answer>", "secret": secret}

    def reference_trajectory(self, row: dict) -> list[dict]:
        """A binary search for the row's secret: the assistant's guesses and the game's replies, at most `max_turns`
        guesses (module docstring)."""
        low, high, messages = 1, self.high, []
        for _ in range(self.max_turns):
            guess = (low + high) // 2
            messages.append({"role": "assistant", "content": f"<think></think><answer>{guess}</answer>"})
            if guess == row["secret"]:
                break
            higher = guess < row["secret"]
            low, high = (guess + 1, high) if higher else (low, guess - 1)
            messages.append({"role": "user", "content": "higher" if higher else "lower"})
        return messages if messages[-1]["role"] == "assistant" else messages[:-1]

    def step(self, row: dict, state: dict[str, Any], assistant_text: str) -> Reply:
        guess = extract_answer_tag(assistant_text)
        try:
            value = int(guess) if guess is not None else None
        except ValueError:
            value = None
        if value is None:
            return Reply([{"role": "user", "content": f"Write one guess as <answer>N</answer>, N from 1 to {self.high}."}])
        if value == row["secret"]:
            return Reply([], done=True)
        return Reply([{"role": "user", "content": "higher" if value < row["secret"] else "lower"}])
