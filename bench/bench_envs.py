"""Each built-in environment from the tiny model: the quick-start command of docs/benchmarks/environments.md, timed, with what it learned.

    python bench/bench_envs.py [--envs arithmetic,countdown,...] [--cache DIR]
    python bench/bench_envs.py --envs math --append   # rerun one, keeping the others' records
    python bench/bench_envs.py --report          # the table of bench/results/envs.json, running nothing

For every environment this runs the command in COMMANDS exactly as docs/benchmarks/environments.md's table shows it
(`rlvr train env=NAME ...`, plus `rollout=hf` and an output directory), into an empty model cache (a fresh
temporary $RLVR_CACHE unless --cache is given), so the time includes building and warm-starting that
environment's tiny model, as a user's first run does. gsm8k, math and code_stdio read the procedural files
bench/env_samples.py writes (this machine cannot download the real sets). Then `rlvr eval` runs greedy on the
run's last checkpoint over the test split, for the share of completions cut at the length limit there.

Recorded per environment: wall seconds and CPU seconds of the whole process tree (`getrusage` of the
children: on a loaded machine the wall time grows and the CPU time does not; on an idle core they are about
equal, as runs use one thread), the warm start's outcome, held-out greedy accuracy before and after,
the training reward's first and last ten steps, and the truncated share in training and at `rlvr eval`.
Writes bench/results/envs.json after every environment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
import env_samples

# What that table shows, per environment (DATA: the env_samples files). The step counts keep each
# first run, warm start included, under 5 minutes of one core.
COMMANDS = {
    "arithmetic": [],
    "countdown": ["env=countdown", "train.steps=60"],
    # the default task, leg_counting, is out of the tiny model's reach (3% after 900 warm-start steps): a sum
    "reasoning_gym": ["env=reasoning_gym", "env.task=chain_sum", "+env.config.max_terms=2", "+env.config.max_digits=2",
                      "train.steps=60"],
    # checks every 50 steps instead of 25: its worked answers make each check and step costlier than arithmetic's
    "gsm8k": ["env=gsm8k", "DATA", "model.warm_start.eval_rows=100", "model.warm_start.eval_every=50",
              "train.steps=30"],
    "math": ["env=math", "DATA", "model.warm_start.eval_rows=100", "train.steps=40"],
    "code_stdio": ["env=code_stdio", "DATA", "model.warm_start.eval_rows=100", "train.steps=20"],
    # the tiny model cannot write HumanEval's functions: a check of the pipeline (a context that holds the
    # prompts, no warm start, 512-token completions scored in the sandbox), not a learning run
    "humaneval": ["env=humaneval", "model.arch.max_positions=1024", "model.warm_start.max_steps=0", "train.steps=5",
                  "train.prompts_per_step=4", "train.completions_per_prompt=4", "train.eval_prompts=16"],
}
RESULT = "envs"


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def warm_start_line(log: str) -> str:
    """The warm start's last progress line, or what it said when it stopped short (the cache hit says neither)."""
    lines = [line for line in log.splitlines() if line.startswith("warm start:")]
    stopped = [line for line in lines if "stopped at step" in line or "reached max_steps" in line]
    return (stopped or lines or ["(cached)"])[-1]


def run_env(name: str, workdir: Path, cache: Path) -> dict:
    out = workdir / name
    overrides = []
    for item in COMMANDS[name]:
        overrides += env_samples.overrides(workdir / "data", name) if item == "DATA" else [item]
    argv = [sys.executable, "-m", "rlvr", "train", *overrides, "rollout=hf", f"output_dir={out}"]
    env = {**os.environ, "RLVR_CACHE": str(cache)}
    cpu, began = cpu_children(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir)
    wall, cpu = time.perf_counter() - began, cpu_children() - cpu
    record = {"env": name, "command": " ".join(["rlvr train", *COMMANDS[name]]), "wall_s": round(wall, 1),
              "cpu_s": round(cpu, 1), "returncode": proc.returncode}
    if proc.returncode != 0:
        return {**record, "error": (proc.stderr or proc.stdout)[-2000:]}
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    train = [m for m in history if "reward/mean" in m]
    evals = [m for m in history if "eval/accuracy" in m]
    record.update(
        warm_start=warm_start_line(proc.stdout + proc.stderr), steps=summary["steps"],
        accuracy_before=summary["before"]["accuracy"], accuracy_after=summary["after"]["accuracy"],
        reward_first_10=summary["before"]["train_reward_first_10"],
        reward_last_10=summary["after"]["train_reward_last_10"],
        train_truncated=round(sum(m.get("truncated_frac", 0.0) for m in train) / len(train), 3),
        eval_truncated_after=evals[-1].get("eval/truncated_frac"), eval_prompts=summary["eval_prompts"],
        warnings=sorted({line.strip()[:240] for line in (proc.stdout + proc.stderr).splitlines()
                         if line.startswith("WARNING: ")}))
    record["rlvr_eval"] = eval_checkpoint(name, out, overrides, env, workdir)
    return record


