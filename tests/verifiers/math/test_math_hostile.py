"""Math answer extraction runs on the host before any time limit: its work on hostile text is bounded by structure.

No wall clock here (the machine may be loaded). Each test bounds the work itself: the text an extractor is given
(at most `MAX_REGION_CHARS` of a 100 kB completion), the characters the span scanner hands to `str.find`, and the
lines the "between ... and" check reads. Measured by hand on the patterns these replace (one 100 kB completion,
one core): 56 s for `\\[` repeated, 60 s for `\\(` repeated, 44 s for a run of spaces (stray-`$` pattern), 66 s
for a box, "or" and a run of spaces (hedge pattern), over 120 s for "final answer is" repeated, for
"final answer is 1" followed by 3,000 spaces, and for `a_a_a_...` between two boxes.
"""

from __future__ import annotations

import random

import pytest

from rlvr.verifiers.math import extract as ex
from rlvr.verifiers.math import hedge
from rlvr.verifiers.math.verifier import MathVerifier

N = 100_000
HOSTILE = {
    "unclosed display math": "\\[" * (N // 2),
    "unclosed inline parens": "\\(" * (N // 2),
    "unclosed dollars": "x$$" * (N // 3),
    "closed inline spans": "$a$ " * (N // 4),
    "Minerva opener repeated": "final answer is " * (N // 16),
    "Minerva opener, then spaces": "final answer is 1" + " " * N + "x",
    "a run of spaces": "a" + " " * N,
    "box, or, spaces": "\\boxed{1} or " + " " * N,
    "a name between boxes": "\\boxed{1}" + "a_" * (N // 2) + "\\boxed{2}",
    "between without and": "\\boxed{" + "between " * (N // 8) + "}",
    "answer tag of words": "<answer>" + "abc " * (N // 4) + "</answer>",
}
ALL_EXTRACTORS = ex.DEFAULT_ORDER + ("last_number", "bare")


class CountingStr(str):
    """A str that adds up the characters each `find` reads: up to its hit, or its whole window on a miss."""

    scanned = 0

    def find(self, sub, start=0, end=None):
        hit = super().find(sub, start, end)
        stop = hit + len(sub) if hit >= 0 else len(self) if end is None else min(end, len(self))
        CountingStr.scanned += max(stop - start, 0)
        return hit


@pytest.mark.parametrize("name", list(HOSTILE))
def test_every_extractor_reads_at_most_the_last_region_of_a_hostile_completion(name, monkeypatch):
    seen = []
    for key, fn in list(ex.EXTRACTORS.items()):
        monkeypatch.setitem(ex.EXTRACTORS, key, lambda text, fn=fn: seen.append(len(text)) or fn(text))
    text = HOSTILE[name]
    ex.extract(text, ALL_EXTRACTORS)
    assert seen and max(seen) <= ex.MAX_REGION_CHARS < len(text)


def test_the_region_keeps_the_end_of_the_text_from_a_line_start():
    text = "draft \\boxed{1}\n" * 5000 + "So the answer is \\boxed{7}."
    region = ex.answer_region(text)
    assert len(region) <= ex.MAX_REGION_CHARS and text.endswith(region) and region.startswith("draft")
    assert ex.extract(text) == (["7"], "boxed")


@pytest.mark.parametrize("name", ["unclosed display math", "unclosed inline parens", "unclosed dollars",
                                  "closed inline spans"])
def test_the_span_scanner_is_linear_in_the_text(name):
    """The span regex rescanned the rest of the text once per unclosed opener (about 10^9 characters here)."""
    CountingStr.scanned = 0
    ex.latex_spans(CountingStr(HOSTILE[name]))
    assert CountingStr.scanned <= 4 * N


def test_the_span_scanner_finds_what_the_span_regex_finds():
    rng = random.Random(0)
    pieces = ["$", "$$", "\\", "\\(", "\\)", "\\[", "\\]", "\n", "a", " ", "1", "\\$"]
    for _ in range(20_000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        want = [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in ex._LATEX_SPANS.finditer(s)]
        assert ex.latex_spans(s) == want, s


def test_the_minerva_line_is_read_as_before():
    text = "Final Answer: The final answer is $10,455$ . I hope it is correct. final answer is 3"
    assert ex.extract_minerva(text) == ["10,455"]
    assert ex.extract_minerva("The final answer is 5.. I hope it is correct.") == ["5."]
    assert ex.extract_minerva("final answer is 7 and no closing line") is None


def test_between_and_is_read_once_per_line(monkeypatch):
    calls = []
    real = hedge._AND

    class Spy:
        def search(self, text, pos, endpos):
            calls.append(endpos - pos)
            return real.search(text, pos, endpos)

    monkeypatch.setattr(hedge, "_AND", Spy())
    text = "between " * (N // 8)
    assert not hedge._is_range(text)
    assert len(calls) == 1 and sum(calls) < N
    assert hedge._is_range("it lies between 2\nand between 3 and 5")
    assert not hedge._is_range("it lies between 2\nand 5")


def test_a_hostile_batch_is_scored_by_the_verifier():
    verifier = MathVerifier(workers=1, timeout=2.0, last_number=True)
    try:
        results = verifier.verify_batch(list(HOSTILE.values()), [{"answer": "3"}] * len(HOSTILE))
    finally:
        verifier.close()
    assert all(r.reward == 0.0 for r in results), results
