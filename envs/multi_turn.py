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

Not done yet: per-turn rewards; a code environment with test feedback (a failed attempt gets the failing
test's output and another turn); `rlvr envs new NAME --multi-turn` (envs/scaffold.py writes one-turn
plugins only); DPO on trajectories (trainer/validate.py refuses it by name).
"""

from __future__ import annotations

import abc
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
    (a malformed call, an unknown tool, a program that did not exit cleanly) and outputs cut."""

    messages: list[dict]
    done: bool = False
    tool_calls: int = 0
    tool_errors: int = 0
    output_truncated: int = 0
    tool_seconds: float = 0.0


class MultiTurnEnv(Env):
    """See the module docstring. Subclasses implement `rows` and `step`; `start`/`close` when they hold state."""

    multi_turn: ClassVar[bool] = True
    # JSON schemas of the tools, as transformers' `apply_chat_template(tools=...)` takes them; [] for none
    tools: ClassVar[list[dict]] = []

    def __init__(self, *, max_turns: int = 4, max_total_tokens: int | None = None, max_tool_output_chars: int = 1000,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        for field, value, low in (("max_turns", max_turns, 1), ("max_tool_output_chars", max_tool_output_chars, 16)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{self.name}: {field!r} must be an int >= {low}, got {value!r}")
        if max_total_tokens is not None and (isinstance(max_total_tokens, bool) or not isinstance(max_total_tokens, int)
                                             or max_total_tokens < 1):
            raise ConfigError(f"{self.name}: 'max_total_tokens' must be null or an int >= 1, got {max_total_tokens!r}")
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

    def truncate_output(self, text: str) -> tuple[str, bool]:
        """`text` cut to `max_tool_output_chars`, with a note of what was dropped; (text, whether it was cut)."""
        if len(text) <= self.max_tool_output_chars:
            return text, False
        dropped = len(text) - self.max_tool_output_chars
        return text[: self.max_tool_output_chars] + f"\n[output truncated: {dropped} more characters]", True


def is_multi_turn(env: Env) -> bool:
    return isinstance(env, MultiTurnEnv)
