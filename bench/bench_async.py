"""Asynchronous rollouts: step rate and held-out accuracy with `rollout.max_staleness=k` against the
synchronous loop (k = 0), on the same warm start, seeds and steps.

    python bench/bench_async.py [--steps 30] [--seeds 0,1,2] [--ks 0,1] [--env arithmetic] [--eval-prompts 23]
                                [--server-ks 1] [--servers 1]

Each (k, seed) is its own `rlvr train` subprocess (GRPO, rollout=hf, threads=1, bench_algorithms.py's warm
start and task), run one after another so they do not compete for the cores. Steps per second are the
training loop's: `seconds_this_session` of summary.json (the held-out eval at the last step included,
the same in every run), over the steps. Idle fractions: with k > 0 the loop's `async/trainer_idle_frac`
and `async/engine_idle_frac`, averaged over steps; with k = 0 they follow from the step's timings (the
trainer idles while the engine generates and the verifier scores; the engine idles the rest of the step).
`--env code_stdio` needs the sandbox (`rlvr sandbox build`) and local data (`--extra env.data_dir=...`).

`--server-ks 1` adds, per seed, the server arm: `rollout=server` (`--servers` vLLM servers started by rlvr on
127.0.0.1, each on `server_threads=1`) with max_staleness=k, against the same colocated rollout=hf rows. The
servers' start-up (before the loop) is not in the step rate; their shutdown at the end of the loop is.

Writes bench/results/async.json (with the machine and the load average before and after) and prints a markdown table: per k, mean and spread (min..max) over seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

COMMON = [  # bench_algorithms.py's warm start and task, GRPO's preset (the engine is each arm's)
    "algo=grpo", "model.warm_start.target_accuracy=[0.3,0.6]", "model.warm_start.lr=3e-3",
    "model.warm_start.eval_every=10", "model.warm_start.eval_rows=50", "train.save_every=100000",
    "threads=1", "optim.lr=3e-4",
]
ENV = {"arithmetic": ["env=arithmetic", "env.digits=1", "rollout.max_new_tokens=10"], "code_stdio": ["env=code_stdio"]}


def run(env: str, k: int, seed: int, steps: int, eval_prompts: int, extra: list[str], workdir: Path,
        servers: int = 0) -> dict:
    engine = "server" if servers else "hf"
    out = workdir / f"{env}_{engine}_k{k}_s{seed}"
    arm = ["rollout=server", f"rollout.num_servers={servers}"] if servers else ["rollout=hf"]
    argv = [sys.executable, "-m", "rlvr", "train", *COMMON, *arm, *ENV[env], *extra, f"seed={seed}",
            f"rollout.max_staleness={k}", f"train.steps={steps}", f"train.eval_every={steps}",
            f"train.eval_prompts={eval_prompts}", f"output_dir={out}"]
    began, cpu_before = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=workdir)
    if proc.returncode != 0:
        raise RuntimeError(f"{env} {engine} k={k} seed={seed} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in history if "reward/mean" in m]
    if k:
        trainer_idle = statistics.mean(m["async/trainer_idle_frac"] for m in train)
        engine_idle = statistics.mean(m["async/engine_idle_frac"] for m in train)
        staleness = statistics.mean(m["async/staleness_mean"] for m in train)
    else:
        def step_s(m):
            return sum(v for name, v in m.items() if name.startswith("time/"))

        trainer_idle = statistics.mean((m.get("time/generate", 0) + m.get("time/score", 0)) / step_s(m) for m in train)
        engine_idle = statistics.mean(1 - m.get("time/generate", 0) / step_s(m) for m in train)
        staleness = 0.0
    return {"env": env, "engine": engine, "k": k, "seed": seed, "steps": steps,
            "loop_s": summary["seconds_this_session"],
            "steps_per_s": steps / summary["seconds_this_session"], "process_s": round(time.perf_counter() - began, 1),
            # CPU seconds over wall seconds of the whole process (set-up included): how many cores it kept busy. On
            # a loaded machine a process with two busy threads also gets a larger share of the cores than one with
            # one, so part of a speed-up measured under load is that share, not overlap alone.
            "cpu_per_wall": (_children_cpu_s() - cpu_before) / (time.perf_counter() - began),
            "accuracy_before": summary["before"]["accuracy"], "accuracy_after": summary["after"]["accuracy"],
            "trainer_idle_frac": trainer_idle, "engine_idle_frac": engine_idle, "staleness_mean": staleness}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.mean(values), fmt)} ({format(min(values), fmt)}..{format(max(values), fmt)})"


def table(rows: list[dict]) -> str:
    lines = ["| env | engine | k | seeds | steps/s | speed-up | held-out acc before -> after | trainer idle | "
             "engine idle | "
             "staleness | cores busy |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for env in dict.fromkeys(r["env"] for r in rows):
        def synchronous(r):  # the baseline: the synchronous colocated loop
            return r["env"] == env and r.get("engine", "hf") == "hf" and r["k"] == 0

        baseline = [r["steps_per_s"] for r in rows if synchronous(r)]
        base = statistics.mean(baseline) if baseline else None
        for engine, k in sorted({(r.get("engine", "hf"), r["k"]) for r in rows if r["env"] == env}):
            group = [r for r in rows if r["env"] == env and r.get("engine", "hf") == engine and r["k"] == k]
            rate = statistics.mean(r["steps_per_s"] for r in group)
            lines.append(
                f"| {env} | {engine} | {k} | {len(group)} | {spread([r['steps_per_s'] for r in group], '.2f')} | "
                f"{f'{rate / base:.2f}x' if base else '-'} | "
                f"{statistics.mean(r['accuracy_before'] for r in group):.1%} -> "
                f"{spread([r['accuracy_after'] for r in group], '.1%')} | "
                f"{spread([r['trainer_idle_frac'] for r in group], '.2f')} | "
                f"{spread([r['engine_idle_frac'] for r in group], '.2f')} | "
                f"{statistics.mean(r['staleness_mean'] for r in group):.2f} | "
                f"{spread([r['cpu_per_wall'] for r in group], '.2f')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--ks", default="0,1")
    parser.add_argument("--env", default="arithmetic", choices=sorted(ENV))
    parser.add_argument("--eval-prompts", type=int, default=23)  # all of one-digit arithmetic's test set
    parser.add_argument("--server-ks", default="", help="k values of the rollout=server arm (none by default)")
    parser.add_argument("--servers", type=int, default=1, help="vLLM servers the server arm starts")
    parser.add_argument("--extra", nargs="*", default=[], help="further rlvr train overrides for every run")
    args = parser.parse_args()
    seeds, ks = [int(s) for s in args.seeds.split(",")], [int(k) for k in args.ks.split(",") if k]
    server_ks = [int(k) for k in args.server_ks.split(",") if k]
    rows, load_before = [], common.load_average()
    print(common.machine_line(), f"load average before: {load_before}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_async_") as tmp:
        for seed in seeds:  # k alternates within a seed, so a change in the machine's load hits both alike
            arms = [(k, 0) for k in ks] + [(k, args.servers) for k in server_ks]
            for k, servers in arms:
                row = run(args.env, k, seed, args.steps, args.eval_prompts, args.extra, Path(tmp), servers)
                print(json.dumps(row), flush=True)
                rows.append(row)
    common.write_json("async", {"args": vars(args), "runs": rows}, load_before)
    print(f"load average after: {common.load_average()}")
    print(table(rows))


if __name__ == "__main__":
    main()
