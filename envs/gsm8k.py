"""GSM8K (Cobbe et al., 2021): grade-school word problems with a numeric answer.

Data: a local JSONL/Parquet file per split with GSM8K's fields `question` and `answer` (the
worked solution ending in `#### 72`), or the Hub dataset `openai/gsm8k` (config `main`) when
online. The gold answer is the text after the last `####`, thousands separators removed.

Reward: the `math` verifier with its last-number fallback on (GSM8K models often end with a bare
number), so `<answer>72</answer>`, `\\boxed{72}`, `#### 72` and "... so she earns 72 dollars." all
count. `format_gate=true` instead requires the R1 format: 0.9 for the answer, counted only when
the `format` verifier accepts the completion, plus 0.1 for the format itself.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from rlvr.envs.data import DataEnv, RowError, check_template, stable_id
from rlvr.envs.registry import register_env

DEFAULT_TEMPLATE = "{question}\nThink step by step, then give the final number in <answer></answer>."
MATH = {"verifier": "math", "params": {"last_number": True}}
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def gold_answer(solution: str) -> str | None:
    """The text after the last `####` of a GSM8K solution, commas between digit groups removed."""
    if "####" not in solution:
        return None
    return _THOUSANDS.sub("", solution.rsplit("####", 1)[1].strip())


@register_env("gsm8k")
class GSM8KEnv(DataEnv):
    """Word problems; reward = the final number equals the gold answer after `####`."""

    name: ClassVar[str] = "gsm8k"
    # step-by-step solutions of a few hundred tokens; a cut one must not score on its last number
    default_max_new_tokens: ClassVar[int] = 512
    truncated_reward: ClassVar[str] = "zero"
    required_fields: ClassVar[tuple[str, ...]] = ("question", "answer")
    default_reward: ClassVar[list[dict]] = [MATH]

    def __init__(self, *, train_file: str | None = None, test_file: str | None = None,
                 hub: str | None = "openai/gsm8k", hub_config: str | None = "main",
                 prompt_template: str = DEFAULT_TEMPLATE, format_gate: bool = False,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        self.prompt_template = check_template("gsm8k", prompt_template, question="1+1?")
        if reward is None and format_gate:
            reward = [{**MATH, "weight": 0.9, "gate": "format"}, {"verifier": "format", "weight": 0.1}]
        super().__init__(train_file=train_file, test_file=test_file, hub=hub, hub_config=hub_config,
                         reward=reward, system_prompt=system_prompt)

    def _row(self, raw: dict[str, Any]) -> dict[str, Any]:
        solution = str(raw["answer"])
        gold = gold_answer(solution)
        if gold is None or not gold:
            raise RowError(f"'answer' has no final answer after '####': {solution[-80:]!r}")
        reasoning = solution.rsplit("####", 1)[0].strip()
        return {
            "id": stable_id("gsm8k", str(raw["question"])),
            "messages": [{"role": "user", "content": self.prompt_template.format(question=raw["question"])}],
            "answer": gold,
            "reference": f"<think>{reasoning}</think><answer>{gold}</answer>",
            "solution": solution,
        }
