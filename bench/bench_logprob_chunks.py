"""Peak memory of the policy's logprobs with and without `train.logprob_chunk_tokens`, on a 32k vocabulary.

Each setting runs in its own child process (`common.run_child`: that child's own peak RSS, via wait4):
a random-initialised 2-layer Qwen2 of hidden size 64 with a 32,000-token vocabulary builds a batch of
rows x (prompt + completion) random tokens and runs one forward + backward of `token_logprobs`
(with the entropy, as the GRPO step does) at the given chunk size; 0 is the plain computation, the
peer every other setting is compared with. The child also prints the loss and gradient norm, so the
table shows the settings compute the same numbers. The model is tiny so that the [tokens, vocab]
matrices dominate memory, as they do for a real vocabulary at long completions.

    python bench/bench_logprob_chunks.py                 # chunks 0 (plain), 1024, 256
    python bench/bench_logprob_chunks.py --chunks 0,512 --rows 8
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import common

VOCAB = 32_000


def child(chunk: int, rows: int, prompt: int, completion: int) -> None:
    import time

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlvr.trainer.models.logprobs import pack, token_logprobs

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=prompt + completion,
                         tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    ids = torch.randint(1, VOCAB, (rows, prompt + completion))
    batch = pack([r[:prompt].tolist() for r in ids], [r[prompt:].tolist() for r in ids], pad_id=0)
    start = time.perf_counter()
    logprobs, entropy = token_logprobs(model, batch, 1.0, with_entropy=True, chunk_tokens=chunk)
    loss = -(logprobs * batch.completion_mask).sum() / batch.completion_mask.sum()
    loss.backward()
    seconds = time.perf_counter() - start
    grad_norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
    print(json.dumps({"loss": loss.item(), "entropy": (entropy * batch.completion_mask).sum().item()
                      / batch.completion_mask.sum().item(), "grad_norm": grad_norm, "seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", default="0,1024,256")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--completion", type=int, default=240)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child, args.rows, args.prompt, args.completion)
    load_before = common.load_average()
    print(common.machine_line())
    results, rows = {}, []
    for chunk in (int(c) for c in args.chunks.split(",")):
        run = common.run_child([sys.executable, __file__, "--child", str(chunk), "--rows", str(args.rows),
                                "--prompt", str(args.prompt), "--completion", str(args.completion)],
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
        if run["returncode"] != 0:
            raise SystemExit(f"chunk {chunk}: {common.last_line(run)}")
        results[chunk] = {"peak_rss_mb": round(run["peak_rss_mb"]), **json.loads(run["stdout"].splitlines()[-1])}
        print(f"chunk {chunk}: {results[chunk]}", flush=True)
    plain = results.get(0)
    for chunk, r in results.items():
        rows.append([chunk or "0 (plain)", r["peak_rss_mb"], f"{r['peak_rss_mb'] / plain['peak_rss_mb']:.2f}" if plain else "-",
                     f"{r['seconds']:.2f}", f"{r['loss']:.6f}", f"{r['grad_norm']:.6f}"])
    tokens = args.rows * args.completion
    print(f"{args.rows} rows x ({args.prompt} prompt + {args.completion} completion) tokens = {tokens} completion "
          f"tokens; vocabulary {VOCAB}: one float32 [tokens, vocab] matrix is {tokens * VOCAB * 4 / 2**20:.0f} MB")
    print(common.table(["logprob_chunk_tokens", "child peak RSS (MB)", "vs plain", "forward+backward s", "loss",
                        "grad norm"], rows))
    common.write_json("logprob_chunks", {"settings": vars(args), "results": results}, load_before)


if __name__ == "__main__":
    main()
