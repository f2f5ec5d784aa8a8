"""Rollout engines: generation tokens/s of vLLM vs Hugging Face `generate`, and GRPO step time with each.

    python bench/bench_rollout.py [--sizes tiny,30m] [--prompts 16] [--group 8] [--max-new-tokens 64]
                                  [--repeats 3] [--threads 1] [--grpo-steps 5] [--temperature 1.0]
                                  [--profile]

Both engines see the same model (fp32), prompts (`arithmetic`, one-digit sums), G and sampling
(temperature `--temperature`, default 1; no top-k/top-p), one after the other in this process. Workloads:
- fixed length: the randomly initialised model, whose rows almost never sample EOS, so they run to
  max tokens (the mean length is printed: it is what tokens/s counts);
- natural length: the same architecture after a short supervised warm start: it writes
  `<think></think><answer>N</answer>` and EOS, so completions are short and vary in length.
Sizes: `tiny` is the default `model=tiny` architecture (0.8M parameters); `30m` is a ~30M-parameter
Qwen2 config on the same 512-token tokenizer; `smollm2` is SmolLM2-135M-Instruct (`make smollm2`, fp32,
natural length only) on the arithmetic environment's instruct prompts. tokens/s = completion tokens / wall seconds of
`engine.generate`, best of `--repeats` after one warm-up call; the last column is vLLM with a seed
per prompt (`rollout.seed_per_prompt`, what training uses) against vLLM without. GRPO step time: `grpo_step` with
8 prompts x 8 completions, 16 tokens, on the warm-started model, mean over `--grpo-steps` after one
warm-up step, with its phases (generate, update, sync). `--profile` prints where one natural-length
generate spends its time (cProfile, top functions by own time). Prints the tables and writes
bench/results/rollout.json.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from dataclasses import replace

import torch

import common

SIZES = {
    "tiny": dict(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384, max_positions=256),
    "30m": dict(hidden_size=512, num_layers=10, num_heads=8, num_kv_heads=4, intermediate_size=1536, max_positions=256),
}


def build(size: str, tokenizer, env, warm: bool):
    from rlvr.trainer.models.tiny_model import build_model
    from rlvr.trainer.warm_start import warm_start

    model = build_model(tokenizer, **SIZES[size], seed=0)
    if warm:
        lr = 1e-2 if size == "tiny" else 1e-3
        warm_start(model, tokenizer, env, target_accuracy=[1.0, 1.0], max_steps=80, batch_size=16, lr=lr,
                   eval_every=80, eval_rows=8, max_new_tokens=16, seed=0, log=lambda *_: None)
    return model.eval()


def smollm2(prompts: int):
    """SmolLM2-135M-Instruct as `rlvr train model=smollm2` loads it, its tokenizer and `prompts` arithmetic prompts
    in the chat form the environment gives an instruct model. Returns (model, tokenizer, prompts)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bench_grpo_trl import compose, tiny_model_path
    from rlvr.trainer.env_config import build_env
    from rlvr.trainer.rollout.prompts import render_prompts

    path = tiny_model_path(log=lambda *_: None, preset=["model=smollm2"])
    env = build_env(compose(["model=smollm2"]).env)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, tokenizer, render_prompts(tokenizer, env, env.rows("train", prompts, seed=0))


def tokens_per_s(engine, prompts, params, repeats: int) -> tuple[float, float]:
    engine.generate(prompts, params)  # warm-up
    best, mean_len = 0.0, 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        rollout = engine.generate(prompts, params)
        seconds = time.perf_counter() - start
        best = max(best, rollout.num_tokens / seconds)
        mean_len = rollout.num_tokens / len(rollout.completion_ids)
    return best, mean_len


