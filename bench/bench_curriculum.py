"""Does a difficulty curriculum cut the zero-variance groups and raise held-out accuracy on `countdown`?

    python bench/bench_curriculum.py [--seeds 0,1,2] [--steps 200] [--jobs 1] [--cache DIR] [--model DIR]
                                     [--arms fixed,curriculum,...] [--eval-prompts 200] [--extra KEY=V ...]
                                     [--preset smollm2]
    python bench/bench_curriculum.py --report       # the table of bench/results/curriculum.json, running nothing

Per seed, runs of `rlvr train` with `COUNTDOWN` (GRPO on countdown, 3 numbers of 1..20 unless --extra sets
env.max_number=30 etc., from the tiny model's warm start on 3 numbers of 1..20), equal steps, same seed:
  fixed       every training prompt at the configured difficulty
  curriculum  `curriculum.enabled=true` (countdown's default ladder: numbers up to 2/3 and 5/6 of max_number, the
              configured task, 4 numbers; band [0.2, 0.8] unless --extra sets curriculum.*), starting from the very
              same warm-started model (`model.name_or_path` = the first run's cached tiny model)
  target_share     the curriculum with `curriculum.target_share=0.5`: half of every step's prompts from the
                   configured task whatever the level (with --model only, like the arms below)
  dynamic_sampling the fixed task with DAPO's dynamic sampling (all-equal groups dropped, up to 4 rounds refill)
  narrow_band      the curriculum with band [0.1, 0.3]: it climbs back up once a level's pass rate passes 0.3
  ops_ladder       the curriculum on countdown's first ladder (targets built from +; + -; + - *; all four; 4 numbers)
With `--model DIR` (a warm-started tiny model, e.g. a cached `RLVR_CACHE/tiny/KEY`) every run of every seed starts
from that one model, so the seeds vary the RL sampling only, and no warm start is built.

`--preset smollm2` asks the question of SmolLM2-135M-Instruct (`make smollm2`): `rlvr train model=smollm2` (its
instruct prompt, batch, lr, temperature, `rollout=auto`, every core) on 3-digit addition (`SMOLLM2_TASK`; the stock
model: 0% greedy, pass@8 4%), whose ladder is digits 1, 2, 3, 4 (the curriculum starts at 3 and steps down while
the pass rate is under the band). Every run starts from the stock model in `--cache` (default: RLVR_CACHE, where
the conversion is kept), so the arms of a seed differ only in the curriculum; `--steps 40 --eval-prompts 100`
are the preset's own length and held-out size.
The held-out eval is the same `--eval-prompts` test prompts (greedy) at the configured difficulty in every arm of a
seed. The table gives, per arm, mean and sample standard deviation over seeds of: the share of training groups whose
8 rewards were all equal (`reward/zero_var_frac`, mean over steps), the training pass rate (`status/correct`),
held-out accuracy before and after, and the curriculum's levels; then each arm paired by seed against fixed.
Writes bench/results/NAME.json after every run.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import common
from rlvr.trainer.models.cache import cache_root

RESULTS = common.RESULTS
COUNTDOWN = ["env=countdown", "rollout=hf"]
SMOLLM2_TASK = ["model=smollm2", "env.digits=3", "env.ops=[+]"]  # --preset smollm2: the stock model's hard sums
CURRICULUM = ["curriculum.enabled=true"]  # the defaults: band [0.2, 0.8], window 4; --extra curriculum.*=V changes them
# DAPO's dynamic sampling on the fixed task, GRPO otherwise unchanged: groups with all-equal rewards are dropped and
# up to 4 more rounds of 8 prompts refill the step (dapo.yaml's bound), so a step may sample up to 5x the prompts
DYNAMIC = ["algo.filter_zero_variance_groups=true", "algo.max_resample_rounds=4"]
OPS_LADDER = ['curriculum.levels=[{ops:["+"]},{ops:["+","-"]},{ops:["+","-","*"]},{ops:["+","-","*","/"]},'
              '{num_numbers:4}]']  # countdown's first default ladder: targets built from more and more operators
ARMS = {"fixed": [], "curriculum": CURRICULUM,
        "target_share": [*CURRICULUM, "curriculum.target_share=0.5"],  # half of every step from the target task
        "dynamic_sampling": DYNAMIC,
        "narrow_band": [*CURRICULUM, "curriculum.band=[0.1,0.3]"],  # climbs back once 30% pass at a level
        "ops_ladder": [*CURRICULUM, *OPS_LADDER]}


def run(arm: str, overrides: list[str], seed: int, workdir: Path, cache: Path, steps: int, extra: list[str],
        eval_prompts: int = 200, task: list[str] = COUNTDOWN) -> dict:
    child = common.rlvr_train([*task, f"train.eval_prompts={eval_prompts}", *extra, *ARMS[arm], *overrides,
                               f"train.steps={steps}",
                               f"train.save_every={steps}", f"train.eval_every={max(1, steps // 2)}", f"seed={seed}"],
                              workdir / f"{arm}-seed{seed}", cache, one_thread=task is COUNTDOWN)
    if "error" in child:
        return {"arm": arm, "seed": seed, "error": child["error"]}
    history = child["history"]
    evals = [m for m in history if "eval/accuracy" in m]
    trained = [m for m in history if "reward/mean" in m]
    return {"arm": arm, "seed": seed, "steps": steps, "run_s": child["run_s"],
            "zero_var": [m["reward/zero_var_frac"] for m in trained],
            "pass_rate": [m.get("status/correct", 0.0) for m in trained],
            "levels": [m["curriculum/level"] for m in trained if "curriculum/level" in m],
            "target_frac": [m["curriculum/target_frac"] for m in trained if "curriculum/target_frac" in m],
            "rounds": [m["dynamic_sampling/rounds"] for m in trained if "dynamic_sampling/rounds" in m],
            "kept_frac": [m["kept_frac"] for m in trained if "kept_frac" in m],
            "evals": [[m["step"], m["eval/accuracy"]] for m in evals],
            "accuracy_before": evals[0]["eval/accuracy"], "accuracy_after": evals[-1]["eval/accuracy"],
            "warm_start": child["warm_start"]}


def _levels(rows: list[dict]) -> str:
    if not any(r["levels"] for r in rows):
        return "-"
    return "; ".join(f"s{r['seed']}: {min(r['levels'])}-{max(r['levels'])}, last {r['levels'][-1]}" for r in rows)


def table(results: list[dict]) -> str:
    ok = [r for r in results if "error" not in r]
    lines = ["| arm | seeds | zero-variance groups % | train pass rate % | held-out accuracy % before | after "
             "| change (pts) | curriculum levels (min-max, last) |", "|---|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        rows = sorted((r for r in ok if r["arm"] == arm), key=lambda r: r["seed"])
        if not rows:
            continue
        zero = common.mean_sd([100 * statistics.mean(r["zero_var"]) for r in rows])
        passed = common.mean_sd([100 * statistics.mean(r["pass_rate"]) for r in rows])
        before, after = (common.mean_sd([100 * r[k] for r in rows]) for k in ("accuracy_before", "accuracy_after"))
        change = common.mean_sd([100 * (r["accuracy_after"] - r["accuracy_before"]) for r in rows])
        lines.append(f"| {arm} | {len(rows)} | {zero} | {passed} | {before} | {after} | {change} | {_levels(rows)} |")
    pairs = {(r["seed"], r["arm"]): r for r in ok}
    for arm in ARMS:
        seeds = sorted({s for s, a in pairs if a == arm and arm != "fixed" and (s, "fixed") in pairs})
        if not seeds:
            continue
        diff = [100 * (pairs[s, arm]["accuracy_after"] - pairs[s, "fixed"]["accuracy_after"]) for s in seeds]
        zero = [100 * (statistics.mean(pairs[s, arm]["zero_var"]) - statistics.mean(pairs[s, "fixed"]["zero_var"]))
                for s in seeds]
        lines.append(f"\nPaired by seed ({arm} - fixed, seeds {', '.join(map(str, seeds))}): held-out accuracy "
                     f"{common.mean_sd(diff)} pts ({', '.join(f'{d:+.1f}' for d in diff)}); zero-variance groups "
                     f"{common.mean_sd(zero)} pts ({', '.join(f'{d:+.1f}' for d in zero)})")
        if any(pairs[s, arm].get("target_frac") for s in seeds):
            share = [100 * statistics.mean(pairs[s, arm]["target_frac"]) for s in seeds]
            lines.append(f"  prompts from the target task: {', '.join(f'{x:.0f}%' for x in share)}")
        if any(pairs[s, arm].get("rounds") for s in seeds):
            rounds = [statistics.mean(pairs[s, arm]["rounds"]) for s in seeds]
            trained = [statistics.mean(k * n for k, n in zip(pairs[s, arm]["kept_frac"], pairs[s, arm]["rounds"]))
                       for s in seeds]  # kept_frac: the share of all the step's sampled groups trained on
            lines.append(f"  sampling rounds per step (1 = a plain step's prompts): "
                         f"{', '.join(f'{x:.2f}' for x in rounds)}; groups trained per step, per drawn batch: "
                         f"{', '.join(f'{x:.2f}' for x in trained)}")
    return "\n".join(lines) + common.failures(results)


def main() -> None:
    parser = common.arms_parser(__doc__, steps=200, pair="a fixed run, then its curriculum run")
    parser.add_argument("--arms", default=",".join(ARMS), help="with --model: the arms to run (e.g. curriculum)")
    parser.add_argument("--model", default=None, help="one warm-started model for every run (no warm starts)")
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for both arms (e.g. model.warm_start.*)")
    parser.add_argument("--eval-prompts", type=int, default=200, help="held-out test prompts (greedy), both arms")
    parser.add_argument("--name", default=None, help="results file bench/results/NAME.json (default: curriculum, "
                                                       "or curriculum_smollm2 with --preset smollm2)")
    parser.add_argument("--preset", default="tiny", choices=("tiny", "smollm2"),
                        help="smollm2: the stock SmolLM2 on 3-digit addition (the docstring says how)")
    args = parser.parse_args()
    task = SMOLLM2_TASK if args.preset == "smollm2" else COUNTDOWN
    args.name = args.name or ("curriculum_smollm2" if args.preset == "smollm2" else "curriculum")
    if args.preset == "smollm2":  # no warm start: every run from the stock model, converted once into the cache
        args.model = args.model or "smollm2"
        args.arms = args.arms if args.arms != ",".join(ARMS) else "fixed,curriculum"
        args.cache = args.cache or cache_root()
    path = RESULTS / f"{args.name}.json"
    if args.report:
        print(table(json.loads(path.read_text())["runs"]))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: list[dict] = []
    began, load_before = time.perf_counter(), common.load_average()

    def save(result: dict) -> None:
        results.append(result)
        if "error" in result:
            print(f"{result['arm']} seed {result['seed']}: FAILED {result['error'][-300:]}", flush=True)
        else:
            print(f"{result['arm']} seed {result['seed']}: zero-variance groups "
                  f"{100 * statistics.mean(result['zero_var']):.0f}%, held-out accuracy "
                  f"{100 * result['accuracy_before']:.1f}% -> {100 * result['accuracy_after']:.1f}%, levels "
                  f"{result['levels'][::10] or '-'} in {result['run_s']:.0f} s (load {os.getloadavg()[0]:.1f})",
                  flush=True)
        common.write_json(args.name, {"seeds": seeds, "steps": args.steps, "model": args.model,
                                      "config": [*task, f"train.eval_prompts={args.eval_prompts}", *args.extra],
                                      "arms": ARMS, "seconds": round(time.perf_counter() - began, 1),
                                      "runs": results}, load_before)

    def run_arm(arm, overrides, seed, workdir, cache):
        return run(arm, overrides, seed, workdir, cache, args.steps, args.extra, args.eval_prompts, task)

    if args.model:  # both arms of every seed from one model: the runs are independent
        with tempfile.TemporaryDirectory(prefix="bench_curriculum_") as tmp:
            cache = args.cache or Path(tmp) / "cache"
            jobs = [(arm, seed) for seed in seeds for arm in args.arms.split(",")]
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                for result in pool.map(lambda job: run_arm(job[0], [f"model.name_or_path={args.model}"], job[1],
                                                           Path(tmp), cache), jobs):
                    save(result)
    else:
        common.paired_arms(seeds, args.jobs, args.cache, "bench_curriculum_", run_arm, ("fixed", []),
                           ("curriculum", []), save)
    print(table(results))
    arms = len(args.arms.split(",")) if args.model else 2  # without --model: fixed, then curriculum
    print(f"{len(seeds)} seeds x {arms} arm(s), {args.steps} steps each, in {time.perf_counter() - began:.0f} s; "
          f"load average before {load_before}, at the end {common.load_average()}; {path}")


if __name__ == "__main__":
    main()
