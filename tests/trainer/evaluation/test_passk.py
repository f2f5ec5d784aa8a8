"""pass@k against brute-force enumeration of k-subsets; maj@k on hand-made votes; the bootstrap interval."""

import itertools
from math import comb

import pytest

from rlvr.trainer.evaluation.passk import bootstrap_ci, maj_at_k, majority_vote, mean_pass_at_k, pass_at_k


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_equals_the_share_of_k_subsets_holding_a_correct_sample(n):
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(samples, k))
            brute = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_where_binomials_overflow():
    # C(2000, 1000) overflows a float; the product form does not. Exact value by integer arithmetic:
    n, c, k = 2000, 3, 1000
    exact = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 6, 5) == 1.0


def test_pass_at_1_is_the_fraction_correct():
    assert mean_pass_at_k([0, 2, 4], 4, 1) == pytest.approx((0 + 0.5 + 1) / 3)


@pytest.mark.parametrize("bad", [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(bad):
    with pytest.raises(ValueError):
        pass_at_k(*bad)


def test_majority_vote_ignores_missing_answers_and_breaks_ties_by_first_seen():
    assert majority_vote(["7", None, "8", "8", None, None]) == 2  # None x3 does not outvote "8" x2
    assert majority_vote(["7", "8", "8", "7"]) == 0  # a tie goes to the answer seen first
    assert majority_vote([None, None]) is None


def test_maj_at_k_on_hand_made_votes():
    votes = ["12", "13", "13", "12", "12"]
    correct = [True, False, False, True, True]
    assert maj_at_k(votes, correct, 1) == 1.0  # "12"
    assert maj_at_k(votes, correct, 3) == 0.0  # "13" wins 2-1
    assert maj_at_k(votes, correct, 4) == 1.0  # 2-2 tie: "12" came first
    assert maj_at_k(votes, correct, 5) == 1.0  # "12" wins 3-2
    assert maj_at_k([None, None, "5"], [False, False, False], 3) == 0.0
    assert maj_at_k([None, None], [False, False], 2) == 0.0
    with pytest.raises(ValueError):
        maj_at_k(votes, correct, 6)


def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    values = [0.0] * 30 + [1.0] * 70
    lo, hi = bootstrap_ci(values, seed=1)
    assert lo < 0.7 < hi and 0.5 < lo and hi < 0.9
    assert bootstrap_ci(values, seed=1) == (lo, hi)
    assert bootstrap_ci([1.0] * 5) == (1.0, 1.0)


@pytest.mark.parametrize("seed", range(5))
def test_bootstrap_ci_is_the_percentile_interval_derived_by_hand(seed):
    """4 prompts, two solved: a resampled mean is Binomial(4, 1/2) / 4, so P(0, .25, .5, .75, 1) = (1, 4, 6, 4, 1)/16
    and its CDF is .0625, .3125, .6875, .9375, 1. The percentile interval of R = 1000 sorted resampled means at
    level L takes index floor((1-L)/2 * 999) and ceil((1+L)/2 * 999):
      L = 0.95: indices 24 and 975; about 62.5 of the 1000 means are 0 and 937.5 are below 1 (sd sqrt(1000 p (1-p))
                about 7.7, both about 5 sd from the index), so the interval is (0, 1) for any seed;
      L = 0.50: indices 249 and 750 against 312.5 means at or below .25 and 687.5 at or below .5 (sd 14.7, 4.3 sd
                away): (0.25, 0.75).
    A loose bracket accepts any level from about 50% to 99%; this pins the level the report's `pass@1_ci95` names."""
    values = [0.0, 1.0, 0.0, 1.0]
    lo, hi = bootstrap_ci(values, seed=seed)
    assert (lo, hi) == (pytest.approx(0.0, abs=1e-6), pytest.approx(1.0, abs=1e-6))
    lo, hi = bootstrap_ci(values, seed=seed, level=0.5)
    assert (lo, hi) == (pytest.approx(0.25, abs=1e-6), pytest.approx(0.75, abs=1e-6))
