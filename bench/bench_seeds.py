"""Does each algorithm's preset learn, over several seeds? Mean and spread of the held-out rise.

    python bench/bench_seeds.py [--seeds 0,1,2,3,4] [--algorithms grpo,ppo,...] [--jobs 2] [--at-steps 60,100]
    python bench/bench_seeds.py --report        # the tables of bench/results/seeds.json, running nothing

Every run is `rlvr train algo=NAME seed=S rollout=hf threads=1` and nothing else: the default tiny model and
its default warm start on the default `arithmetic` (2-digit addition, 200 held-out test problems), and the
algorithm's preset (conf/algo/NAME.yaml), for the default 200 steps (trpo and npg: their presets' 50 steps of 32 prompts). The
seed changes everything a user's seed changes: the tiny model's initialisation and warm start, and the RL run's sampling.
Held-out greedy accuracy is measured every 20 steps (10 for trpo and npg) on the same 200 test problems, so
the rise is paired per seed; the tables give its mean and sample standard deviation over the seeds, at the
end of the run, and at `--at-steps` for two steadier statistics (the mean of the held-out evaluations in
the second half of the first N steps, and the training reward's second half minus its first) with a 95%
prediction bound for one more seed: tests/trainer/algos/test_algorithms_learn.py runs those prefixes and takes its
margins from these bounds (a run's first N steps do not depend on how many follow, and the held-out
evaluations draw no random numbers).

Runs go `--jobs` at a time (one torch thread each). Each seed's first run builds that seed's warm start into
one shared $RLVR_CACHE (a fresh temporary one unless --cache is given); the seed's other runs start after it.
Writes bench/results/seeds.json after every run (nothing is lost to a kill; --append keeps earlier runs) and
prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# held-out evaluations every 20 steps cost about 3 s each and give the curve the tests' margins are read from
COMMON = ["rollout=hf", "threads=1", "train.save_every=100000", "train.eval_every=20"]
# trpo and npg: their presets run 50 steps of 256 completions (conf/algo/trpo.yaml, npg.yaml), evaluated every 10
EXTRA = {"trpo": ["train.eval_every=10"], "npg": ["train.eval_every=10"]}
ALGORITHMS = ["reinforce", "npg", "trpo", "ppo", "grpo", "dr_grpo", "dapo", "gspo", "dpo"]


def run(name: str, overrides: list[str], seed: int, workdir: Path, cache: Path) -> dict:
    out = workdir / f"{name}-seed{seed}"
    argv = [sys.executable, "-m", "rlvr", "train", *overrides, f"seed={seed}", f"output_dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RLVR_CACHE": str(cache)}
    began = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir)
    if proc.returncode != 0:
        return {"name": name, "seed": seed, "error": proc.stderr[-2000:]}
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [m for m in history if "eval/accuracy" in m]
    return {"name": name, "seed": seed, "run_s": round(time.perf_counter() - began, 1),
            "rewards": [m["reward/mean"] for m in history if "reward/mean" in m],
            "accuracy_curve": [[m["step"], m["eval/accuracy"]] for m in evals],
            "accuracy_before": evals[0]["eval/accuracy"], "accuracy_after": evals[-1]["eval/accuracy"],
            "eval_prompts": json.loads((out / "summary.json").read_text())["eval_prompts"]}


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):+.3f} ± {sd:.3f}"


# Student's t, one-sided 95%, by degrees of freedom (n seeds: n - 1); past 10, 10's (a little conservative)
T_95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812}


def held_out_rise(run: dict, steps: int) -> float:
    """Mean held-out accuracy of the evaluations in the second half of the first `steps` steps, minus step 0's.
    One evaluation swings by up to 10-25 points between checkpoints 20 steps apart; the mean over the
    second half's evaluations does not."""
    curve = dict(run["accuracy_curve"])
    late = [acc for step, acc in curve.items() if steps / 2 < step <= steps]
    return statistics.mean(late) - curve[0]


