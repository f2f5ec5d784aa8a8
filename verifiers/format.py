"""R1-style format reward: the completion is exactly `<think>...</think>` then `<answer>...</answer>`.

Anchored on purpose: text after `</answer>`, a second block, nested or out-of-order tags all fail,
so the policy cannot collect the format reward while also rambling past its answer.
Leading and trailing whitespace, whitespace between the blocks, and an empty think block are allowed.
The answer block must hold something other than whitespace: `<answer></answer>` or `<answer> </answer>` fails,
else a policy keeps the 0.1 format weight as a floor without ever answering.
`anchored=False` (the instruct prompts' format reward, envs/base.py) also allows text before the first block
(an instruct model's "47 + 38 = 85" before `<answer>85</answer>`); text after `</answer>` still fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

TAGS = ("<think>", "</think>", "<answer>", "</answer>")


def format_problem(text: str, think: bool = True, anchored: bool = True) -> str | None:
    """Why `text` is not `<think>..</think><answer>..</answer>` (think block optional when think=False; text before
    it allowed when anchored=False); None if it is."""
    text = text.strip()
    counts = {tag: text.count(tag) for tag in TAGS}
    has_think = counts["<think>"] or counts["</think>"]
    required = TAGS if (think or has_think) else TAGS[2:]
    for tag in required:
        if counts[tag] == 0:
            return f"missing {tag}"
        if counts[tag] > 1:
            return f"more than one {tag}"
    positions = [text.index(tag) for tag in required]
    if positions != sorted(positions):
        return "tags out of order or nested"
    first, last = required[0], "</answer>"
    if anchored and not text.startswith(first):
        return f"text before {first}"
    if len(required) == 4 and text[positions[1] + len("</think>"): positions[2]].strip():
        return "text between </think> and <answer>"
    if not text.endswith(last):
        return f"text after {last}"
    if not text[positions[-2] + len("<answer>"): positions[-1]].strip():
        return "empty <answer>"
    return None


@register_verifier("format")
class FormatVerifier:
    """Reward 1.0 for a well-formed think/answer completion, else 0.0 with the reason in details."""

    name = "format"

    def __init__(self, think: bool = True, anchored: bool = True):
        for key, value in (("think", think), ("anchored", anchored)):
            if not isinstance(value, bool):
                raise TypeError(f"format verifier: {key!r} must be a bool, got {value!r}")
        self.think, self.anchored = think, anchored

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        problem = format_problem(completion, self.think, self.anchored)
        if problem is None:
            return VerifyResult(1.0, Status.CORRECT, {})
        return VerifyResult(0.0, Status.INCORRECT, {"reason": problem})
