"""Every policy-gradient algorithm on `arithmetic` from the same warm start: reward curves and held-out accuracy.

    python bench/bench_algorithms.py [--steps 16] [--algorithms grpo,dr_grpo,...] [--eval-prompts 23]

Each algorithm runs as its own `rlvr train` subprocess (rollout=hf, threads=1) with the same seed, the
same number of steps and therefore the same prompts at every step (rows are drawn from the seed and the
step), from the same warm-started tiny model (one-digit addition, warm start stopped inside 30-60%
held-out accuracy, as tests/trainer/algos/test_algorithms_learn.py; built once and cached under $RLVR_CACHE).
Every algorithm uses its preset (conf/algo/*.yaml) and optim.lr=3e-4; the overrides below are the only
other differences, each with its reason. A frozen run (lr 1e-12) draws the same prompts, so its
reward curve is the warm start's own: an algorithm's rise is its reward minus the frozen reward,
step by step ("paired").

Reads each run's metrics.jsonl; writes bench/results/algorithms.json and bench/results/algorithms_reward.png
(training reward, moving average over `--smooth` steps, per algorithm; `--docs-plot` also copies it to
docs/algorithms_reward.png, the figure docs/algorithms.md shows) and prints the markdown table there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FIGURE = RESULTS / "algorithms_reward.png"
DOCS_FIGURE = ROOT / "docs" / "algorithms_reward.png"

COMMON = [  # tests/trainer/algos/test_algorithms_learn.py's warm start and task
    "rollout=hf", "env.digits=1", "model.warm_start.target_accuracy=[0.3,0.6]", "model.warm_start.lr=3e-3",
    "model.warm_start.eval_every=10", "model.warm_start.eval_rows=50", "train.save_every=100000",
    "rollout.max_new_tokens=10", "seed=0", "threads=1", "optim.lr=3e-4",
]
ALGORITHMS = {  # name -> overrides after COMMON; the first is the frozen reference
    "frozen": ["algo=reinforce", "optim.lr=1e-12"],
    "reinforce": ["algo=reinforce"],
    "ppo": ["algo=ppo"],
    "ppo-penalty": ["algo=ppo", "algo.objective=penalty"],
    "trpo": ["algo=trpo", "algo.cg_iters=5"],  # 5 CG iterations, not TRPO's 10: per-step time (see --help)
    "npg": ["algo=npg", "algo.cg_iters=5"],
    "grpo": ["algo=grpo"],
    "dr_grpo": ["algo=dr_grpo"],
    "dapo": ["algo=dapo", "algo.overlong_buffer=2"],  # L_cache = 0.2 x max_new_tokens 10 (dapo.yaml's rule)
    "gspo": ["algo=gspo"],
}


def run(name: str, overrides: list[str], steps: int, eval_prompts: int, workdir: Path) -> dict:
    out = workdir / name
    argv = [sys.executable, "-m", "rlvr", "train", *COMMON, *overrides, f"train.steps={steps}",
            f"train.eval_every={steps}", f"train.eval_prompts={eval_prompts}", f"output_dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    began = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in history if "reward/mean" in m]
    evals = [m for m in history if "eval/accuracy" in m]
    step_s = [sum(v for k, v in m.items() if k.startswith("time/")) for m in train]
    return {"overrides": overrides, "rewards": [m["reward/mean"] for m in train],
            "accuracy_before": evals[0]["eval/accuracy"], "accuracy_after": evals[-1]["eval/accuracy"],
            "step_s_mean": sum(step_s) / len(step_s), "run_s": round(seconds, 1)}


def moving_average(values: list[float], window: int) -> list[float]:
    return [sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1])
            for i in range(len(values))]


def table(results: dict, steps: int) -> str:
    frozen = results["frozen"]["rewards"]
    half = steps // 2
    lines = ["| algorithm | mean train reward | minus frozen, 2nd half | held-out accuracy before -> after | s/step |",
             "|---|---|---|---|---|"]
    for name, r in results.items():
        paired = [a - b for a, b in zip(r["rewards"], frozen)][half:]
        rise = "-" if name == "frozen" else f"{sum(paired) / len(paired):+.3f}"
        lines.append(f"| {name} | {sum(r['rewards']) / len(r['rewards']):.3f} | {rise} | "
                     f"{r['accuracy_before']:.1%} -> {r['accuracy_after']:.1%} | {r['step_s_mean']:.2f} |")
    return "\n".join(lines)


def plot(results: dict, smooth: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, r in results.items():
        steps = range(1, len(r["rewards"]) + 1)
        style = dict(color="black", linestyle="--", linewidth=1.5) if name == "frozen" else dict(linewidth=1.3)
        ax.plot(steps, moving_average(r["rewards"], smooth), label=name, **style)
    ax.set(xlabel="step (same prompts for every algorithm)", ylabel=f"train reward ({smooth}-step moving average)",
           title="arithmetic (1-digit addition), same warm start and seed")
    ax.legend(ncol=2, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16, help="the same for every algorithm")
    parser.add_argument("--eval-prompts", type=int, default=23,
                        help="held-out prompts, greedy, before and after (1-digit addition has 23 test problems)")
    parser.add_argument("--docs-plot", action="store_true", help="also copy the plot to docs/algorithms_reward.png")
    parser.add_argument("--smooth", type=int, default=5, help="moving-average window of the plotted reward")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated; frozen is always run")
    args = parser.parse_args()
    names = ["frozen"] + [n for n in args.algorithms.split(",") if n != "frozen"]
    unknown = [n for n in names if n not in ALGORITHMS]
    if unknown:
        parser.error(f"unknown algorithms {unknown}; choose from {', '.join(ALGORITHMS)}")

    results, began = {}, time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:  # the first run builds the warm start when $RLVR_CACHE does not hold it yet
            results[name] = run(name, ALGORITHMS[name], args.steps, args.eval_prompts, Path(tmp))
            r = results[name]
            print(f"{name}: {r['run_s']:.0f} s, mean reward {sum(r['rewards']) / len(r['rewards']):.3f}, "
                  f"accuracy {r['accuracy_before']:.1%} -> {r['accuracy_after']:.1%}", flush=True)
    total = time.perf_counter() - began
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {"command": "python bench/bench_algorithms.py " + " ".join(sys.argv[1:]), "common": COMMON,
              "steps": args.steps, "eval_prompts": args.eval_prompts, "total_s": round(total, 1),
              "load_average": os.getloadavg(), "algorithms": results}
    (RESULTS / "algorithms.json").write_text(json.dumps(record, indent=1))
    plot(results, args.smooth, FIGURE)
    if args.docs_plot:
        shutil.copyfile(FIGURE, DOCS_FIGURE)
    print(f"\n{table(results, args.steps)}\n\n{len(names)} runs of {args.steps} steps in {total:.0f} s; "
          f"wrote {RESULTS / 'algorithms.json'} and {FIGURE}")


if __name__ == "__main__":
    main()
