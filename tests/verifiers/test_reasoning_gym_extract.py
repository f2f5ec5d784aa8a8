"""The reasoning_gym verifier's answer extraction (verifiers/reasoning_gym.py `last_tagged`): what reasoning-gym's
own `extract_answer` gives, in one pass over the completion (its pattern cost the host 41 s on 100 kB of tags)."""

from __future__ import annotations

import random

import pytest

from rlvr.verifiers.reasoning_gym import last_tagged
from tests.counting_text import CountingText

rg_utils = pytest.importorskip("reasoning_gym.utils")

HONEST = ["<answer>42</answer>", "think <answer> 1 </answer> then <answer>\n2\n</answer>", "<answer>open only",
          "<answer>a<answer>b</answer>", "<answer></answer>", "no tags", "</answer><answer>x</answer></answer>",
          "<answer> </answer>", "<answer>1</answer><answer>2"]


@pytest.mark.parametrize("text", HONEST)
def test_the_scan_gives_what_reasoning_gym_gives(text):
    assert last_tagged(text, "answer") == rg_utils.extract_answer(text, tag_name="answer")


def test_the_scan_gives_what_reasoning_gym_gives_on_random_text():
    rng = random.Random(0)
    alphabet = ["<answer>", "</answer>", "<b>", "</b>", " ", "\n", "x", "<", ">", "/", "answer"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        for tag in ("answer", "b"):
            assert last_tagged(text, tag) == rg_utils.extract_answer(text, tag_name=tag), (text, tag)


@pytest.mark.parametrize("text,answer", [("<answer>" * 12_500, None), ("<answer>" * 12_500 + "</answer>", "<answer>" * 12_499),
                                         ("<answer>x</answer>" * 5_000, "x"), ("</answer>" * 11_000, None)],
                         ids=["openings", "openings then one closing", "pairs", "closings"])
def test_a_hostile_completion_is_read_once(text, answer):
    """Each character is examined by `find` at most once (the pattern retried the text from every opening tag)."""
    CountingText.scanned = 0
    assert last_tagged(CountingText(text), "answer") == answer
    assert CountingText.scanned <= len(text)
    assert CountingText.scanned >= len(text) - len("</answer>")
