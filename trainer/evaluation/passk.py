"""Estimators for sampled evaluation: unbiased pass@k, maj@k, and a bootstrap interval.

pass@k (Chen et al., 2021, "Evaluating Large Language Models Trained on Code", eq. 1): with n
samples of which c are correct, the chance that k of them drawn without replacement contain a
correct one is `1 - C(n-c, k) / C(n, k)`. The binomials overflow floats for large n, so it is
computed as the paper's numpy snippet does: `1 - prod_{i=n-c+1}^{n} (1 - k/i)`.

maj@k (Lewkowycz et al., 2022, "Minerva"; Wang et al., 2023, self-consistency): the answer given
most often among k samples is the prediction; it scores when that answer is correct. Departure:
with n > k samples we vote over the *first* k (samples are i.i.d., so this is an unbiased but
noisier estimate of maj@k), rather than averaging over all C(n, k) subsets.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with `c` correct among `n` samples (needs 1 <= k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(correct_counts: Sequence[int], n: int, k: int) -> float:
    """pass@k averaged over prompts, each with `n` samples."""
    return sum(pass_at_k(n, c, k) for c in correct_counts) / len(correct_counts)


def majority_vote(votes: Sequence[Hashable | None]) -> int | None:
    """Index of the first sample giving the most common answer; None votes (no answer) don't count.

    Ties go to the answer seen first, so the result does not depend on hashing order."""
    counted = Counter(v for v in votes if v is not None)
    if not counted:
        return None
    top = max(counted.values())
    return next(i for i, v in enumerate(votes) if v is not None and counted[v] == top)


def maj_at_k(votes: Sequence[Hashable | None], correct: Sequence[bool], k: int) -> float:
    """1.0 when the majority answer of the first `k` samples is a correct one, else 0.0.

    `votes[i]` is sample i's normalised answer (None: nothing extracted), `correct[i]` its verdict."""
    if not 1 <= k <= len(votes) or len(votes) != len(correct):
        raise ValueError(f"maj@k needs 1 <= k <= {len(votes)} votes with one verdict each, got k={k}, {len(correct)} verdicts")
    winner = majority_vote(votes[:k])
    return float(winner is not None and bool(correct[winner]))


def bootstrap_ci(values: Sequence[float], seed: int = 0, resamples: int = 1000,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (one value per prompt, resampled with replacement)."""
    if not values:
        raise ValueError("bootstrap_ci needs at least one value")
    rng, n = random.Random(seed), len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    lo = means[int(math.floor(tail * (resamples - 1)))]
    hi = means[int(math.ceil((1.0 - tail) * (resamples - 1)))]
    return lo, hi
