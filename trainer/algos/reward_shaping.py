"""Reward shaping applied to the verifiers' rewards before the advantages: pure tensor functions.

DAPO's soft overlong punishment (Yu et al. 2025, eq. 13). Departures from the paper:
* L_max is the generation limit itself (`rollout.max_new_tokens`); the paper generated up to
  20,480 tokens and shaped with L_max = 20,480, L_cache = 4,096, so "expected" answers are at most
  16,384 tokens. Its third case (|y| > L_max -> -1) cannot happen here, but is kept for callers
  whose lengths are not capped.
* The penalty is multiplied by `factor` (1 in the paper; verl calls it overlong_penalty_factor).
"""

from __future__ import annotations

import torch
from torch import Tensor


def overlong_penalty(lengths: Tensor, max_tokens: int, buffer: int, factor: float = 1.0) -> Tensor:
    """DAPO eq. 13 times `factor`, per completion (added to its reward):

        R_length(y) = 0                                       |y| <= L_max - L_cache
                    = ((L_max - L_cache) - |y|) / L_cache     L_max - L_cache < |y| <= L_max
                    = -1                                      L_max < |y|

    with L_max = `max_tokens`, L_cache = `buffer` (tokens), |y| = `lengths` [N] in tokens.
    buffer = 0 turns the shaping off (all zeros). Returns [N] floats <= 0.
    """
    lengths = lengths.to(torch.float32)  # [N]
    if buffer == 0:
        return torch.zeros_like(lengths)  # [N]
    expected = max_tokens - buffer  # L_max - L_cache
    penalty = ((expected - lengths) / buffer).clamp(min=-1.0, max=0.0)  # [N]; -1 at and beyond L_max
    return factor * penalty  # [N]
