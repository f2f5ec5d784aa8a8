"""Does the python tool help GRPO on `tool_multiply`? Tool vs no tool, same warm start, same budget, over seeds.

    python bench/bench_tools.py [--seeds 0,1,2] [--steps 40] [--jobs 1] [--cache DIR]
    python bench/bench_tools.py --report        # the table of bench/results/tools.json, running nothing

Per seed, two runs of `rlvr train` with `DEMO_TOOLS` (the `make demo-tools` config: 3-digit factors, the local
sandbox backend, at most 2 assistant turns; a warm start that calls the tool on 0.3 of its rows, teaches the call's
mechanics on every row and stops at 90% teacher-forced tool-transcript accuracy, docs/environments/multi-turn.md):
  tool     env.tools_enabled=true; `model=tiny` builds the seed's tool-use warm start (trainer/models/transcripts.py)
  no tool  env.tools_enabled=false (same prompt; every call answered "no tools available"), starting from the very
           same warm-started model (`model.name_or_path` = the tool run's cached tiny model), same steps and seed
The seed changes the tiny model's initialisation, its warm start and the RL run's sampling. Held-out greedy
accuracy is measured on the same test problems before and after, so the rise is paired per seed; the table
gives each arm's mean and sample standard deviation over seeds. Writes bench/results/tools.json after every
run and prints a markdown table.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import common

RESULTS = common.RESULTS
# keep in step with the Makefile's demo-tools target
DEMO_TOOLS = ["env=tool_multiply", "env.digits=3", "env.sandbox_backend=local", "env.max_turns=2",
              "env.reference_tool_fraction=0.3", "env.reference_tool_mechanics=true", "rollout=hf",
              "model.arch.hidden_size=64", "model.arch.num_layers=2", "model.arch.intermediate_size=192",
              "model.arch.max_positions=192", "model.warm_start.lr=3e-3", "model.warm_start.batch_size=16",
              "model.warm_start.stop_on=transcripts", "model.warm_start.target_accuracy=[0.9,1.0]",
              "model.warm_start.eval_rows=100", "optim.lr=3e-4", "train.eval_prompts=100", "train.eval_every=10"]


def run(arm: str, overrides: list[str], seed: int, workdir: Path, cache: Path, steps: int) -> dict:
    child = common.rlvr_train([*DEMO_TOOLS, *overrides, f"train.steps={steps}", f"train.save_every={steps}",
                               f"seed={seed}"], workdir / f"{arm.replace(' ', '_')}-seed{seed}", cache)
    if "error" in child:
        return {"arm": arm, "seed": seed, "error": child["error"]}
    history = child["history"]
    evals = [m for m in history if "eval/accuracy" in m]
    return {"arm": arm, "seed": seed, "steps": steps, "run_s": child["run_s"],
            "accuracy_curve": [[m["step"], m["eval/accuracy"]] for m in evals],
            "accuracy_before": evals[0]["eval/accuracy"], "accuracy_after": evals[-1]["eval/accuracy"],
            "tool_calls_curve": [[m["step"], m.get("tool_calls/mean")] for m in history if "tool_calls/mean" in m],
            "rewards": [m["reward/mean"] for m in history if "reward/mean" in m],
            "warm_start": child["warm_start"]}


def table(results: list[dict]) -> str:
    ok = [r for r in results if "error" not in r]
    lines = ["| arm | seeds | held-out accuracy before | after | rise (points) | per seed (before -> after) |",
             "|---|---|---|---|---|---|"]
    for arm in ("tool", "no tool"):
        rows = sorted((r for r in ok if r["arm"] == arm), key=lambda r: r["seed"])
        if not rows:
            continue
        cols = [[100 * r[k] for r in rows] for k in ("accuracy_before", "accuracy_after")]
        rise = [a - b for b, a in zip(*cols)]
        per = ", ".join(f"s{r['seed']}: {100 * r['accuracy_before']:.0f} -> {100 * r['accuracy_after']:.0f}" for r in rows)
        lines.append(f"| {arm} | {len(rows)} | {common.mean_sd(cols[0])} | {common.mean_sd(cols[1])} | {common.mean_sd(rise)} | {per} |")
    return "\n".join(lines) + common.failures(results)


def main() -> None:
    parser = common.arms_parser(__doc__, steps=40, pair="a tool run, then its no-tool run")
    args = parser.parse_args()
    path = RESULTS / "tools.json"
    if args.report:
        print(table(json.loads(path.read_text())["runs"]))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: list[dict] = []
    began = time.perf_counter()

    def save(result: dict) -> None:
        results.append(result)
        print(f"{result['arm']} seed {result['seed']}: " + (f"FAILED {result['error'][-300:]}" if "error" in result else
              f"{100 * result['accuracy_before']:.0f}% -> {100 * result['accuracy_after']:.0f}% in {result['run_s']:.0f} s"),
              flush=True)
        path.write_text(json.dumps({"seeds": seeds, "steps": args.steps, "config": DEMO_TOOLS, "load": os.getloadavg(),
                                    "seconds": round(time.perf_counter() - began, 1), "runs": results}, indent=2))

    common.paired_arms(seeds, args.jobs, args.cache, "bench_tools_",
                       lambda arm, overrides, seed, workdir, cache: run(arm, overrides, seed, workdir, cache, args.steps),
                       ("tool", ["env.tools_enabled=true"]), ("no tool", ["env.tools_enabled=false"]), save)
    print(table(results))
    print(f"{len(seeds)} seeds x 2 arms, {args.steps} steps each, in {time.perf_counter() - began:.0f} s; "
          f"load average at the end {os.getloadavg()[0]:.1f}; {path}")


if __name__ == "__main__":
    main()
