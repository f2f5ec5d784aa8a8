"""The multi-turn environment contract, beside the one-turn `Env` (envs/base.py), which is unchanged.

A multi-turn environment starts a per-trajectory state from a row (`start`), answers each assistant
message with the next observation or the end (`step` -> `Reply`), frees the state (`close`), and
scores the whole trajectory with its verifiers (`score_trajectories`). It still knows nothing of
tokenizers or engines: the agent loop (trainer/rollout/agent_loop.py) renders the observations to
tokens, keeps the sampled ones as sampled, and enforces the limits that need tokens.

Limits, each ending the trajectory (or the tool output) with a status the trainer logs:
  max_turns              assistant messages per trajectory; the loop ends with "max_turns" when the
                         environment has not ended it by then
  max_total_tokens       prompt + every turn + every observation, in tokens (None: only the model's
                         context); the loop ends with "token_budget" (and the trajectory counts as truncated)
  max_tool_output_chars  each tool result is cut to this many characters with a note saying how much
                         was dropped (`truncate_output`); `Reply.output_truncated` counts the cuts
The loop's other end reasons: "done" (the environment ended it) and "truncated" (an assistant turn
hit `rollout.max_new_tokens` without EOS).

Scoring choice: the verifiers score the last assistant message (the final answer, as every built-in
verifier reads `<answer>`), and the record they get is the row plus `trajectory`, the whole
conversation, so a verifier that wants the turns can read them.

Per-turn rewards (optional, per env): `Reply.reward` is a float for the turn it answers, or None (no reward
that turn). A trajectory's training reward is then the verifiers' score plus `turn_reward_weight` times
the mean of its turn rewards (`add_turn_rewards`; weight 0.0, the default, leaves every reward as the
verifiers gave it). Choices: the mean, not the sum: with a sum, every extra turn adds to the reward, so a
policy that fails on purpose before its right answer beats one that answers right at once; with the mean
(each turn reward at most 1 for code_feedback's pass fraction) a trajectory that ends at its first turn with
that turn's best reward earns the most, and one that improves still earns more than one that stays wrong. The bonus is added to the trajectory's one scalar reward, so every algorithm
(group advantages, PPO's final-token reward, DPO's pairs) reads it unchanged; it is not credited to the
turn's own tokens (a per-token reward would need each algorithm's advantage to take one). It is added before
`rollout.truncated_reward`, which can zero it like any positive reward. `rlvr eval` reports the verifiers'
score only (a turn reward is shaping, not correctness). Logged: `reward/turn_mean`, the mean over
trajectories of their mean turn reward (0 for a trajectory without one), when any turn had one.

Not done yet: per-token credit for turn rewards (see above); offline DPO on trajectories (trainer/validate.py
refuses `data=` with a multi-turn env: the file format holds one-turn completions); DAPO's overlong penalty on
trajectories (refused by name).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rlvr.envs.base import Env
from rlvr.errors import ConfigError
from rlvr.verifiers.result import VerifyResult

END_REASONS = ("done", "max_turns", "token_budget", "truncated")


@dataclass
class Reply:
    """The environment's answer to one assistant message: messages to append (role "tool" or "user"),
    or `done` (then `messages` is ignored). Counts for the logs: tool calls made, how many failed
    (a malformed call, an unknown tool, a program that did not exit cleanly) and outputs cut; optionally the
    turn's reward."""

    messages: list[dict]
    done: bool = False
    tool_calls: int = 0
    tool_errors: int = 0
    output_truncated: int = 0
    tool_seconds: float = 0.0
    reward: float | None = None  # this turn's reward (module docstring, "Per-turn rewards"); None: none


