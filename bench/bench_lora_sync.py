"""LoRA weight sync to vLLM: merged full weights (`rollout.vllm.lora_sync=merged`) vs the adapter alone (`adapter`).

    python bench/bench_lora_sync.py [--sizes 30m,250m] [--r 16] [--syncs 3] [--prompts 8] [--group 4]
                                    [--max-new-tokens 32] [--repeats 2] [--threads 1] [--profile]

One randomly initialised Qwen2-shaped policy per size (the 512-token tokenizer of the tiny model) with
rank-r adapters on every linear layer (peft "all-linear", alpha = 2r). Each arm starts its own
in-process vLLM engine (fp32) from what the training loop hands it (`for_engine`: the merged model, or
the peft model whose base the engine keeps), then, `--syncs` times, moves the adapters (as an update
would) and times one sync as the loop pays for it: `engine.sync_weights(for_engine(policy))`, which
for merged includes building the merged copy (deepcopy + W + alpha/r B A), and for adapter writing
the peft files and loading them under a new LoRARequest. Bytes per sync: the state dict pushed
(merged) or the adapter_model.safetensors written (adapter). Generation: completion tokens/s of
`engine.generate` (prompts x G, temperature 1, random init, so rows run to max tokens), best of
`--repeats` after a warm-up call: the base with the merged weights vs the base plus vLLM's LoRA
kernels. The last check: vLLM's logprobs after the last sync vs the trainer's (peft, fp32).
`--profile` prints where one generate with the adapter spends its time (cProfile, top functions by own time).
Both arms run one after the other in this process. Prints the table and writes
bench/results/lora_sync.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import common
from bench_rollout import SIZES, profile, tokens_per_s

SIZES = {**SIZES, "250m": dict(hidden_size=1024, num_layers=24, num_heads=16, num_kv_heads=2,
                               intermediate_size=2816, max_positions=256)}


def lora_policy(size: str, tokenizer, r: int):
    import peft

    from rlvr.trainer.models.tiny_model import build_model

    model = build_model(tokenizer, **SIZES[size], seed=0).eval()
    config = peft.LoraConfig(r=r, lora_alpha=2 * r, target_modules="all-linear", task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


def move_adapters(policy, seed: int) -> None:
    """An update's worth of change: every adapter weight moved (B leaves 0, so the adapter matters)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_" in name:
                p.add_(1e-2 * torch.randn(p.shape, generator=generator))


def logprob_diff(policy, rollout, tokenizer) -> float:
    from rlvr.trainer.models.logprobs import pack, token_logprobs

    batch = pack(rollout.prompt_ids, rollout.completion_ids, tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy, batch, 1.0)  # [N, L-1]
    return max((logprobs[i][batch.completion_mask[i].bool()] - lp).abs().max().item()
               for i, lp in enumerate(rollout.logprobs))


def run_arm(mode: str, policy, tokenizer, prompts, params, syncs: int, repeats: int, show_profile: bool) -> dict:
    from dataclasses import replace

    from rlvr.trainer.models.lora import for_engine
    from rlvr.trainer.rollout.vllm import VLLMEngine

    adapter = mode == "adapter"
    start = time.perf_counter()
    engine = VLLMEngine(for_engine(policy, True, adapter), tokenizer, seed=0)
    startup = time.perf_counter() - start
    sync_s, engine_s, sync_bytes = [], [], []
    for i in range(syncs):
        move_adapters(policy, seed=i)
        start = time.perf_counter()
        engine.sync_weights(for_engine(policy, True, adapter))
        sync_s.append(time.perf_counter() - start)
        engine_s.append(engine.last_sync_s)
        sync_bytes.append(engine.last_sync_bytes)
    rate, mean_len = tokens_per_s(engine, prompts, params, repeats)
    if show_profile and adapter:
        print(f"--- vLLM generate with the adapter\n{profile(engine, prompts, params, top=12)}")
    diff = logprob_diff(policy, engine.generate(prompts[:2], replace(params, n=2)), tokenizer)
    engine.shutdown()
    return {"startup_s": startup, "sync_s": statistics.median(sync_s), "sync_s_all": sync_s,
            "engine_sync_s": statistics.median(engine_s), "sync_bytes": statistics.median(sync_bytes),
            "tokens_per_s": rate, "mean_len": mean_len, "logprob_diff_max": diff}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="30m,250m")
    parser.add_argument("--r", type=int, default=16)
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = common.load_average()

    from rlvr.trainer.rollout.types import SamplingParams

    _, tokenizer, prompts = common.arithmetic_prompts(args.prompts)
    params = SamplingParams(n=args.group, max_new_tokens=args.max_new_tokens)
    print(common.machine_line())
    print(f"torch {args.threads} thread(s); LoRA r={args.r}, alpha={2 * args.r}, all-linear; median of {args.syncs} "
          f"syncs; generate {args.prompts} prompts x {args.group}, {args.max_new_tokens} tokens, best of "
          f"{args.repeats}")
    rows, results = [], []
    for size in args.sizes.split(","):
        policy = lora_policy(size, tokenizer, args.r)
        base_m = sum(p.numel() for n, p in policy.named_parameters() if "lora_" not in n) / 1e6
        adapter_m = sum(p.numel() for n, p in policy.named_parameters() if "lora_" in n) / 1e6
        arms = {mode: run_arm(mode, policy, tokenizer, prompts, params, args.syncs, args.repeats, args.profile)
                for mode in ("merged", "adapter")}
        merged, adapter = arms["merged"], arms["adapter"]
        results.append({"size": size, "base_params_m": base_m, "adapter_params_m": adapter_m, **arms})
        for mode, arm in arms.items():
            rows.append([size, f"{base_m:.1f}M + {adapter_m:.2f}M", mode, f"{arm['sync_s']:.3f}",
                         f"{arm['engine_sync_s']:.3f}", f"{arm['sync_bytes'] / 2**20:,.1f}",
                         f"{arm['tokens_per_s']:,.0f}", f"{arm['logprob_diff_max']:.1e}", f"{arm['startup_s']:.1f}"])
        rows.append([size, "", "merged / adapter", f"{merged['sync_s'] / adapter['sync_s']:.1f}x",
                     f"{merged['engine_sync_s'] / adapter['engine_sync_s']:.1f}x",
                     f"{merged['sync_bytes'] / adapter['sync_bytes']:.0f}x",
                     f"{merged['tokens_per_s'] / adapter['tokens_per_s']:.2f}x", "", ""])
        del policy
    print(common.table(["model", "params (base + adapter)", "sync", "sync s (loop)", "sync s (engine)",
                        "MiB per sync", "generate tokens/s", "max |logprob diff|", "start-up s"], rows))
    common.write_json("lora_sync", {"args": vars(args), "results": results}, load_before)


if __name__ == "__main__":  # vLLM V1 needs the guard
    main()
