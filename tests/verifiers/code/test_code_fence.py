"""Code-fence extraction on the host (verifiers/code/verifier.py `fenced_blocks`): the pattern it replaces, and a
bound on the work a hostile completion can cause before any sandbox limit applies."""

from __future__ import annotations

import random
import re

import pytest

import rlvr.verifiers.code.verifier as code_verifier
from rlvr.verifiers.code.verifier import extract_code, fenced_blocks
from tests.counting_text import CountingText

# The pattern extraction used before: findall backtracked quadratically on completion text (100 kB of backticks:
# about 6 s). Kept here as the reference for what honest text yields, run on short inputs only.
OLD_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)

HONEST = [
    "```python\ndef f(x):\n    return x\n```",
    "Here:\n```py title=x.py\nprint(1)\n```\nand a fix:\n```python\nprint(2)\n```\ndone",
    "``` c++ \nint main(){}\n```", "```\nplain\n```", "```python\nunclosed to the end\n", "```python\n```",
    "no fence at all", "```only an info line", "a ```python\nx = '```'\n``` tail", "```é-lang\nbody\n```",
    "```\t#cs.x+y extra words\nbody\n```",
]


@pytest.mark.parametrize("text", HONEST)
def test_the_scan_finds_what_the_pattern_found(text):
    assert fenced_blocks(text) == OLD_FENCE.findall(text)


def test_the_scan_finds_what_the_pattern_found_on_random_text():
    rng = random.Random(0)
    alphabet = ["`", "```", "\n", " ", "\t", "a", "py", "#", ".", "-", "+", "é", "x y"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert fenced_blocks(text) == OLD_FENCE.findall(text), text


HOSTILE = {
    "backticks": "`" * 100_000,
    "fence and a long word": "```" + "a" * 100_000,
    "fences and words": "```a" * 25_000,
    "fences and spaces": "``` " * 25_000,
    "empty blocks": "```\n" * 25_000,
    "one line per fence": "```" + "a\n" * 50_000,
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_completion_is_scanned_in_one_pass(name, monkeypatch):
    """Every character is examined by `find` exactly once, and by the info-line pattern only within one fence line
    (the old pattern retried the rest of the text from every backtick: 100 kB cost about 6 s)."""
    text = HOSTILE[name]
    spans = []
    lang = code_verifier._FENCE_LANG

    class Recorder:
        def match(self, string, pos, endpos):
            assert "\n" not in string[pos:endpos]
            spans.append(endpos - pos)
            return lang.match(string, pos, endpos)

    monkeypatch.setattr(code_verifier, "_FENCE_LANG", Recorder())
    CountingText.scanned = 0
    code = extract_code(CountingText(text))
    assert CountingText.scanned == len(text)
    assert sum(spans) <= len(text)
    expected = {"backticks": text, "fence and a long word": text, "fences and words": text,
                "fences and spaces": text, "empty blocks": "", "one line per fence": "a\n" * 49_999}
    assert code == expected[name]
