"""Scaling on CPU: peak memory of full fine-tuning vs LoRA vs gradient checkpointing, and GRPO step
time with 1 vs 2 processes (trainer.strategy=ddp).

    python bench/bench_scale.py [--sizes tiny,100m] [--steps 2] [--prompts 4] [--group 4] [--max-new-tokens 16]

Every measurement is a separate `rlvr train` child (GRPO, rollout=hf, `arithmetic` one-digit sums,
one torch thread per process), so its peak RSS (`wait4`, bench/common.py) is that run's alone,
interpreter and libraries included (about the same in every row: compare the differences).
Sizes: `tiny` is the default `model=tiny` architecture (0.8M parameters); `100m` is a ~104M-parameter
Qwen2 config (hidden 768, 12 layers, MLP 3072) on the same 512-token tokenizer, randomly initialised
and built here (nothing is downloaded): its completions run to max tokens, so every step does the
same work. Variants: `full` (all weights trained, AdamW state for all), `lora` (model.lora.r=16 on every
linear projection: only the adapters carry gradients and AdamW state), `ckpt`
(model.gradient_checkpointing=true). Step time: the mean over the steps after the first of the summed
per-phase times in metrics.jsonl (generate, score, update, sync; with 2 processes each phase is its
slowest rank's), for `full` with 1 process and with `torchrun --nproc_per_node 2 trainer.strategy=ddp`
at the same global batch. Writes bench/results/scale.json and prints the markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import common

SIZES = {
    "tiny": dict(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384, max_positions=256),
    "100m": dict(hidden_size=768, num_layers=12, num_heads=12, num_kv_heads=4, intermediate_size=3072,
                 max_positions=256),
}
VARIANTS = {"full": [], "lora": ["model.lora.r=16"], "ckpt": ["model.gradient_checkpointing=true"]}


def build(size: str, directory: Path) -> int:
    """Saves a randomly initialised model of `size` with the tiny tokenizer; returns its parameter count."""
    from rlvr.envs import load_env
    from rlvr.trainer.models.tiny_model import build_model, tokenizer_corpus, train_tokenizer

    tokenizer = train_tokenizer(tokenizer_corpus(load_env("arithmetic", digits=1, ops=["+"]), 500, 0), 512)
    model = build_model(tokenizer, **SIZES[size], seed=0)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def train_child(model_dir: Path, out: Path, extra: list[str], args, processes: int = 1) -> dict:
    overrides = ["algo=grpo", "rollout=hf", f"model.name_or_path={model_dir}", "env.digits=1", "env.ops=[+]",
                 f"train.steps={args.steps}", f"train.prompts_per_step={args.prompts}",
                 f"train.completions_per_prompt={args.group}", f"rollout.max_new_tokens={args.max_new_tokens}",
                 "train.eval_prompts=2", f"train.save_every={args.steps + 1}", "threads=1", f"output_dir={out}",
                 *extra]
    launcher = [sys.executable, "-m", "rlvr"] if processes == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
        "-m", "rlvr"]
    child = common.run_child([*launcher, "train", *overrides], env={**os.environ, "OMP_NUM_THREADS": "1"})
    if child["returncode"] != 0:
        raise SystemExit(f"{' '.join(extra)}: {common.last_line(child)}")
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][1:]
    step_s = [sum(v for k, v in m.items() if k.startswith("time/")) for m in steps[1:]]
    # a torchrun child's own RSS is its launcher's, not its workers': left out
    return {"peak_rss_mb": round(child["peak_rss_mb"]) if processes == 1 else None,
            "step_s": round(sum(step_s) / len(step_s), 3), "wall_s": round(child["seconds"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="tiny,100m")
    parser.add_argument("--steps", type=int, default=2)  # the first is a warm-up: step time is the second
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    args = parser.parse_args()
    load_before = common.load_average()
    print(common.machine_line())
    results, rows = {}, []
    with tempfile.TemporaryDirectory(prefix="rlvr-bench-scale-") as tmp:
        for size in args.sizes.split(","):
            model_dir = Path(tmp) / size
            parameters = build(size, model_dir)
            runs = {name: train_child(model_dir, Path(tmp) / f"{size}-{name}", extra, args)
                    for name, extra in VARIANTS.items()}
            runs["full_2proc"] = train_child(model_dir, Path(tmp) / f"{size}-2proc", ["trainer.strategy=ddp"], args,
                                             processes=2)
            results[size] = {"parameters": parameters, **runs}
            rows.append([size, f"{parameters / 1e6:.1f}M", *(runs[v]["peak_rss_mb"] for v in VARIANTS),
                         runs["full"]["step_s"], runs["lora"]["step_s"], runs["ckpt"]["step_s"],
                         runs["full_2proc"]["step_s"]])
            print(f"{size}: {runs}", flush=True)
    print(common.table(["model", "parameters", "peak RSS full (MB)", "LoRA r=16 (MB)", "grad. ckpt (MB)",
                        "step s full", "step s LoRA", "step s ckpt", "step s full, 2 processes (ddp)"], rows))
    common.write_json("scale", {"settings": vars(args), "results": results}, load_before)


if __name__ == "__main__":
    main()
