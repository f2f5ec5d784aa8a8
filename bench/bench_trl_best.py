"""rlvr against TRL's `GRPOTrainer` with each at its default and each at its best, paired in one script.

    python bench/bench_trl_best.py [--rounds 3] [--steps 3] [--warmup 1] [--prompts 4] [--group 8]
                                   [--max-new-tokens 48] [--best "train=fast model.autocast=auto"] [--no-trl-vllm]
                                   [--systems rlvr,trl,rlvr-best,trl-bf16]
    python bench/bench_trl_best.py --generation [--rounds 3] [--steps 3]   # generation alone, see below

On SmolLM2-135M-Instruct (`make smollm2`; bench_grpo_trl.py's `--preset smollm2`: the instruct prompt of 2-digit
addition, temperature 0.7, lr 1e-5, beta 0), the same for every system: 4 prompts x 8 completions a step, at most 48
new tokens, the same prompt strings per step, the same reward (rlvr's `env.score` with the environment's
truncation rule; for TRL a reward function calling it), the whole batch in one micro-batch (32 rows), every core.
The systems and their settings:

- `rlvr`: rlvr's defaults: `model=smollm2` as it is, `rollout=vllm` (what `rollout=auto` resolves to where vLLM
  installs), float32.
- `rlvr-best`: the same plus `--best` (default `train=fast model.autocast=auto`: token-budget micro-batches, the
  same gradients; bf16 autocast where the CPU has bf16 units).
- `trl`: TRL's defaults on CPU: float32, HF `generate` (`use_cpu=True, bf16=False`).
- `trl-bf16`: TRL with `bf16=True` (its mixed precision: the forward under bf16 autocast), HF `generate`.
- `trl-vllm`: TRL with `bf16=True, use_vllm=True, vllm_mode="colocate"` and the installed vLLM. Tried once before
  the rounds; where it fails, its error is recorded verbatim (`trl_vllm_error` in the JSON) and it is left out.

Each system runs in its own subprocess (bench_grpo_trl.run_worker) for warm-up + steps + 1 steps; step time is
the wall time from one step's start to the next's, the first `--warmup` steps dropped, median over the rest.
Round r runs the systems in the order of SYSTEMS, reversed in odd rounds, so a drift in a shared machine's load
hits both sides of a pair. `uptime`'s load average is recorded before and after every subprocess. Per round:
rlvr / trl (defaults), rlvr-best / the faster of trl-bf16 and trl-vllm (best), rlvr / that best TRL (rlvr's
defaults against TRL's best); reported as the median and range over rounds. Writes bench/results/trl_best.json
after every round, so an interrupted run keeps the rounds it finished. Each rlvr step also records torch's thread
count at its start (`torch_threads`): vLLM logs "Reducing Torch threads from 2 to 1 for serving" as its engine
starts in the trainer's process.

`--generation` times generation alone at equal lengths (every completion exactly `--max-new-tokens`, EOS ignored),
same batch: HF `generate` against rlvr's vLLM engine as built and with OMP_NUM_THREADS=2 set (vLLM then leaves
torch's threads alone); writes bench/results/trl_best_generation.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import bench_grpo_trl as grpo
import common

SYSTEMS = ("rlvr", "trl", "rlvr-best", "trl-bf16")
TRL_SETTINGS = {"trl": {}, "trl-bf16": {"bf16": True},
                "trl-vllm": {"bf16": True, "use_vllm": True, "vllm_mode": "colocate"}}
RLVR_WORKERS = {"rlvr": "rlvr-vllm", "rlvr-best": "rlvr-vllm-best"}  # bench_grpo_trl's names for them
PASSED = (*grpo.WORKER_ARGS, "best")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_system(name: str, args, model_path: str) -> dict:
    """One subprocess of `name`: its median step (warm-up dropped), the load before and after, or its error."""
    before = uptime()
    started = time.time()
    raw, error = grpo.run_worker(name, args, model_path, script=__file__, passed=PASSED)
    row = {"system": name, "uptime_before": before, "uptime_after": uptime(), "wall_s": round(time.time() - started)}
    if error:
        return {**row, "error": error}
    summary = grpo.summarise(name, [raw], args.warmup)
    return {**row, "step_s": summary["step_s"], "step_s_median": summary["step_s_median"],
            "phases_s_median": grpo.phase_split(summary), "peak_rss_mb": raw["peak_rss_mb"],
            "completion_len_mean": summary["completion_len_mean"], "truncated_frac": summary["truncated_frac"],
            "reward_mean": summary["reward_mean"], "torch_threads": raw.get("torch_threads")}


def ratios(rounds: list[dict], trl_best: str) -> dict:
    """Per round, the paired ratios; with their median and range."""
    pairs = {"defaults: rlvr / trl": ("rlvr", "trl"), f"best: rlvr-best / {trl_best}": ("rlvr-best", trl_best),
             f"rlvr defaults / {trl_best}": ("rlvr", trl_best), f"{trl_best} / trl": (trl_best, "trl")}
    out = {}
    for label, (a, b) in pairs.items():
        values = [r[a]["step_s_median"] / r[b]["step_s_median"] for r in rounds
                  if "step_s_median" in r.get(a, {}) and "step_s_median" in r.get(b, {})]
        if values:
            out[label] = {"per_round": [round(v, 3) for v in values], "median": round(statistics.median(values), 3),
                          "min": round(min(values), 3), "max": round(max(values), 3)}
    return out


def report(results: dict) -> str:
    lines = [results["machine_line"], "", "| round | system | step s (median) | steps | load before -> after | "
             "peak RSS MB | completion tokens | generate s | update s |", "|---|---|---|---|---|---|---|---|---|"]
    for i, rnd in enumerate(results["rounds"], 1):
        for name, r in rnd.items():
            if "error" in r:
                lines.append(f"| {i} | {name} | failed: {r['error']} | | | | | | |")
                continue
            load = f"{r['uptime_before'].split('average:')[-1].strip()} -> {r['uptime_after'].split('average:')[-1].strip()}"
            p = r["phases_s_median"]
            update = sum(p.get(k, 0.0) for k in ("forward", "backward", "optimizer"))
            lines.append(f"| {i} | {name} | {r['step_s_median']:.2f} | {' / '.join(f'{s:.1f}' for s in r['step_s'])} "
                         f"| {load} | {r['peak_rss_mb']:.0f} | {r['completion_len_mean']:.1f} | "
                         f"{p.get('generate', 0.0):.2f} | {update:.2f} |")
    lines += ["", "| pair | per round | median | range |", "|---|---|---|---|"]
    for label, v in results["ratios"].items():
        lines.append(f"| {label} | {' / '.join(f'{x:.2f}' for x in v['per_round'])} | {v['median']:.2f}x | "
                     f"{v['min']:.2f}-{v['max']:.2f}x |")
    if results.get("trl_vllm_error"):
        lines += ["", f"trl-vllm failed: {results['trl_vllm_error']}"]
    return "\n".join(lines)


GENERATION = ("hf", "vllm", "vllm-omp2")  # --generation's variants, each in its own interpreter


def generation_worker(variant: str, args) -> dict:
    """Seconds of one batch (`--prompts` x `--group` completions, every one exactly `--max-new-tokens` long: EOS
    ignored) with HF `generate` on every core, or with rlvr's vLLM engine (`vllm`: as `rollout=vllm` builds it;
    `vllm-omp2`: with OMP_NUM_THREADS=2 set before vLLM imports, which vLLM reads as "leave torch's threads as
    they are"); torch's thread count after the engine is built; 1 warm-up then `--steps` timed calls."""
    import os

    if variant == "vllm-omp2":
        os.environ["OMP_NUM_THREADS"] = "2"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.trainer.env_config import build_env
    from rlvr.trainer.rollout.prompts import render_prompts

    path = grpo.tiny_model_path(log=lambda *_: None, preset=grpo.preset_overrides(args))
    env = build_env(grpo.compose(grpo.preset_overrides(args)).env)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompts = render_prompts(tokenizer, env, env.rows("train", args.prompts, seed=args.seed))
    threads_before = torch.get_num_threads()
    if variant == "hf":
        tokenizer.padding_side = "left"
        batch = tokenizer(prompts, return_tensors="pt", padding=True)

        def generate() -> int:
            with torch.no_grad():
                out = model.generate(**batch, do_sample=True, temperature=args.temperature, top_k=0, top_p=1.0,
                                     max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens,
                                     num_return_sequences=args.group, pad_token_id=tokenizer.pad_token_id)
            return (out.shape[1] - batch["input_ids"].shape[1]) * out.shape[0]
    else:
        import vllm

        from rlvr.trainer.rollout.vllm import VLLMEngine

        engine = VLLMEngine(model, tokenizer, max_sequences=args.prompts * args.group,
                            max_row_tokens=512)
        params = vllm.SamplingParams(n=args.group, max_tokens=args.max_new_tokens, temperature=args.temperature,
                                     top_k=0, top_p=1.0, ignore_eos=True)

        def generate() -> int:
            outs = engine.llm.generate(prompts, params, use_tqdm=False)
            return sum(len(c.token_ids) for o in outs for c in o.outputs)

    generate()  # warm-up
    seconds, tokens = [], 0
    for _ in range(args.steps):
        start = time.perf_counter()
        tokens = generate()
        seconds.append(time.perf_counter() - start)
    return {"variant": variant, "seconds": seconds, "tokens": tokens, "torch_threads_before": threads_before,
            "torch_threads_after": torch.get_num_threads()}


