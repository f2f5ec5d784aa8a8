"""The environment contract: data (rows) plus a scoring rule (a composite of verifiers).

An environment knows nothing of tokenizers, vLLM or the trainer: it hands out rows whose
`messages` are chat messages, and scores completion texts. Rows carry a `reference`
completion in the exact format the verifiers reward, for a supervised warm start.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rlvr.errors import ConfigError
from rlvr.verifiers.compose import Composite, build_reward
from rlvr.verifiers.result import VerifyResult


@dataclass(frozen=True)
class PromptStyle:
    """One way to ask an environment's question (`env.prompt=NAME`), with the reward that fits its answer format.

    `base`: the terse prompt the built-in tiny model is warm-started on (`81+60=`, answered as
    `<think></think><answer>141</answer>`). `instruct`: a user turn that states the answer format, for a pretrained
    chat model (`What is 81+60? Put only the final number inside <answer></answer>.`), scored on the answer tag or,
    failing that, the last number, plus a small reward for using the tag. `None` fields keep the class defaults.
    """

    template: str  # the user turn; {fields} come from the row
    reward: tuple[dict, ...]
    max_new_tokens: int | None = None  # None: the class's default_max_new_tokens
    truncated_reward: str | None = None  # None: the class's truncated_reward


# The format reward of instruct prompts: one <answer> block, last; text before it allowed (verifiers/format.py)
INSTRUCT_FORMAT = {"verifier": "format", "weight": 0.1, "params": {"think": False, "anchored": False}}


class Env(abc.ABC):
    """Rows for each split plus the verifiers that score completions of them.

    Row keys: "id" (stable, unique per problem), "messages" ([{"role": "user", "content": str}]),
    "answer" (str), "reference" (a completion the verifiers score as correct), plus env fields.
    """

    name: ClassVar[str] = ""
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    default_reward: ClassVar[list[dict]] = []
    # What `rollout.max_new_tokens=null` and `rollout.truncated_reward=null` (the defaults) mean for this
    # environment: a length its answers fit in, and what a completion cut at that length earns
    # (zero: no positive reward, a correct status becomes incorrect; keep: the verifiers' score).
    default_max_new_tokens: ClassVar[int] = 256
    truncated_reward: ClassVar[str] = "zero"
    # The constructor parameters that set how hard a problem is, which a difficulty curriculum
    # (`curriculum.enabled=true`, trainer/curriculum.py) may move; empty: the environment has none. A level
    # sets some of them and keeps the rest of the environment (prompt, reward, split) as configured.
    difficulty_params: ClassVar[tuple[str, ...]] = ()
    # The prompts a built-in environment offers (`env.prompt=base|instruct`, defaulting to `model.kind`); empty: the
    # environment has one prompt, its `prompt_template`. A style's reward applies when `env.reward` is null.
    prompt_styles: ClassVar[dict[str, PromptStyle]] = {}

    @classmethod
    def prompt_style(cls, prompt: str) -> PromptStyle:
        """The style named `prompt`, or a ConfigError naming `env.prompt` and the styles there are."""
        if prompt not in cls.prompt_styles:
            raise ConfigError(f"env.prompt={prompt!r}: {cls.name} offers {' | '.join(cls.prompt_styles)}")
        return cls.prompt_styles[prompt]

    def use_prompt_style(self, prompt: str) -> PromptStyle:
        """Choose the style named `prompt` for this instance: its length and truncation defaults replace the
        class's on the instance (what `rlvr eval` reads); returns the style for the constructor's template and
        reward."""
        style = self.prompt_style(prompt)
        self.prompt = prompt
        self.default_max_new_tokens = self.style_default("default_max_new_tokens", prompt)
        self.truncated_reward = self.style_default("truncated_reward", prompt)
        return style

    def styled_prompt(self, prompt: str, prompt_template: str | None, reward: list[dict] | None,
                      **sample_fields) -> tuple[str, list[dict]]:
        """Choose style `prompt` (`use_prompt_style`) and return (template, reward): the style's unless the config
        sets them. The template must format with `sample_fields` (one example of every field a row fills in), else a
        ConfigError naming `prompt_template` and the fields."""
        style = self.use_prompt_style(prompt)
        template = style.template if prompt_template is None else prompt_template
        try:
            template.format(**sample_fields)
        except (KeyError, IndexError, ValueError) as e:
            raise ConfigError(f"{self.name}: 'prompt_template' {template!r} does not format with "
                              f"{', '.join(sample_fields)}: {e!r}") from e
        return template, list(style.reward) if reward is None else reward

    @classmethod
    def style_default(cls, attribute: str, prompt: str | None):
        """`default_max_new_tokens` or `truncated_reward` under prompt style `prompt` (the class's own when the
        style leaves it unset, or the environment has no styles)."""
        style = cls.prompt_styles.get(prompt) if prompt else None
        value = getattr(style, attribute.removeprefix("default_"), None) if style else None
        return value if value is not None else getattr(cls, attribute)

    def difficulty_ladder(self) -> list[dict]:
        """The curriculum's levels when `curriculum.levels` is empty, easiest first: each a mapping over
        `difficulty_params`. The base environment has none."""
        return []

    def __init__(self, *, reward: list[dict] | None = None, system_prompt: str | None = None):
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(f"{self.name}: 'system_prompt' must be a string, got {system_prompt!r}")
        self.system_prompt = system_prompt
        self.verifier: Composite = build_reward(reward if reward is not None else self.default_reward)

    @abc.abstractmethod
    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """`n` rows of `split`, the same for the same arguments. Train may repeat; test rows are distinct."""

    def test_size(self) -> int | None:
        """How many distinct test rows exist, where the data fixes it (HumanEval's 164, a test file's lines);
        None for a procedural task, which draws as many as asked. The held-out eval takes at most this many."""
        return None

    @property
    def verifier_names(self) -> list[str]:
        return self.verifier.component_names

    def score(self, completions: Sequence[str], rows: Sequence[dict]) -> list[VerifyResult]:
        """One VerifyResult per (completion, row) pair."""
        if len(completions) != len(rows):
            raise ValueError(f"score got {len(completions)} completions for {len(rows)} rows; pass one row per completion")
        return self.verifier.verify_batch(list(completions), list(rows))

    def shutdown(self) -> None:
        """Stop what scoring started (sandboxes and warm containers, worker processes); the next score starts
        them again. `rlvr train` calls it when a run ends; they also stop when the process exits."""
        self.verifier.close()

    def messages(self, row: dict) -> list[dict]:
        """The prompt as chat messages: the system prompt (when set) then the row's messages."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        return system + [dict(m) for m in row["messages"]]

    def check_rows_args(self, split: str, n: int) -> None:
        """ValueError for a split this env lacks (naming the available ones) or a bad row count."""
        if split not in self.splits:
            raise ValueError(f"{self.name}: unknown split {split!r}; available: {', '.join(self.splits)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{self.name}: n must be an int >= 0, got {n!r}")
