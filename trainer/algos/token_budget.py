"""Micro-batches formed by a token budget instead of a row count (`train.max_tokens_per_micro_batch`).

Rows are right-padded to the longest of their micro-batch, so a micro-batch costs about
rows x its longest row. Sorting the rows by length and filling each micro-batch while
`rows x longest <= budget` groups long rows with long and short with short: few padding tokens
are computed (`PackedBatch.select(..., trim=True)` drops the columns past a micro-batch's longest
row) and each forward holds about the same number of tokens. verl's dynamic batch size
(`rearrange_micro_batches`, by a token budget) does the same.

With `train.pack_sequences=true` a micro-batch's rows run as one packed row (models/packing.py), so a
micro-batch costs the sum of its rows' lengths: `packed=True` fills each by that sum instead, first fit
in decreasing length (NeMo-RL's and verl's packers fill bins the same way). The code is ours.

The loss is unchanged: each micro-batch's loss is already normalised by the whole batch's counts
(update.py), so any partition of the rows sums to the same loss and gradient (tests/trainer/algos/test_token_budget.py).
"""

from __future__ import annotations

import torch


def token_budget_micro_batches(lengths: torch.Tensor, max_tokens: int, packed: bool = False) -> list[torch.Tensor]:
    """[N] row lengths (tokens, padding excluded) -> the row indices of each micro-batch, longest rows
    first; every micro-batch has `len(rows) x max(length) <= max_tokens` (`packed`: `sum(length) <= max_tokens`),
    except a single row longer than the budget, which goes alone. Ties keep the rows' order (a stable sort),
    so the plan is deterministic."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} must be >= 1")
    order = torch.sort(lengths, descending=True, stable=True).indices  # [N]
    if packed:
        return _first_fit(order.tolist(), lengths.tolist(), max_tokens)
    plan, current, longest = [], [], 0
    for row in order.tolist():
        length = int(lengths[row])
        if current and (len(current) + 1) * max(longest, length) > max_tokens:
            plan.append(torch.tensor(current, dtype=torch.long))
            current, longest = [], 0
        current.append(row)
        longest = max(longest, length)
    if current:
        plan.append(torch.tensor(current, dtype=torch.long))
    return plan


def _first_fit(order: list[int], lengths: list[int], max_tokens: int) -> list[torch.Tensor]:
    """Rows in `order` (longest first), each into the first micro-batch it fits in by summed length."""
    bins: list[list[int]] = []
    room: list[int] = []
    for row in order:
        length = int(lengths[row])
        slot = next((i for i, left in enumerate(room) if left >= length), None)
        if slot is None:
            bins.append([row])
            room.append(max_tokens - length)
        else:
            bins[slot].append(row)
            room[slot] -= length
    return [torch.tensor(rows, dtype=torch.long) for rows in bins]
