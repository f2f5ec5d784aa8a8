"""A test's own control flow is no oracle: the calls a candidate receives never depend on its answers.

Issue 50, class 2. A test that stops at the first wrong answer outside an assert (`if got != want: raise
AssertionError`, an `and` chain holding `:=`, `unittest.TestCase().assertEqual`, `next()` over a generator of
checks, a loop that breaks on a mismatch) tells the candidate, by whether it is called again, that its last
answer was wrong; with any channel that outlives a run (a host-wide counter: class 1), later samples of the
same prompt learn the expected values and pass without solving the task. The checker foresees the test's calls
with a dry run and makes them all before the test runs (verifiers/code/forecast.py).

Each candidate here writes the calls it receives to its stderr, which the verifier reports: that is the
channel, played by this test. Every row runs on both backends.
"""

from __future__ import annotations

import os

import pytest
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.result import Status

pytestmark = pytest.mark.xdist_group("sandbox")

WANT = {1: 3, 2: 1, 3: 4}  # f(1), f(2), f(3): what the tests expect


def _tests(body: str, prefix: str = "") -> dict:
    return {"kind": "assert", "prefix": "", "entry_point": "f", "code": f"{prefix}def check(candidate):\n{body}"}


ORACLES = {
    "if got != want: raise AssertionError": _tests(
        "    for x, want in ((1, 3), (2, 1), (3, 4)):\n        if candidate(x) != want:\n"
        "            raise AssertionError(x)\n"),
    "an and chain holding :=": _tests(
        "    assert (a := candidate(1)) == 3 and (b := candidate(2)) == 1 and (c := candidate(3)) == 4\n"),
    "unittest.TestCase().assertEqual": _tests(
        "    t = unittest.TestCase()\n    t.assertEqual(candidate(1), 3)\n    t.assertEqual(candidate(2), 1)\n"
        "    t.assertEqual(candidate(3), 4)\n", prefix="import unittest\n"),
    "next() over a generator of failures": _tests(
        "    bad = next((x for x, want in ((1, 3), (2, 1), (3, 4)) if candidate(x) != want), None)\n"
        "    assert bad is None, bad\n"),
    "a loop that breaks on the first mismatch": _tests(
        "    ok = True\n    for x in (1, 2, 3):\n        if candidate(x) != {1: 3, 2: 1, 3: 4}[x]:\n"
        "            ok = False\n            break\n    assert ok\n"),
    "a helper that raises on a mismatch": _tests(
        "    def expect(got, want):\n        if got != want:\n            raise ValueError(got)\n"
        "    expect(candidate(1), 3)\n    expect(candidate(2), 1)\n    expect(candidate(3), 4)\n"),
}


def _logging(table: dict) -> str:
    """A candidate that answers from `table` (0 where it has no entry) and writes each call to its stderr."""
    return (f"import sys\nTABLE = {table!r}\n"
            "def f(x):\n    sys.stderr.write(f'call {x};')\n    sys.stderr.flush()\n    return TABLE.get(x, 0)\n")


def _calls(result) -> list[str]:
    return [c for c in result.details.get("stderr", "").split(";") if c.startswith("call")]


@pytest.fixture(scope="module", params=["docker", "local"])
def verifier(request):
    if request.param == "docker" and os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    v = CodeVerifier(backend=request.param, timeout_s=5, workers=2)
    yield v
    v.close()


@pytest.mark.parametrize("shape", list(ORACLES))
def test_the_calls_received_are_the_same_whatever_the_answers(verifier, shape):
    """Wrong at the first call, wrong at the second, right throughout: the same calls, in the same order."""
    tables = [{}, {1: 3}, dict(WANT)]
    results = verifier.verify_batch([f"```python\n{_logging(t)}```" for t in tables], [{"tests": ORACLES[shape]}] * 3)
    assert [r.status is Status.CORRECT for r in results] == [False, False, True], [r.details for r in results]
    seen = [_calls(r) for r in results]
    assert seen[0] == seen[1] == seen[2] and len(seen[0]) >= 3, seen


def test_an_attacker_with_a_channel_between_runs_learns_nothing(verifier):
    """The attack itself: each run guesses the first value it does not know and learns, from whether it was called
    again, whether the guess held; this test carries what it learns to the next run, as a host-wide counter would.
    Against a test that stops at the first wrong answer it solved the task in at most 3 + 4 + 3 runs before the
    forecast; now every run sees every call, so it learns nothing and never passes."""
    tests = {"tests": ORACLES["if got != want: raise AssertionError"]}
    known: dict[int, int] = {}
    guess = 0
    for run in range(12):
        position = len(known) + 1  # the first call whose answer it does not know
        result = verifier(f"```python\n{_logging({**known, position: guess})}```", tests)
        assert result.status is not Status.CORRECT, (run, known, guess, result.details)
        if len(_calls(result)) > position and position < 3:  # called again: the guess held; keep it
            known[position], guess = guess, 0
        else:
            guess += 1


RANDOM_ORACLE = _tests("    for _ in range(6):\n        x = random.choice((1, 2, 3))\n"
                       "        if candidate(x) != {1: 3, 2: 1, 3: 4}[x]:\n            raise AssertionError(x)\n",
                       prefix="import random\n")


def test_a_test_drawing_random_inputs_is_foreseen_too(verifier):
    """The dry run and the real one draw the same numbers (`random` is seeded alike for both, afresh each run), so
    a wrong first answer still receives all six calls."""
    tables = [{}, dict(WANT)]
    results = verifier.verify_batch([f"```python\n{_logging(t)}```" for t in tables], [{"tests": RANDOM_ORACLE}] * 2)
    assert [r.status is Status.CORRECT for r in results] == [False, True], [r.details for r in results]
    assert [len(_calls(r)) for r in results] == [6, 6], [_calls(r) for r in results]


def _forecast(body: str, **bounds) -> list:
    from rlvr.verifiers.code.forecast import rlvr_forecast
    from rlvr.verifiers.code.wire import wire_encode

    code = compile(f"def check(candidate):\n{body}", "tests.py", "exec")
    return rlvr_forecast(code, {"__name__": "tests"}, "f", wire_encode, **bounds)


def test_the_dry_run_takes_the_path_where_every_check_passes():
    calls = _forecast("    if candidate(1) != 3:\n        raise AssertionError\n    t = candidate(2)\n"
                      "    assert abs(t - 1) < 1e-9 and t.real == 1 and len(candidate(3, k=[4])) == 0\n")
    assert calls == [[["T", [1]], ["D", []]], [["T", [2]], ["D", []]], [["T", [3]], ["D", [["k", ["L", [4]]]]]]]


def test_the_dry_run_is_bounded_in_calls_and_in_cpu():
    assert len(_forecast("    while candidate(0):\n        pass\n", max_calls=50)) == 50
    spin = ("    x = candidate(5)\n    while x > 0:\n        try:\n            x -= 1\n"
            "        except BaseException:\n            pass\n")
    assert len(_forecast(spin, cpu_s=0.05)) == 1  # AGREE - 1 is AGREE, and AGREE > 0 forever: the timer ends it


def test_an_honest_program_still_passes_a_test_that_searches(verifier):
    """A search loop in the test is foreseen up to the dry run's bound (AGREE < 10 holds forever): 2,000 calls are
    made before the test runs, the test uses the first 7 of them, and an honest answer is still `correct`."""
    search = _tests("    n = 0\n    while candidate(n) < 10:\n        n += 1\n    assert n == 7\n")
    result = verifier("```python\ndef f(n):\n    return n + 3\n```", {"tests": search})
    assert result.status is Status.CORRECT, result.details
