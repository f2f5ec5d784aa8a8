"""GRPO's update on SmolLM2-135M-Instruct: what each of rlvr's update settings does to its time and peak memory.

    python bench/bench_update.py [--prompts 8] [--group 8] [--min-completion 8] [--max-completion 48]
                                 [--repeats 3] [--threads 0] [--settings plain,packed,...]

One step's batch as `model=smollm2` trains it: `--prompts` instruct prompts of 2-digit addition (rendered with the
model's chat template, about 50 tokens) x `--group` completions of random tokens whose lengths are drawn
log-uniformly from [--min-completion, --max-completion] (seeded: every setting gets the same batch), random
advantages. Each setting runs in its own child process (its own peak RSS, via wait4), builds the policy the way
`rlvr train` does (trainer/models/model.py `build_policy`: LoRA adapters, gradient checkpointing) and times
rlvr's update: `accumulate_gradients` (forward + backward over the micro-batches) and `optimizer_step` (clip and
AdamW over the trainable parameters), one warm-up update and then the median of `--repeats`. The loss and gradient
norm of the first update (from the same weights in every setting) show which settings compute the same thing.

Settings (the overrides each adds to `model=smollm2`'s; the baseline is the preset as it is, micro-batches of 32 rows):
  plain         -
  micro8        train.micro_batch_size=8
  budget        train.max_tokens_per_micro_batch=2048 (micro-batches by tokens, each trimmed to its longest row)
  packed        the budget + train.pack_sequences=true (each micro-batch's rows as one row, no padding)
  chunked       train.logprob_chunk_tokens=512 (the 49k-vocabulary logits a chunk at a time)
  checkpointed  model.gradient_checkpointing=true
  lora          model.lora.r=16 (the optimizer holds the adapters alone)
  best          packed + chunked (the combination `train=fast` would be)
  bf16          model.autocast=bf16 (forwards under bf16 autocast; weights, gradients and AdamW in float32): not the
                same numbers, so its loss and gradient norm show how far it moves them
  budget_bf16   the budget + bf16 (`train=fast` with autocast)
Writes bench/results/update_smollm2.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys

import common

SETTINGS = {
    "plain": [],
    "micro8": ["train.micro_batch_size=8"],
    "budget": ["train.max_tokens_per_micro_batch=2048"],
    "packed": ["train.max_tokens_per_micro_batch=512", "train.pack_sequences=true"],
    "chunked": ["train.logprob_chunk_tokens=512"],
    "checkpointed": ["model.gradient_checkpointing=true"],
    "lora": ["model.lora.r=16"],
    "best": ["train.max_tokens_per_micro_batch=512", "train.pack_sequences=true", "train.logprob_chunk_tokens=512"],
    "bf16": ["model.autocast=bf16"],
    "budget_bf16": ["train.max_tokens_per_micro_batch=2048", "model.autocast=bf16"],
}


def batch_of(args, tokenizer, env):
    """The step's rows: rendered prompts x random completions of seeded lengths; and the advantages."""
    import torch
    from rlvr.trainer.models.logprobs import pack
    from rlvr.trainer.rollout.prompts import render_prompts

    rng = random.Random(0)
    rows = env.rows("train", args.prompts, seed=0)
    prompts = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in render_prompts(tokenizer, env, rows)]
    prompt_ids, completions = [], []
    for ids in prompts:
        for _ in range(args.group):
            length = round(math.exp(rng.uniform(math.log(args.min_completion), math.log(args.max_completion))))
            prompt_ids.append(ids)
            completions.append([rng.randrange(100, len(tokenizer)) for _ in range(length)])
    advantages = torch.randn(len(completions), generator=torch.Generator().manual_seed(1))
    return pack(prompt_ids, completions, pad_id=tokenizer.pad_token_id or 0), advantages


def child(args) -> None:
    import time

    import torch
    from bench_grpo_trl import compose
    from rlvr.trainer.algos.grpo import accumulate_gradients
    from rlvr.trainer.algos.update import optimizer_step
    from rlvr.trainer.env_config import build_env
    from rlvr.trainer.models.model import build_policy, load_tokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = compose(["model=smollm2", f"model.name_or_path={args.model}", *SETTINGS[args.child]])
    env = build_env(cfg.env)
    tokenizer = load_tokenizer(args.model, chat=True)
    batch, advantages = batch_of(args, tokenizer, env)
    model = build_policy(cfg.model, args.model, seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                                  weight_decay=cfg.optim.weight_decay)
    train, algo = cfg.train, cfg.algo
    seconds, first = [], None
    for _ in range(1 + args.repeats):
        start = time.perf_counter()
        metrics = accumulate_gradients(model, batch, advantages, None, None, algo,
                                       micro_batch_size=train.micro_batch_size, temperature=cfg.rollout.temperature,
                                       max_tokens=args.max_completion, chunk_tokens=train.logprob_chunk_tokens,
                                       token_budget=train.max_tokens_per_micro_batch, pack=train.pack_sequences)
        grad_norm = optimizer_step(optimizer, model, cfg.optim.max_grad_norm)
        seconds.append(time.perf_counter() - start)
        first = first or {"loss": metrics["loss"], "grad_norm": float(grad_norm)}
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(json.dumps({**first, "seconds": sorted(seconds[1:])[len(seconds[1:]) // 2], "all_seconds": seconds,
                      "trainable": trainable, "rows": len(batch), "tokens": int(batch.lengths().sum()),
                      "completion_tokens": int(batch.completion_mask.sum())}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--min-completion", type=int, default=8)
    parser.add_argument("--max-completion", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, every core)")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    unknown = set(args.settings.split(",")) - set(SETTINGS)
    if unknown:
        parser.error(f"--settings: unknown {sorted(unknown)}; choose from {', '.join(SETTINGS)}")
    from bench_grpo_trl import tiny_model_path

    load_before = common.load_average()
    args.model = tiny_model_path(preset=["model=smollm2"])
    print(common.machine_line())
    passed = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
              if k not in ("child", "settings") and v is not None]
    results = {}
    for name in args.settings.split(","):
        run = common.run_child([sys.executable, __file__, "--child", name, *passed], env=dict(os.environ))
        if run["returncode"] != 0:
            raise SystemExit(f"{name}: {common.last_line(run)}")
        results[name] = {"overrides": SETTINGS[name], "peak_rss_mb": round(run["peak_rss_mb"]),
                         **json.loads(run["stdout"].splitlines()[-1])}
        print(f"{name}: {results[name]}", flush=True)
    base = results.get("plain") or next(iter(results.values()))
    rows = [[name, " ".join(r["overrides"]) or "(model=smollm2 as it is)", f"{r['seconds']:.2f}",
             f"{r['seconds'] / base['seconds']:.2f}x", r["peak_rss_mb"], f"{r['peak_rss_mb'] / base['peak_rss_mb']:.2f}x",
             f"{r['trainable'] / 1e6:.2f}M", f"{r['loss']:.6f}", f"{r['grad_norm']:.6f}"] for name, r in results.items()]
    print(f"{base['rows']} rows, {base['tokens']} tokens ({base['completion_tokens']} completion tokens)")
    print(common.table(["setting", "overrides", "update s (median)", "vs plain", "peak RSS MB", "vs plain",
                        "trained params", "first loss", "first grad norm"], rows))
    common.write_json("update_smollm2", {"settings": vars(args), "results": results}, load_before)


if __name__ == "__main__":
    main()
