"""GRPO's update (forward + backward over micro-batches) with `train.max_tokens_per_micro_batch` vs
fixed-size micro-batches, on a batch with a realistic length mix (long and short completions together).

One process, one torch thread. A random-initialised Qwen2 (hidden 128, 2 layers, vocabulary 2,048) and
a packed batch of `--rows` rows: 32-token prompts, completions whose lengths are drawn log-uniformly
from [--min-completion, --max-completion] (most short, a few long, as an RL batch's are). The peer is
`micro_batch_size=--micro-batch-size` rows (rlvr's current setting); the budget setting gets the same
number of padded tokens per micro-batch on average (`--micro-batch-size` x the mean row length), so
each forward holds about as much. Per setting: padded tokens the model computes (rows x longest row,
summed over micro-batches), the median seconds of `grpo.accumulate_gradients` over `--repeats`, the
loss and the gradient norm (the same numbers: tests/trainer/algos/test_token_budget.py checks them to 1e-6).
`packed`: `train.pack_sequences=true` at the same budget and at each of `--packed-budgets`: each micro-batch's
rows run as one row (trainer/models/packing.py), so no padding is computed, but the attention of a packed
row of T tokens spans T x T positions (masked to the block diagonal by the kernel, not skipped, on CPU sdpa).

    python bench/bench_token_budget.py [--packed-budgets 512,4096]
"""

from __future__ import annotations

import argparse
import random

import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--min-completion", type=int, default=16)
    parser.add_argument("--max-completion", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--packed-budgets", default="512,4096",
                        help="token budgets to pack at, besides the token_budget setting's own")
    args = parser.parse_args()
    load_before = common.load_average()
    print(common.machine_line())

    import math
    from types import SimpleNamespace

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlvr.trainer.algos.grpo import accumulate_gradients
    from rlvr.trainer.algos.update import batch_counts
    from rlvr.trainer.models.logprobs import pack

    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = random.Random(0)
    config = Qwen2Config(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32 + args.max_completion)
    model = Qwen2ForCausalLM(config)
    lengths = [round(math.exp(rng.uniform(math.log(args.min_completion), math.log(args.max_completion))))
               for _ in range(args.rows)]
    prompts = [[rng.randrange(1, 2048) for _ in range(32)] for _ in range(args.rows)]
    completions = [[rng.randrange(1, 2048) for _ in range(n)] for n in lengths]
    batch = pack(prompts, completions, pad_id=0)
    advantages = torch.randn(args.rows, generator=torch.Generator().manual_seed(1))
    algo = SimpleNamespace(beta=0.0, kl_estimator="k3", clip_eps_low=0.2, clip_eps_high=0.28, aggregation="token_mean",
                           importance_level="token")
    budget = args.micro_batch_size * round(float(batch.lengths().float().mean()))
    results, rows = {}, []
    settings = [("fixed", 0, False), ("token_budget", budget, False), ("packed", budget, True),
                *(("packed", int(b), True) for b in args.packed_budgets.split(",") if b)]
    for label, token_budget, packed in settings:
        name = f"{label} {token_budget}" if packed else label
        counts = batch_counts(len(batch), batch.completion_mask.sum(), args.micro_batch_size, batch.lengths(),
                              token_budget, pack=packed)
        width = batch.input_ids.shape[1]  # fixed micro-batches run at the whole batch's width; budgeted ones trim
        micros = [batch.select(counts.rows(i), trim=counts.trim) for i in range(counts.micro_batches)]
        # token positions the model computes: rows x width when padded, the rows' own tokens when packed
        padded = sum(int(micro.lengths().sum()) if packed else len(micro) * (micro.width or width) for micro in micros)

        def update():
            model.zero_grad(set_to_none=True)
            return accumulate_gradients(model, batch, advantages, None, None, algo,
                                        micro_batch_size=args.micro_batch_size, temperature=1.0,
                                        max_tokens=args.max_completion, token_budget=token_budget, pack=packed)

        seconds, samples = common.median_time(update, args.repeats)
        metrics = update()
        grad_norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
        results[name] = {"token_budget": token_budget, "packed": packed, "micro_batches": counts.micro_batches,
                         "padded_tokens": padded,
                         "seconds": seconds, "samples": samples, "loss": metrics["loss"], "grad_norm": grad_norm}
        print(f"{name}: {results[name]}", flush=True)
    fixed = results["fixed"]
    for name, r in results.items():
        rows.append([name, r["token_budget"] or f"- ({args.micro_batch_size} rows)", r["micro_batches"],
                     r["padded_tokens"], f"{r['padded_tokens'] / fixed['padded_tokens']:.2f}", f"{r['seconds']:.2f}",
                     f"{r['seconds'] / fixed['seconds']:.2f}", f"{r['loss']:.6f}", f"{r['grad_norm']:.6f}"])
    print(f"{args.rows} rows, completions {min(lengths)}-{max(lengths)} tokens (mean {sum(lengths) / len(lengths):.0f}), "
          f"{int(batch.lengths().sum())} real tokens, padded width {batch.input_ids.shape[1]}")
    print(common.table(["micro-batches by", "max_tokens_per_micro_batch", "micro-batches", "token positions computed",
                        "vs fixed", "update s (median)", "vs fixed", "loss", "grad norm"], rows))
    common.write_json("token_budget", {"settings": vars(args), "completion_lengths": lengths, "results": results},
                      load_before)


if __name__ == "__main__":
    main()
