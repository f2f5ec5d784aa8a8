"""The math verifier's gold cache shown engaged (issue 52): GRPO scores G completions against one gold, and the gold is
parsed once, not G times. The verdicts alone are the same without the cache; tests/mutation_check.py switches it off
and requires this test to fail."""

from rlvr.verifiers.math import verifier as math_verifier
from rlvr.verifiers.math.verifier import MathVerifier
from rlvr.verifiers.result import Status


def test_one_gold_is_parsed_once_for_a_group_of_completions():
    gold = {"answer": r"\frac{12345}{6789}"}  # a gold no other test parses, so the first call is a miss
    math_verifier._gold.cache_clear()
    v = MathVerifier(workers=1)
    try:
        results = [v(rf"\boxed{{{c}}}", gold) for c in (r"\frac{12345}{6789}", "2", "1.5", r"\frac{12345}{6789}")]
    finally:
        v.close()
    assert [r.status for r in results] == [Status.CORRECT, Status.INCORRECT, Status.INCORRECT, Status.CORRECT]
    info = math_verifier._gold.cache_info()
    assert (info.misses, info.hits) == (1, 3)
