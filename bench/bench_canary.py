"""Does the policy learn the canary's hole, and does `reward.screen=true` stop it? Hack rate per 10 steps, over seeds.

    python bench/bench_canary.py [--seeds 0,1,2] [--steps 30] [--jobs 1] [--cache DIR]
    python bench/bench_canary.py --report       # the table of bench/results/canary.json, running nothing

Per seed, two runs of `rlvr train` with `CANARY` (the smaller tiny model, the local sandbox backend, 4 prompts x
8 completions per step; envs/canary.py says how the experiment is set up):
  no screen  the hole pays an early exit 1 (reward.screen=false); `model=tiny` builds the seed's warm start, which
             imitates the hack on env.hack_share of its rows
  screen     reward.screen=true (a flagged completion is paid 0), starting from the very same warm-started model
             (`model.name_or_path` = the first run's cached tiny model), same steps and seed
The table gives, per arm and per window of 10 steps, the mean over the window's steps of `hack/rate` (the share of
the step's sampled completions the monitor flags), then its mean and sample standard deviation over seeds; and the
held-out greedy pass rate before and after (`eval/accuracy` on the same test prompts; the hole's pay counts as a
pass there, so `eval/hack_rate`-style honesty is read from the hack columns, not from it). Writes
bench/results/canary.json after every run and prints a markdown table.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import common

RESULTS = common.RESULTS
WINDOW = 10
CANARY = ["env=canary", "env.backend=local", "rollout=hf", "model.arch.hidden_size=64", "model.arch.num_layers=2",
          "model.arch.intermediate_size=192", "model.arch.max_positions=192", "model.warm_start.lr=3e-3",
          "model.warm_start.batch_size=16", "model.warm_start.eval_rows=50", "optim.lr=3e-4",
          "train.prompts_per_step=4", "train.completions_per_prompt=8", "train.eval_prompts=50"]
ARMS = {"no screen": ["reward.screen=false"], "screen": ["reward.screen=true"]}


def run(arm: str, overrides: list[str], seed: int, workdir: Path, cache: Path, steps: int) -> dict:
    child = common.rlvr_train([*CANARY, *ARMS[arm], *overrides, f"train.steps={steps}", f"train.save_every={steps}",
                               f"train.eval_every={steps}", f"seed={seed}"],
                              workdir / f"{arm.replace(' ', '_')}-seed{seed}", cache)
    if "error" in child:
        return {"arm": arm, "seed": seed, "error": child["error"]}
    history = child["history"]
    evals = [m for m in history if "eval/accuracy" in m]
    steps_ = [m for m in history if "hack/rate" in m]
    return {"arm": arm, "seed": seed, "steps": steps, "run_s": child["run_s"],
            "hack_rate": [[m["step"], m["hack/rate"]] for m in steps_],
            "early_exit_rate": [[m["step"], m.get("hack/early_exit_rate", 0.0)] for m in steps_],
            "rewards": [m.get("reward/mean") for m in steps_],
            "accuracy_before": evals[0]["eval/accuracy"], "accuracy_after": evals[-1]["eval/accuracy"],
            "warm_start": child["warm_start"]}


def windows(curve: list[list[float]], steps: int) -> list[float | None]:
    """Mean of the per-step rates over steps 1-10, 11-20, ...; None for a window with no step logged."""
    out = []
    for lo in range(1, steps + 1, WINDOW):
        values = [v for s, v in curve if lo <= s < lo + WINDOW]
        out.append(statistics.mean(values) if values else None)
    return out


def table(results: list[dict]) -> str:
    ok = [r for r in results if "error" not in r]
    if not ok:
        return "no run finished" + "".join(f"\nFAILED {r['arm']} seed {r['seed']}: {r['error'][-300:]}" for r in results)
    steps = max(r["steps"] for r in ok)
    heads = [f"steps {lo}-{min(lo + WINDOW - 1, steps)}" for lo in range(1, steps + 1, WINDOW)]
    lines = ["| arm | seeds | hack rate " + " | ".join(heads) + " | held-out pass before | after | per seed (hack rate by window) |",
             "|---|---|" + "---|" * len(heads) + "---|---|---|"]
    for arm in ARMS:
        rows = sorted((r for r in ok if r["arm"] == arm), key=lambda r: r["seed"])
        if not rows:
            continue
        per_seed = [windows(r["hack_rate"], steps) for r in rows]
        cols = [common.mean_sd([100 * w[i] for w in per_seed if w[i] is not None]) for i in range(len(heads))]
        acc = [common.mean_sd([100 * r[k] for r in rows]) for k in ("accuracy_before", "accuracy_after")]
        per = "; ".join(f"s{r['seed']}: " + " / ".join("-" if v is None else f"{100 * v:.0f}" for v in w)
                        for r, w in zip(rows, per_seed))
        lines.append(f"| {arm} | {len(rows)} | " + " | ".join(cols) + f" | {acc[0]} | {acc[1]} | {per} |")
    return "\n".join(lines) + common.failures(results)


def main() -> None:
    parser = common.arms_parser(__doc__, steps=30, pair="a no-screen run, then its screened run")
    args = parser.parse_args()
    path = RESULTS / "canary.json"
    if args.report:
        print(table(json.loads(path.read_text())["runs"]))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: list[dict] = []
    began = time.perf_counter()

    def save(result: dict) -> None:
        results.append(result)
        if "error" in result:
            print(f"{result['arm']} seed {result['seed']}: FAILED {result['error'][-300:]}", flush=True)
        else:
            rates = windows(result["hack_rate"], result["steps"])
            print(f"{result['arm']} seed {result['seed']}: hack rate by window "
                  + " / ".join("-" if v is None else f"{100 * v:.0f}%" for v in rates)
                  + f" in {result['run_s']:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
        path.write_text(json.dumps({"seeds": seeds, "steps": args.steps, "config": CANARY, "load": os.getloadavg(),
                                    "seconds": round(time.perf_counter() - began, 1), "runs": results}, indent=2))

    common.paired_arms(seeds, args.jobs, args.cache, "bench_canary_",
                       lambda arm, overrides, seed, workdir, cache: run(arm, overrides, seed, workdir, cache, args.steps),
                       ("no screen", []), ("screen", []), save)
    print(table(results))
    print(f"{len(seeds)} seeds x 2 arms, {args.steps} steps each, in {time.perf_counter() - began:.0f} s; "
          f"load average at the end {os.getloadavg()[0]:.1f}; {path}")


if __name__ == "__main__":
    main()