class MultiTurnEnv(Env):
    """See the module docstring. Subclasses implement `rows` and `step`; `start`/`close` when they hold state."""

    multi_turn: ClassVar[bool] = True
    # JSON schemas of the tools, as transformers' `apply_chat_template(tools=...)` takes them; [] for none
    tools: ClassVar[list[dict]] = []

    def __init__(self, *, max_turns: int = 4, max_total_tokens: int | None = None, max_tool_output_chars: int = 1000,
                 turn_reward_weight: float = 0.0, reward: list[dict] | None = None, system_prompt: str | None = None):
        for field, value, low in (("max_turns", max_turns, 1), ("max_tool_output_chars", max_tool_output_chars, 16)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{self.name}: {field!r} must be an int >= {low}, got {value!r}")
        if max_total_tokens is not None and (isinstance(max_total_tokens, bool) or not isinstance(max_total_tokens, int)
                                             or max_total_tokens < 1):
            raise ConfigError(f"{self.name}: 'max_total_tokens' must be null or an int >= 1, got {max_total_tokens!r}")
        if (isinstance(turn_reward_weight, bool) or not isinstance(turn_reward_weight, (int, float))
                or not math.isfinite(turn_reward_weight)):
            raise ConfigError(f"{self.name}: 'turn_reward_weight' must be a finite number, got {turn_reward_weight!r}")
        self.turn_reward_weight = float(turn_reward_weight)
        self.max_turns = max_turns
        self.max_total_tokens = max_total_tokens
        self.max_tool_output_chars = max_tool_output_chars
        super().__init__(reward=reward, system_prompt=system_prompt)

    def start(self, row: dict) -> dict[str, Any]:
        """A fresh state for one trajectory of `row` (default: empty)."""
        return {}

    @abc.abstractmethod
    def step(self, row: dict, state: dict[str, Any], assistant_text: str) -> Reply:
        """The reply to the trajectory's latest assistant message (its text, special tokens removed)."""

    def close(self, state: dict[str, Any]) -> None:
        """Free what `state` holds (a sandbox session); called once per trajectory, also after an error."""

    def score(self, completions: Sequence[str], rows: Sequence[dict]) -> list[VerifyResult]:
        raise TypeError(f"{self.name} is a multi-turn environment: score whole trajectories with "
                        "score_trajectories (the rollout's agent loop does)")

    def score_trajectories(self, trajectories: Sequence[list[dict]], rows: Sequence[dict]) -> list[VerifyResult]:
        """One VerifyResult per (trajectory, row): the verifiers read the last assistant message, the record
        is the row plus `trajectory` (the whole conversation as chat messages)."""
        if len(trajectories) != len(rows):
            raise ValueError(f"score_trajectories got {len(trajectories)} trajectories for {len(rows)} rows")
        finals = [next((m["content"] for m in reversed(t) if m["role"] == "assistant"), "") for t in trajectories]
        records = [{**row, "trajectory": list(t)} for row, t in zip(rows, trajectories)]
        return self.verifier.verify_batch(finals, records)

    def add_turn_rewards(self, results: Sequence[VerifyResult], turn_rewards: Sequence[Sequence[float]]) -> list[VerifyResult]:
        """`results` (one per trajectory) with `turn_reward_weight` x the mean of each trajectory's turn rewards
        (0 without any) added to its reward, the mean kept in details as `turn_reward`. Weight 0: `results` as
        they are."""
        if len(results) != len(turn_rewards):
            raise ValueError(f"add_turn_rewards got {len(results)} results for {len(turn_rewards)} trajectories")
        if self.turn_reward_weight == 0:
            return list(results)
        means = [sum(t) / len(t) if t else 0.0 for t in turn_rewards]
        return [VerifyResult(r.reward + self.turn_reward_weight * m, r.status, {**r.details, "turn_reward": m})
                for r, m in zip(results, means)]

    def truncate_output(self, text: str) -> tuple[str, bool]:
        """`text` cut to `max_tool_output_chars`, with a note of what was dropped; (text, whether it was cut)."""
        if len(text) <= self.max_tool_output_chars:
            return text, False
        dropped = len(text) - self.max_tool_output_chars
        return text[: self.max_tool_output_chars] + f"\n[output truncated: {dropped} more characters]", True


def is_multi_turn(env: Env) -> bool:
    return isinstance(env, MultiTurnEnv)