def profile(engine, prompts, params, top: int = 8) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    engine.generate(prompts, params)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def grpo_step_time(kind: str, model, tokenizer, env, steps: int) -> dict:
    from hydra import compose, initialize_config_module

    from rlvr.trainer.config import register_schemas
    from rlvr.trainer.algos.table import ALGORITHMS
    from rlvr.trainer.step import train_step
    from rlvr.trainer.rollout.factory import build_engine
    from rlvr.trainer.rollout.types import SamplingParams
    from rlvr.trainer.context import RunContext

    register_schemas()
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"rollout={kind}", "env.digits=1"])
    model = model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    engine = build_engine(kind, model, tokenizer, {"seed": 0})
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens)
    ctx = RunContext(cfg, env, tokenizer, model, None, engine, sampling, optimizer, scheduler)
    train_step(ctx, 0, ALGORITHMS["grpo"])  # warm-up
    rows = [train_step(ctx, step, ALGORITHMS["grpo"])[0] for step in range(1, steps + 1)]
    engine.shutdown()
    mean = lambda key: sum(m.get(key, 0.0) for m in rows) / len(rows)  # noqa: E731
    return {"step": sum(sum(v for k, v in m.items() if k.startswith("time/")) for m in rows) / len(rows),
            **{k: mean(f"time/{k}") for k in ("generate", "logprobs", "update", "sync")},
            "diff_max": max(m["rollout/logprob_diff_max"] for m in rows)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="tiny,30m")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--grpo-steps", type=int, default=5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = common.load_average()

    import vllm

    from rlvr.trainer.rollout.hf import HFEngine
    from rlvr.trainer.rollout.types import SamplingParams
    from rlvr.trainer.rollout.vllm import VLLMEngine

    arithmetic = common.arithmetic_prompts(args.prompts)  # (env, tokenizer, prompts) of the tiny and 30m sizes
    params = SamplingParams(n=args.group, max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    print(common.machine_line())
    print(f"torch {args.threads} thread(s), vllm {vllm.__version__}; batch {args.prompts} prompts x {args.group}, "
          f"{args.max_new_tokens} max tokens, temperature {args.temperature}")
    print("| model | params | workload | mean length | HF tokens/s | vLLM tokens/s | vLLM / HF "
          "| vLLM seeded per prompt (/ unseeded) |")
    print("|---|---|---|---|---|---|---|---|")
    grpo, generation = {}, []
    for size in args.sizes.split(","):
        pretrained = size == "smollm2"  # its own tokenizer and chat-form prompts; no random-init workload
        for workload, warm in (("natural length", True),) if pretrained else (("fixed length", False),
                                                                               ("natural length", True)):
            if pretrained:
                model, tokenizer, prompts = smollm2(args.prompts)
            else:
                env, tokenizer, prompts = arithmetic
                model = build(size, tokenizer, env, warm)
            params_m = sum(p.numel() for p in model.parameters()) / 1e6
            hf, hf_len = tokens_per_s(HFEngine(model, tokenizer), prompts, params, args.repeats)
            engine = VLLMEngine(model, tokenizer, seed=0)
            vl, vl_len = tokens_per_s(engine, prompts, params, args.repeats)
            # what training uses (rollout.seed_per_prompt): each prompt's G samples from a seed of its own
            seeded = replace(params, seeds=tuple(range(len(prompts))))
            vl_seeded, _ = tokens_per_s(engine, prompts, seeded, args.repeats)
            if args.profile and warm:
                print(f"--- vLLM generate, {size}, {workload}\n{profile(engine, prompts, params)}")
                print(f"--- HF generate, {size}, {workload}\n{profile(HFEngine(model, tokenizer), prompts, params)}")
            engine.shutdown()
            generation.append({"size": size, "params_m": params_m, "workload": workload, "hf_mean_len": hf_len,
                               "vllm_mean_len": vl_len, "hf_tokens_per_s": hf, "vllm_tokens_per_s": vl,
                               "vllm_over_hf": vl / hf, "vllm_seeded_tokens_per_s": vl_seeded,
                               "vllm_seeded_over_unseeded": vl_seeded / vl})
            print(f"| {size} | {params_m:.1f}M | {workload} | HF {hf_len:.1f}, vLLM {vl_len:.1f} | {hf:,.0f} | "
                  f"{vl:,.0f} | {vl / hf:.2f}x | {vl_seeded:,.0f} ({vl_seeded / vl:.2f}x) |", flush=True)
            if warm and args.grpo_steps and not pretrained:
                grpo[size] = {kind: grpo_step_time(kind, model, tokenizer, env, args.grpo_steps)
                              for kind in ("hf", "vllm")}
    if grpo:  # --grpo-steps 0 skips it (bench_grpo_trl.py times the step with both engines)
        print("\nGRPO step (8 prompts x 8 completions, 16 tokens, warm-started model), seconds:")
        print("| model | engine | step | generate | logprobs | update | sync | max logprob diff |")
        print("|---|---|---|---|---|---|---|---|")
    for size, kinds in grpo.items():
        for kind, t in kinds.items():
            print(f"| {size} | {kind} | {t['step']:.3f} | {t['generate']:.3f} | {t['logprobs']:.3f} | "
                  f"{t['update']:.3f} | {t['sync']:.4f} | {t['diff_max']:.1e} |")
    common.write_json("rollout", {"args": vars(args), "generation": generation, "grpo_step_s": grpo}, load_before)


if __name__ == "__main__":  # vLLM V1 needs the guard
    main()