def eval_checkpoint(name: str, run_dir: Path, overrides: list[str], env: dict, workdir: Path) -> dict:
    """`rlvr eval` greedy on the run's last checkpoint: pass@1 and the truncated share on the test split."""
    last = max((run_dir / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    env_keys = [o for o in overrides if o.startswith("env")]
    out = workdir / f"{name}-eval"
    argv = [sys.executable, "-m", "rlvr", "eval", f"model.name_or_path={last}", *env_keys, "temperature=0",
            "n_prompts=100", "rollout=hf", f"output_dir={out}"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-1000:]}
    results = json.loads((out / "results.json").read_text())
    row = results["results"][0] if isinstance(results, dict) and "results" in results else results[0]
    warnings = [line.strip()[:240] for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("WARNING: ")]
    return {"checkpoint": last.name, "pass@1": row.get("pass@1"), "truncated_frac": row.get("truncated_frac"),
            "warnings": warnings}


def report(records: list[dict]) -> str:
    rows = []
    for r in records:
        if "error" in r:
            rows.append([r["env"], f"`{r['command']}`", f"failed: {r['error'].strip().splitlines()[-1][:120]}",
                         "", "", "", ""])
            continue
        found = re.search(r"step (\d+)(?:/\d+)?.*?validation accuracy ([\d.]+%)", r["warm_start"])
        warm = (f"{found[1]} steps, {found[2]}" if found else
                "none (max_steps=0)" if "max_steps=0" in r["warm_start"] else r["warm_start"])
        ev = r["rlvr_eval"]
        rows.append([r["env"], f"`{r['command']}`", f"{r['wall_s'] / 60:.1f} / {r['cpu_s'] / 60:.1f}", warm,
                     f"{r['accuracy_before']:.1%} -> {r['accuracy_after']:.1%}",
                     f"{r['reward_first_10']:.3f} -> {r['reward_last_10']:.3f}",
                     f"{r['train_truncated']:.0%} / {ev.get('truncated_frac', float('nan')):.0%}"])
    return common.table(["env", "command", "first run, min: wall / CPU", "warm start: steps, validation accuracy",
                         "held-out greedy accuracy", "train reward, first -> last 10 steps",
                         "truncated: train / rlvr eval"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default=",".join(COMMANDS))
    parser.add_argument("--cache", type=Path, default=None, help="RLVR_CACHE to build into (default: a fresh one)")
    parser.add_argument("--report", action="store_true", help="print the table of the saved runs; run nothing")
    parser.add_argument("--append", action="store_true",
                        help="keep the environments already in bench/results/envs.json (a rerun replaces its own)")
    args = parser.parse_args()
    path = common.RESULTS / f"{RESULT}.json"
    if args.report:
        print(report(json.loads(path.read_text())["runs"]))
        return
    names = args.envs.split(",")
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        parser.error(f"unknown env(s) {unknown}; choose from {list(COMMANDS)}")
    load = common.load_average()
    kept = json.loads(path.read_text())["runs"] if args.append and path.exists() else []
    records = [r for r in kept if r["env"] not in names]
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp) / "cache"
        for name in names:
            print(f"== {name}: rlvr train {' '.join(COMMANDS[name])}", flush=True)
            records.append(run_env(name, Path(tmp), cache))
            print(report(records[-1:]).splitlines()[-1], flush=True)
            records.sort(key=lambda r: list(COMMANDS).index(r["env"]))
            common.write_json(RESULT, {"runs": records}, load)
    print(common.machine_line())
    print(report(records))


if __name__ == "__main__":
    main()