def generation(args) -> None:
    """--generation: the variants of GENERATION in turn, `--rounds` times, order reversed in odd rounds."""
    import tempfile
    from pathlib import Path

    rows = []
    for round_ in range(args.rounds):
        for variant in GENERATION if round_ % 2 == 0 else GENERATION[::-1]:
            with tempfile.TemporaryDirectory() as tmp:
                result = Path(tmp) / "result.json"
                before = uptime()
                argv = [sys.executable, __file__, "--generation-worker", variant, "--result", str(result),
                        *(f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                          ("prompts", "group", "max_new_tokens", "temperature", "steps", "seed", "preset"))]
                child = common.run_child(argv)
                if child["returncode"] != 0 or not result.exists():
                    raise SystemExit(f"{variant}: {common.last_line(child)}")
                row = {**json.loads(result.read_text()), "round": round_ + 1, "uptime_before": before,
                       "uptime_after": uptime()}
            row["median_s"] = statistics.median(row["seconds"])
            rows.append(row)
            print(f"round {round_ + 1} {variant}: {row['median_s']:.2f} s for {row['tokens']} tokens, torch threads "
                  f"{row['torch_threads_before']} -> {row['torch_threads_after']}; {before} -> {row['uptime_after']}",
                  flush=True)
    common.write_json("trl_best_generation", {"machine_line": common.machine_line(), "args": vars(args),
                                              "rows": rows})
    for variant in GENERATION:
        per_round = [r["median_s"] for r in rows if r["variant"] == variant]
        vs_hf = [r["median_s"] / h["median_s"] for r, h in zip(
            [r for r in rows if r["variant"] == variant], [r for r in rows if r["variant"] == "hf"])]
        print(f"| {variant} | {' / '.join(f'{s:.2f}' for s in per_round)} | {statistics.median(vs_hf):.2f}x "
              f"({min(vs_hf):.2f}-{max(vs_hf):.2f}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="measured steps per subprocess")
    parser.add_argument("--warmup", type=int, default=1, help="steps dropped as warm-up")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default="smollm2", choices=sorted(grpo.PRESETS))
    parser.add_argument("--best", default="train=fast model.autocast=auto", help="rlvr-best's overrides")
    parser.add_argument("--no-trl-vllm", action="store_true", help="skip the trl-vllm try")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="a subset of SYSTEMS, in round 1's order")
    parser.add_argument("--generation", action="store_true",
                        help="instead: generation alone, HF generate against vLLM with and without OMP_NUM_THREADS=2")
    parser.add_argument("--generation-worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.generation_worker:
        from pathlib import Path

        Path(args.result).write_text(json.dumps(generation_worker(args.generation_worker, args)))
        return
    if args.generation:
        generation(args)
        return
    if args.worker:
        import torch
        from pathlib import Path

        if args.threads:
            torch.set_num_threads(args.threads)
        threads = []  # torch's thread count at each step's start: vLLM's engine may change it for the process
        if args.worker in TRL_SETTINGS:
            raw = grpo.worker_trl(args, TRL_SETTINGS[args.worker])
            threads.append(torch.get_num_threads())  # after its last step
        else:
            import rlvr.trainer.run as run

            def count_threads(step_fn):
                def counted(ctx, step):
                    threads.append(torch.get_num_threads())
                    return step_fn(ctx, step)
                return counted

            grpo.wrap_grpo_step(run, count_threads)  # worker_rlvr's timer wraps this one
            raw = grpo.worker_rlvr(args, RLVR_WORKERS[args.worker])
        raw["torch_threads"] = threads
        Path(args.result).write_text(json.dumps(raw))
        return

    load_before = common.load_average()
    model_path = grpo.tiny_model_path(preset=grpo.preset_overrides(args))
    results = {"machine_line": common.machine_line(), "args": vars(args), "model": model_path, "rounds": [],
               "ratios": {}, "trl_vllm_error": None}
    print(results["machine_line"], flush=True)
    systems = args.systems.split(",")
    if set(systems) - set(SYSTEMS):
        parser.error(f"--systems: unknown {sorted(set(systems) - set(SYSTEMS))}; choose from {', '.join(SYSTEMS)}")
    if not args.no_trl_vllm:
        tried = run_system("trl-vllm", args, model_path)
        print(f"trl-vllm try: {tried.get('error') or tried['step_s_median']}", flush=True)
        if "error" in tried:
            results["trl_vllm_error"] = tried["error"]
        else:
            systems.append("trl-vllm")
    for round_ in range(args.rounds):
        rnd = {}
        for name in systems if round_ % 2 == 0 else systems[::-1]:
            rnd[name] = run_system(name, args, model_path)
            r = rnd[name]
            print(f"round {round_ + 1} {name}: {r.get('error') or round(r['step_s_median'], 2)} s; "
                  f"{r['uptime_before']} -> {r['uptime_after']}", flush=True)
        results["rounds"].append(rnd)
        trl_options = [n for n in ("trl-bf16", "trl-vllm") if n in systems] or ["trl"]
        trl_best = min(trl_options, key=lambda n: statistics.median(
            r[n]["step_s_median"] for r in results["rounds"] if "step_s_median" in r.get(n, {})) if any(
            "step_s_median" in r.get(n, {}) for r in results["rounds"]) else float("inf"))
        results["ratios"] = ratios(results["rounds"], trl_best)
        common.write_json("trl_best", results, load_before)
    print(report(results))


if __name__ == "__main__":
    main()
