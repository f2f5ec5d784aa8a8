"""The metrics every step logs and the completions it shows, and the timer of its phases.

A step logs, in this order: `step`, the reward metrics of its first round (`reward/*`: mean, std, the share of
groups whose rewards are all equal, each verifier's mean, the true reward under a control; `status/*`), the hack
monitor's (`hack/*`, `tests/*`), the algorithm's update metrics, the completions' lengths and truncation (and a
multi-turn environment's trajectory metrics), what the batch kept (batch.py), then `lr`, `tokens_per_s` and
`time/<phase>`. The first `train.logged_prompts_per_step` prompts go to samples.jsonl with their completions.

The hack monitor: a verifier names what a completion tried in `details["hacks"]` (verifiers' code signatures
for code, the math hedge check for math); inside a composite reward, in any component's details. Every step logs
`hack/rate` (the share of completions with any kind) and `hack/<kind>_rate` for each kind seen, and samples.jsonl
gives a flagged completion a `hacks` list. Held-back tests (the code verifier's `hidden_tests`):
`tests/shown_pass`, `tests/hidden_pass` and `hack/hidden_gap` (shown minus hidden: a policy that fits the shown
cases alone widens it). `hack/screened_frac` is the share that screening (rewards.py) zeroed.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

import torch

from rlvr.trainer.rollout.agent_loop import trajectory_metrics, trajectory_sample
from rlvr.verifiers.compose import details_values, hacks_in


def step_metrics_and_samples(ctx, step: int, sampled, timings: dict, update_metrics: dict,
                             batch_metrics: dict | None = None,
                             generated_tokens: int | None = None) -> tuple[dict, list[dict]]:
    """The metrics every algorithm logs (reward, statuses, lengths, throughput, timings), with the
    algorithm's `update_metrics` after the rewards and `batch_metrics` after the lengths, and
    the first `train.logged_prompts_per_step` prompts' completions. Throughput counts `generated_tokens`
    (default: `sampled`'s; more when the step sampled further rounds than the one it reports)."""
    cfg, rollout, results = ctx.cfg, sampled.rollout, sampled.results
    group_size = cfg.train.completions_per_prompt
    metrics = {"step": step, **reward_metrics(sampled.rewards, results), **hack_metrics(results), **update_metrics}
    sampled_ids = rollout.completion_ids if rollout.loss_mask is None else [  # multi-turn: the sampled tokens only
        [t for t, m in zip(c, mask) if m] for c, mask in zip(rollout.completion_ids, rollout.loss_mask)]
    lengths = torch.tensor([len(c) for c in sampled_ids], dtype=torch.float32)  # [B*G]
    metrics.update({
        "response_len/mean": lengths.mean().item(),
        "truncated_frac": sum(rollout.truncated) / len(rollout.truncated),
    })
    if rollout.trajectories is not None:
        metrics.update(trajectory_metrics(rollout.trajectories))
    metrics.update(batch_metrics or {})
    metrics.update({
        "lr": ctx.scheduler.get_last_lr()[0],
        "tokens_per_s": (generated_tokens or rollout.num_tokens) / max(sum(timings.values()), 1e-9),
        **{f"time/{name}": seconds for name, seconds in timings.items()},
    })
    rows = sampled.rows

    def completion(k: int) -> dict:
        logged = {"text": rollout.texts[k], **results[k].to_dict()}
        hacks = hacks_of(results[k])
        if hacks:  # the monitor's mark
            logged["hacks"] = hacks
        if rollout.trajectories is not None:  # multi-turn: each turn's text with its loss mask
            logged["trajectory"] = trajectory_sample(ctx.tokenizer, rollout.trajectories[k])
        return logged

    samples = [
        # no gold mapped (env=dataset whose reward reads another column): null, not a "" that reads as an empty
        # gold; the row's data columns, which a python reward reads, go with it (as `rlvr eval` writes them)
        {"step": step, "prompt": ctx.env.messages(rows[i]), "answer": rows[i].get("answer") or None,
         **({"columns": rows[i]["columns"]} if "columns" in rows[i] else {}),
         "completions": [completion(i * group_size + j) for j in range(group_size)]}
        for i in range(min(cfg.train.logged_prompts_per_step, len(rows)))
    ]
    return metrics, samples


def reward_metrics(rewards: torch.Tensor, results) -> dict:
    metrics = {"reward/mean": rewards.mean().item(), "reward/std": rewards.std().item(),
               # groups whose G rewards are all equal: zero advantage, no gradient (algos/advantages.py)
               "reward/zero_var_frac": (rewards == rewards[:, :1]).all(dim=1).float().mean().item()}
    components: dict[str, list[float]] = {}
    for result in results:
        for name, part in result.details.get("components", {}).items():
            components.setdefault(name, []).append(part["reward"])
    metrics.update({f"reward/{name}": sum(v) / len(v) for name, v in components.items()})
    true = [r.details["reward_true"] for r in results if "reward_true" in r.details]
    if true:  # a control reward (rewards.py): what the environment's verifiers gave
        metrics["reward/true_mean"] = sum(true) / len(true)
    statuses = Counter(r.status.value for r in results)
    metrics.update({f"status/{s}": c / len(results) for s, c in sorted(statuses.items())})
    return metrics


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
    shown = [v for r in results for v in details_values(r.details, "shown_pass")]
    if shown:  # held-back tests (the code verifier's): the pass rate on each side and their gap
        hidden = [v for r in results for v in details_values(r.details, "hidden_pass")]
        metrics.update({"tests/shown_pass": sum(shown) / len(shown), "tests/hidden_pass": sum(hidden) / len(hidden),
                        "hack/hidden_gap": (sum(shown) - sum(hidden)) / len(shown)})
    screened = sum(bool(r.details.get("screened")) for r in results)
    if screened:
        metrics["hack/screened_frac"] = screened / n
    return metrics


@contextmanager
def timed(timings: dict, name: str):
    start = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
