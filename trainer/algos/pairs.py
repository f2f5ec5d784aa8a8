"""Preference pairs from verified groups: within one prompt's completions, the higher-rewarded one is
chosen and the lower-rewarded one rejected. Pure: lists in, lists out; no torch, no tokenizer.

Rules, in order, for each group (one prompt's scored completions):
  1. Identical texts are deduplicated; the first occurrence (in sample order) is kept, with its reward.
  2. A pair needs chosen reward - rejected reward >= max(min_margin, a strictly positive gap): ties are
     never paired, so a group whose rewards are all equal (all correct, all wrong) gives no pair.
  3. `best_vs_worst`: one pair, a highest-rewarded against a lowest-rewarded completion (the first of
     each in sample order; with `length_match`, the best x worst combination of closest lengths).
     `all`: every chosen x rejected combination that passes rule 2, ordered by reward gap (largest first),
     then, with `length_match`, by length gap (smallest first), then spread so that every chosen
     completion is used once before any is used twice; the first `max_pairs_per_prompt` are kept.
Length matching only orders (prefers); it never drops a pair. It counters DPO's known length bias
(Park et al. 2024, "Disentangling Length from Quality in Direct Preference Optimization"), where the
longer side of a pair tends to be the chosen one.

Statuses are not read: the reward decides (for the built-in tasks, verified-correct completions carry
the highest reward, so "correct is chosen over incorrect" is rule 2).
"""

from __future__ import annotations

from dataclasses import dataclass

STRATEGIES = ("best_vs_worst", "all")


@dataclass(frozen=True)
class Scored:
    """One completion of a prompt: its text, its reward and its length (tokens, or any unit the caller uses)."""

    text: str
    reward: float
    length: int


@dataclass(frozen=True)
class Pair:
    group: int  # index of the prompt's group in the input
    chosen: int  # index of the chosen completion within its group (sample order, before deduplication)
    rejected: int
    reward_gap: float  # chosen reward - rejected reward, > 0


def build_pairs(groups: list[list[Scored]], strategy: str = "all", *, max_pairs_per_prompt: int = 8,
                min_margin: float = 0.0, length_match: bool = False) -> tuple[list[Pair], dict]:
    """Pairs from every group, and stats: `pairs/count`, `pairs/per_prompt` (mean over all prompts),
    `pairs/no_pair_frac` (prompts with no pair), `pairs/chosen_len_mean`, `pairs/rejected_len_mean`."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if max_pairs_per_prompt < 1:
        raise ValueError(f"max_pairs_per_prompt={max_pairs_per_prompt} must be >= 1")
    pairs: list[Pair] = []
    for g, group in enumerate(groups):
        pick = _best_vs_worst if strategy == "best_vs_worst" else _all_pairs
        pairs.extend(Pair(g, c, r, group[c].reward - group[r].reward)
                     for c, r in pick(group, _unique(group), min_margin, length_match, max_pairs_per_prompt))
    with_pair = {p.group for p in pairs}
    stats = {
        "pairs/count": len(pairs),
        "pairs/per_prompt": len(pairs) / len(groups) if groups else 0.0,
        "pairs/no_pair_frac": 1.0 - len(with_pair) / len(groups) if groups else 0.0,
        "pairs/chosen_len_mean": _mean([groups[p.group][p.chosen].length for p in pairs]),
        "pairs/rejected_len_mean": _mean([groups[p.group][p.rejected].length for p in pairs]),
    }
    return pairs, stats


def _unique(group: list[Scored]) -> list[int]:
    seen: set[str] = set()
    kept = []
    for i, item in enumerate(group):
        if item.text not in seen:
            seen.add(item.text)
            kept.append(i)
    return kept


def _passes(group, c: int, r: int, min_margin: float) -> bool:
    gap = group[c].reward - group[r].reward
    return gap > 0 and gap >= min_margin


def _best_vs_worst(group, kept, min_margin, length_match, cap) -> list[tuple[int, int]]:
    if not kept:
        return []
    best = max(group[i].reward for i in kept)
    worst = min(group[i].reward for i in kept)
    tops = [i for i in kept if group[i].reward == best]
    bottoms = [i for i in kept if group[i].reward == worst]
    if not _passes(group, tops[0], bottoms[0], min_margin):
        return []
    if not length_match:
        return [(tops[0], bottoms[0])]
    return [min(((c, r) for c in tops for r in bottoms),  # min() keeps the first of equal gaps
                key=lambda cr: abs(group[cr[0]].length - group[cr[1]].length))]


def _all_pairs(group, kept, min_margin, length_match, cap) -> list[tuple[int, int]]:
    candidates = []
    for c in kept:
        rejected = [r for r in kept if _passes(group, c, r, min_margin)]
        for k, r in enumerate(rejected):
            candidates.append((c, r, k, len(rejected)))
    chosen_rank = {c: n for n, c in enumerate(dict.fromkeys(c for c, *_ in candidates))}

    def order(item):
        c, r, k, n_rejected = item
        gap = group[c].reward - group[r].reward
        length_gap = abs(group[c].length - group[r].length) if length_match else 0
        spread = (k - chosen_rank[c]) % n_rejected  # round t pairs chosen i with its (i + t)-th rejected
        return (-gap, length_gap, spread, chosen_rank[c])

    return [(c, r) for c, r, *_ in sorted(candidates, key=order)[:cap]]


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else 0.0
