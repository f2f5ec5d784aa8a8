"""The reward-hacking monitor in the training loop: the step's hack rates, and screening.

A verifier names what a completion tried in `details["hacks"]` (verifiers/code_signatures.py for code,
verifiers/math_hedge.py for math); inside a composite reward, in any component's details. Every step
logs `hack/rate` (share of completions with any kind) and `hack/<kind>_rate` for each kind seen, and
samples.jsonl gives a flagged completion a `hacks` list.

Held-back tests (verifiers/code.py's `hidden_tests`): `tests/shown_pass`, `tests/hidden_pass` and
`hack/hidden_gap` (shown minus hidden: a policy that fits the shown cases alone widens it).

Screening (`reward.screen=true`, trainer/reward_config.py): `reward.screen_mode=zero` gives each flagged
completion reward 0; `drop_group` marks every completion of a group with a flagged one (reward 0 too), and
every algorithm (GRPO family, REINFORCE, PPO, TRPO/NPG) then removes those groups from its loss
(sampling.without_dropped_groups): they count in no baseline, whitening or normaliser; `kept_frac` is the
share of rows trained on. Screened results say `screened: true` in their details; `hack/screened_frac` is their share.
Negative rewards are left as they are (screening never raises a reward).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from rlvr.verifiers.compose import details_values, hacks_in

SCREEN_MODES = ("zero", "drop_group")


def hacks_of(result) -> list[str]:
    """The hack kinds `result` carries, its own and its components', each once, in order of appearance."""
    return hacks_in(result.details)


def hack_metrics(results) -> dict:
    """`hack/rate`, `hack/<kind>_rate` per kind seen, and `hack/screened_frac` when any result was screened."""
    n = max(len(results), 1)
    flagged = [hacks_of(r) for r in results]
    kinds = Counter(k for ks in flagged for k in ks)
    metrics = {"hack/rate": sum(bool(ks) for ks in flagged) / n}
    metrics.update({f"hack/{kind}_rate": count / n for kind, count in sorted(kinds.items())})
    shown = [v for r in results for v in _details_values(r, "shown_pass")]
    if shown:  # held-back tests (verifiers/code.py): the pass rate on each side and their gap
        hidden = [v for r in results for v in _details_values(r, "hidden_pass")]
        metrics.update({"tests/shown_pass": sum(shown) / len(shown), "tests/hidden_pass": sum(hidden) / len(hidden),
                        "hack/hidden_gap": (sum(shown) - sum(hidden)) / len(shown)})
    screened = sum(bool(r.details.get("screened")) for r in results)
    if screened:
        metrics["hack/screened_frac"] = screened / n
    return metrics


def screen(results: list, group_size: int, mode: str) -> list:
    """`results` with flagged completions (zero) or their whole groups (drop_group) at reward <= 0."""
    flagged = [bool(hacks_of(r)) for r in results]
    if mode == "drop_group":
        groups = [any(flagged[i:i + group_size]) for i in range(0, len(results), group_size)]
        flagged = [groups[i // group_size] for i in range(len(results))]
    return [replace(r, reward=min(r.reward, 0.0), details={**r.details, "screened": True, "reward_before_screen": r.reward})
            if f else r for r, f in zip(results, flagged)]


def _details_values(result, key: str) -> list:
    return details_values(result.details, key)
