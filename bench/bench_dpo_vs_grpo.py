"""Online DPO next to GRPO on `arithmetic`: held-out greedy accuracy after the same training time, same start.

For each seed: both algorithms start from the same warm-started tiny model (one shared RLVR_CACHE; the
warm start is built by the first run), sample 8 prompts x 8 completions a step with Hugging Face
generate on one CPU thread, and are evaluated greedily on the same 23-problem test split before and
after. GRPO runs `--grpo-steps` steps; its training time is the sum of its steps' phase timings
(time/* in metrics.jsonl: generate, score, logprobs, update, sync; held-out evals and checkpoints are
not counted). DPO then runs 3x as many steps with the held-out eval every 3 steps, and its result is
the eval at the first step whose summed phase timings reach GRPO's seconds (greedy evaluation draws no
random numbers, so the extra evals do not change the run: 12 DPO steps with an eval after every step
logged the same rewards, to the last digit, as with an eval every 20 steps). Matching on measured
seconds keeps the budgets equal on a machine whose load changes; an earlier version chose DPO's step
count from a 10-step timing run and gave DPO 27-37% more seconds than GRPO.
Both use lr 3e-4; DPO beta 0.3 (tests/trainer/algos/test_dpo_train.py's setting).

    .venv/bin/python bench/bench_dpo_vs_grpo.py [--seeds 0 1] [--grpo-steps 60]

writes bench/results/dpo_vs_grpo.json and prints a Markdown table (docs/algorithms/dpo.md).
Training time depends on the machine's load: compare the two columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMON = ["rollout=hf", "env.digits=1", "model.warm_start.target_accuracy=[0.3,0.6]", "model.warm_start.lr=3e-3",
          "model.warm_start.eval_every=10", "model.warm_start.eval_rows=50", "train.save_every=100000",
          "train.eval_prompts=23", "rollout.max_new_tokens=10", "threads=1",
          "optim.lr=3e-4"]
ALGOS = {"grpo": ["algo=grpo"], "dpo": ["algo=dpo", "algo.beta=0.3"]}


def train(workdir: Path, name: str, overrides: list[str]) -> list[dict]:
    out = workdir / name
    env = {**os.environ, "RLVR_CACHE": str(workdir / "cache"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "rlvr", "train", *COMMON, *overrides, f"output_dir={out}"],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def at_budget(history: list[dict], budget: float | None) -> dict:
    """The run up to its first held-out eval at or past `budget` training seconds (None: the whole run)."""
    before = history[0]["eval/accuracy"]
    elapsed, rewards = 0.0, []
    for m in history[1:]:
        elapsed += sum(v for k, v in m.items() if k.startswith("time/"))
        rewards.append(m["reward/mean"])
        if "eval/accuracy" in m and (m is history[-1] or budget is not None and elapsed >= budget):
            return {"steps": m["step"], "train_seconds": round(elapsed, 1), "accuracy_before": before,
                    "accuracy_after": m["eval/accuracy"], "train_reward_first_10": sum(rewards[:10]) / len(rewards[:10]),
                    "train_reward_last_10": sum(rewards[-10:]) / len(rewards[-10:]),
                    "budget_reached": budget is None or elapsed >= budget}  # false: load changed a lot; rerun
    raise ValueError("no held-out eval in the run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--grpo-steps", type=int, default=60)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "dpo_vs_grpo.json")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            workdir = Path(tmp) / f"seed{seed}"
            grpo = at_budget(train(workdir, "grpo", [*ALGOS["grpo"], f"seed={seed}", "train.eval_every=100000",
                                                     f"train.steps={args.grpo_steps}"]), None)
            dpo = at_budget(train(workdir, "dpo", [*ALGOS["dpo"], f"seed={seed}", "train.eval_every=3",
                                                   f"train.steps={3 * args.grpo_steps}"]), grpo["train_seconds"])
            runs.append({"seed": seed, "grpo": grpo, "dpo": dpo})
            print(f"seed {seed}: grpo {grpo}\n        dpo  {dpo}", flush=True)
    result = {
        "task": "arithmetic, one-digit additions; held-out greedy accuracy on the 23-problem test split",
        "common_overrides": COMMON, "algo_overrides": ALGOS, "grpo_steps": args.grpo_steps,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(runs))


def table(runs: list[dict]) -> str:
    lines = ["| seed | algo | steps | train s | held-out acc. before | after | change |", "|---|---|---|---|---|---|---|"]
    for run in runs:
        for algo in ("grpo", "dpo"):
            r = run[algo]
            lines.append(f"| {run['seed']} | {algo} | {r['steps']} | {r['train_seconds']:.0f} | "
                         f"{r['accuracy_before']:.1%} | {r['accuracy_after']:.1%} | "
                         f"{100 * (r['accuracy_after'] - r['accuracy_before']):+.1f} pts"
                         f"{'' if r['budget_reached'] else ' (short of the budget)'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