def train_rise(run: dict, steps: int) -> float:
    """Mean training reward over the second half of the first `steps` steps minus that of the first half."""
    rewards = run["rewards"][:steps]
    return statistics.mean(rewards[steps // 2:]) - statistics.mean(rewards[:steps // 2])


def prediction_bound(values: list[float]) -> float:
    """One-sided 95% lower prediction bound for one more seed: mean - t * sd * sqrt(1 + 1/n)."""
    n = len(values)
    return statistics.mean(values) - T_95[min(n - 1, 10)] * statistics.stdev(values) * (1 + 1 / n) ** 0.5


def table(runs: list[dict], names: list[str], seeds: list[int]) -> str:
    """Held-out accuracy before and after each algorithm's whole run, over the seeds."""
    by = {(r["name"], r["seed"]): r for r in runs if "error" not in r}
    lines = ["| algorithm | steps | seeds | held-out accuracy before | after | rise, mean ± sd | rise per seed | s/run |",
             "|---|---|---|---|---|---|---|---|"]
    for name in names:
        got = [by[(name, s)] for s in seeds if (name, s) in by]
        if not got:
            continue
        rise = [r["accuracy_after"] - r["accuracy_before"] for r in got]
        lines.append(f"| {name} | {len(got[0]['rewards'])} | {len(got)} | "
                     f"{statistics.mean(r['accuracy_before'] for r in got):.1%} | "
                     f"{statistics.mean(r['accuracy_after'] for r in got):.1%} | {mean_sd(rise)} | "
                     f"{' '.join(f'{x:+.3f}' for x in rise)} | {statistics.mean(r['run_s'] for r in got):.0f} |")
    return "\n".join(lines)


def prefix_table(runs: list[dict], names: list[str], seeds: list[int], at_steps: list[int]) -> str:
    """Both statistics the learning tests may assert, after the first N steps, over the seeds."""
    by = {(r["name"], r["seed"]): r for r in runs if "error" not in r}
    lines = ["| algorithm | first N steps | statistic | mean ± sd | min | 95% bound for one more seed |",
             "|---|---|---|---|---|---|"]
    for name in names:
        got = [by[(name, s)] for s in seeds if (name, s) in by]
        for steps in [n for n in at_steps if got and all(len(r["rewards"]) >= n for r in got)]:
            for label, statistic in (("held-out, 2nd half", held_out_rise), ("train reward, 2nd - 1st half", train_rise)):
                values = [statistic(r, steps) for r in got]
                bound = prediction_bound(values) if len(values) > 2 else float("nan")
                lines.append(f"| {name} | {steps} | {label} | {mean_sd(values)} | {min(values):+.3f} | {bound:+.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--algorithms", default=None, help="comma-separated; default: all of " + ",".join(ALGORITHMS))
    parser.add_argument("--at-steps", default="60,80,100,120,200", help="also tabulate the rise after these steps")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one CPU thread each)")
    parser.add_argument("--cache", type=Path, default=None, help="RLVR_CACHE to build into and reuse")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=ALGO:KEY=V[,KEY=V]",
                        help="also run a candidate setting under its own label, e.g. gspo_lr5e-5=gspo:optim.lr=5e-5 "
                             "(name it in --algorithms to run it); repeatable")
    parser.add_argument("--report", action="store_true", help="print the tables of the saved runs; run nothing")
    parser.add_argument("--results", type=Path, default=RESULTS / "seeds.json",
                        help="the JSON file to write (and, with --report or --append, to read)")
    parser.add_argument("--append", action="store_true",
                        help="keep the runs already in bench/results/seeds.json (new runs replace the same ones)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    common, table_of = COMMON, {name: [f"algo={name}", *EXTRA.get(name, [])] for name in ALGORITHMS}
    for variant in args.variant:  # a preset with some keys changed, when tuning one
        label, _, setting = variant.partition("=")
        algo, _, overrides = setting.partition(":")
        if algo not in ALGORITHMS or not overrides:
            parser.error(f"--variant {variant!r}: expected LABEL=ALGO:KEY=V[,KEY=V] with ALGO one of {', '.join(ALGORITHMS)}")
        table_of[label] = table_of[algo] + overrides.split(",")
    names = args.algorithms.split(",") if args.algorithms else list(table_of)
    unknown = [n for n in names if n not in table_of]
    if unknown:
        parser.error(f"unknown algorithms {unknown}; choose from {', '.join(table_of)}")

    out_json = args.results
    out_json.parent.mkdir(parents=True, exist_ok=True)
    at_steps = [int(x) for x in args.at_steps.split(",")]
    if args.report:
        saved = json.loads(out_json.read_text())["results"]
        names = [n for n in dict.fromkeys(r["name"] for r in saved) if n in names]
        print(f"{table(saved, names, seeds)}\n\n{prefix_table(saved, names, seeds, at_steps)}")
        return
    earlier = json.loads(out_json.read_text())["results"] if args.append and out_json.exists() else []
    runs = run_all(names, seeds, common, table_of, args, out_json, earlier)
    errors = [r for r in runs if "error" in r]
    if args.append:
        names = list(dict.fromkeys([r["name"] for r in earlier] + names))
        runs = [r for r in earlier if (r["name"], r["seed"]) not in {(x["name"], x["seed"]) for x in runs}] + runs
    print(f"\n{table(runs, names, seeds)}\n\n{prefix_table(runs, names, seeds, at_steps)}\n\n{len(runs)} runs "
          f"({len(errors)} failed); wrote {out_json}")


def run_all(names, seeds, common, table_of, args, out_json, earlier) -> list[dict]:
    runs: list[dict] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp) / "cache"
        total = len(seeds) * len(names)

        def record(result: dict) -> None:
            runs.append(result)
            done = len(runs)
            elapsed = time.perf_counter() - began
            eta = elapsed / done * (total - done)
            note = (f"error: {result['error'][-300:]}" if "error" in result else
                    f"{result['run_s']:.0f} s, held-out {result['accuracy_before']:.1%} -> "
                    f"{result['accuracy_after']:.1%}, mean train reward "
                    f"{sum(result['rewards']) / max(1, len(result['rewards'])):.3f}")
            print(f"[{done}/{total} {elapsed / 60:.1f} min, ETA {eta / 60:.1f} min] {result['name']} "
                  f"seed {result['seed']}: {note}", flush=True)
            mine = {(r["name"], r["seed"]) for r in runs}
            kept = [r for r in earlier if (r["name"], r["seed"]) not in mine]
            out_json.write_text(json.dumps({"command": "python bench/bench_seeds.py " + " ".join(sys.argv[1:]),
                                            "common": common, "runs": table_of, "seeds": seeds,
                                            "load_average": os.getloadavg(), "results": kept + runs}, indent=1))

        with ThreadPoolExecutor(args.jobs) as pool:
            # each seed's first run builds its warm start; the seed's other runs start after it
            firsts = {seed: pool.submit(run, names[0], common + table_of[names[0]], seed, Path(tmp), cache)
                      for seed in seeds}
            rest = []
            for seed in seeds:
                record(firsts[seed].result())
                rest += [pool.submit(run, name, common + table_of[name], seed, Path(tmp), cache)
                         for name in names[1:]]
            for future in rest:
                record(future.result())
    return runs


if __name__ == "__main__":
    main()
