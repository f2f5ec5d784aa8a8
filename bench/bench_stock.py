"""The stock SmolLM2-135M-Instruct on every built-in environment: the line every later claim is measured from.

    python bench/bench_stock.py [--envs arithmetic,humaneval,...] [--prompts 100] [--temperature 0.7]
    python bench/bench_stock.py --report      # the table of bench/results/stock_smollm2.json, running nothing

Per environment, two `rlvr eval` runs of `model.name_or_path=smollm2 model.kind=instruct rollout=vllm` (the
model `model=smollm2` trains, with its instruct prompts): greedy on `--prompts` test prompts (pass@1 with its
95% interval), then 8 samples per prompt on `--sample-prompts` test prompts at `--temperature` (0.7,
what `model=smollm2` trains at): pass@1, pass@8 and maj@8. pass@8 is what sharpening alone could reach: a task whose pass@8 is near zero gives GRPO's
groups nothing to reinforce. gsm8k and math read the procedural files bench/env_samples.py writes (this
machine cannot download the real sets; they are shaped like them, not as hard). HumanEval runs its 164
problems in the Docker sandbox. Needs `make smollm2`. Writes bench/results/stock_smollm2.json after every
environment, so an interrupted run keeps what it finished (`--append` reruns some and keeps the others).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
import env_samples

# label -> the eval overrides that pick the environment (DATA: the env_samples files for that env)
ENVS = {
    "arithmetic": ["env=arithmetic"],  # 2-digit sums, what model=smollm2 trains on
    "arithmetic 2-digit *": ["env=arithmetic", "env.ops=[*]"],
    "arithmetic 3-digit +": ["env=arithmetic", "env.digits=3", "env.ops=[+]"],
    "countdown": ["env=countdown"],
    "gsm8k (sample)": ["env=gsm8k", "DATA"],
    "math (sample)": ["env=math", "DATA"],
    "humaneval": ["env=humaneval", "n_prompts=164"],  # all of it, whatever --prompts says
    "reasoning_gym basic_arithmetic": ["env=reasoning_gym", "env.task=basic_arithmetic"],
    "reasoning_gym chain_sum": ["env=reasoning_gym", "env.task=chain_sum"],
    "reasoning_gym leg_counting": ["env=reasoning_gym", "env.task=leg_counting"],
    "guess_number": ["env=guess_number", "env.high=100", "n_prompts=23"],  # its 23 held-out secrets at 1..100
    "tool_multiply": ["env=tool_multiply"],
}
NAME = "stock_smollm2"
RESULTS = common.RESULTS / f"{NAME}.json"


def eval_once(label: str, overrides: list[str], out: Path, extra: list[str]) -> dict:
    """One `rlvr eval` run; its results.json row plus the wall seconds."""
    command = [sys.executable, "-m", "rlvr", "eval", "model.name_or_path=smollm2", "model.kind=instruct",
               "rollout=vllm", *overrides, *extra, f"output_dir={out}"]
    start = time.time()
    done = subprocess.run(command, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{label}: rlvr eval failed:\n{' '.join(command)}\n{done.stderr[-3000:]}")
    row = json.loads((out / "results.json").read_text())["results"][0]
    return {**row, "wall_s": round(time.time() - start, 1), "command": "rlvr eval " + " ".join(command[4:-1])}


def measure(label: str, workdir: Path, prompts: int, sample_prompts: int, temperature: float) -> dict:
    env = ENVS[label][0].removeprefix("env=")
    overrides = [o for item in ENVS[label] for o in (env_samples.overrides(workdir / "data", env) if item == "DATA" else [item])]
    fixed = any(o.startswith("n_prompts=") for o in overrides)
    stem = workdir / re.sub(r"[^A-Za-z0-9]+", "_", label.replace("*", "x").replace("+", "p"))
    greedy = eval_once(label, overrides, stem / "greedy", [] if fixed else [f"n_prompts={prompts}"])
    sampled = eval_once(label, overrides, stem / "sampled", ["n_samples=8", f"temperature={temperature}",
                                                             *([] if fixed else [f"n_prompts={sample_prompts}"])])
    print(f"{label}: greedy {greedy['pass@1']:.1%}, pass@8 {sampled['pass@k']['8']:.1%} "
          f"({greedy['wall_s'] + sampled['wall_s']:.0f} s)", flush=True)
    return {"env": label, "prompts": greedy["n_prompts"], "sample_prompts": sampled["n_prompts"], "greedy": greedy["pass@1"],
            "greedy_ci95": greedy["pass@1_ci95"], "greedy_truncated": greedy["truncated_frac"],
            "format": greedy["verifier_means"].get("format"), "temperature": temperature,
            "sampled_pass@1": sampled["pass@1"], "pass@8": sampled["pass@k"]["8"], "maj@8": sampled["maj@k"]["8"],
            "sampled_truncated": sampled["truncated_frac"], "tokens_p50": greedy["response_tokens"]["p50"],
            "wall_s": round(greedy["wall_s"] + sampled["wall_s"], 1), "command": greedy["command"]}


def report(results: dict) -> str:
    lines = [f"{results['machine_line']}", "",
             "| environment | greedy pass@1 [95% CI] (prompts) | greedy cut | pass@1 / pass@8 / maj@8 at T (prompts) | wall s |",
             "|---|---|---|---|---|"]
    for r in results["rows"]:
        lo, hi = r["greedy_ci95"]
        lines.append(f"| {r['env']} | {r['greedy']:.1%} [{lo:.1%}, {hi:.1%}] ({r['prompts']}) | "
                     f"{r['greedy_truncated']:.0%} | {r['sampled_pass@1']:.1%} / {r['pass@8']:.1%} / "
                     f"{r['maj@8']:.1%} at {r['temperature']} ({r.get('sample_prompts', r['prompts'])}) | "
                     f"{r['wall_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(ENVS), help="comma-separated labels of ENVS")
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--sample-prompts", type=int, default=50,
                        help="prompts of the 8-sample run (HumanEval: all 164 in both runs)")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--append", action="store_true", help="keep the other environments' rows")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(RESULTS.read_text())))
        return
    labels = [label.strip() for label in args.envs.split(",")]
    unknown = [label for label in labels if label not in ENVS]
    if unknown:
        raise SystemExit(f"--envs: unknown {unknown}; known: {list(ENVS)}")
    kept = json.loads(RESULTS.read_text())["rows"] if args.append and RESULTS.exists() else []
    rows = [r for r in kept if r["env"] not in labels]
    load_before, failed = common.load_average(), []
    results = {"machine_line": common.machine_line(), "rows": rows}
    with tempfile.TemporaryDirectory() as tmp:
        for label in labels:
            try:
                rows.append(measure(label, Path(tmp), args.prompts, args.sample_prompts, args.temperature))
            except RuntimeError as error:  # one environment's failure is its row's, never the others'
                print(error, flush=True)
                failed.append(label)
                continue
            results = {"machine_line": common.machine_line(), "rows": rows}
            common.write_json(NAME, results, load_before)
    print(report(results))
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
