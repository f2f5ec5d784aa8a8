"""Learning efficiency: held-out accuracy on `arithmetic` after the same wall-clock budget, rlvr vs TRL.

    python bench/bench_learning.py [--budget-s 90] [--eval-every-s 15] [--eval-prompts 200]
                                   [--systems rlvr-hf,trl] (+ the batch arguments of bench_grpo_trl.py)
    python bench/bench_learning.py --preset smollm2 --systems rlvr-vllm,trl --prompts 4 --max-new-tokens 48 \
        --temperature 0.7 --lr 1e-5 --threads 0 --budget-s 600 --eval-every-s 150 --eval-prompts 100 --seed S

Both start from the same warm-started tiny model with the same hyperparameters and the same prompt
sequence (see bench_grpo_trl.py, whose helpers this reuses). Each trains in its own subprocess
until its training time reaches the budget; training time is wall time since its first step
minus the time spent in this benchmark's evaluations. At t=0, every `--eval-every-s` and at the
end, both are evaluated the same way: rlvr's `evaluate_greedy` (HF generate, greedy, in float32 even where
`--best` trains with `model.autocast=bf16`, as the saved weights compute) on the same `--eval-prompts` rows of
the test split. Peak memory: each subprocess's own peak RSS (`wait4`).
Systems: trl, rlvr-hf, rlvr-vllm, and rlvr-hf-best / rlvr-vllm-best with `--best`'s overrides on top (default
`train=fast`, which trains with the same gradients). `--preset smollm2`: SmolLM2-135M-Instruct (`make smollm2`) with the instruct prompt and reward, as `rlvr train
model=smollm2` trains it; `rlvr-vllm` samples with vLLM, as that preset does where vLLM is installed.
Writes bench/results/learning.json and learning.png (`--docs-plot`: also docs/bench_learning.png);
`--preset smollm2`: learning_smollm2.json and .png.

`--steps N` compares at equal steps instead: each system trains exactly N steps (no budget), evaluated at step 0,
every `--eval-every-steps` and at N, and the table pairs their accuracies step by step (rlvr minus TRL), with
each system's seconds a step beside them; results go to NAME_steps.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import bench_grpo_trl as grpo
import common


class BudgetSpent(Exception):
    pass


class Curve:
    """Accuracy against training time, evaluating off the clock."""

    def __init__(self, args, env):
        self.args, self.env = args, env
        self.test_rows = env.rows("test", args.eval_prompts, seed=0)
        self.points: list[dict] = []
        self.start = None
        self.eval_seconds = 0.0
        self.steps = 0

    def train_seconds(self) -> float:
        return 0.0 if self.start is None else time.perf_counter() - self.start - self.eval_seconds

    def evaluate(self, model, tokenizer) -> None:
        from rlvr.trainer.evaluation.evaluate import evaluate_greedy
        from rlvr.trainer.models.model import autocast_paused
        from rlvr.trainer.rollout.hf import HFEngine

        began = time.perf_counter()
        with autocast_paused(model):  # float32 for every system: the weights as saved, not model.autocast's bf16
            result = evaluate_greedy(HFEngine(model, tokenizer), self.env, self.test_rows, self.args.max_new_tokens)
        self.points.append({"train_s": self.train_seconds(), "step": self.steps, "accuracy": result["accuracy"],
                            "reward_mean": result["reward_mean"]})
        self.eval_seconds += time.perf_counter() - began

    def step_begins(self, model, tokenizer) -> None:
        if self.start is None:
            self.evaluate(model, tokenizer)
            self.start, self.eval_seconds = time.perf_counter(), 0.0

    def step_ends(self, model, tokenizer) -> bool:
        """Evaluate when due; True once the budget (or `--steps`) is spent (after the final evaluation)."""
        self.steps += 1
        if self.args.steps:  # equal steps: evaluations at fixed step numbers
            done = self.steps >= self.args.steps
            if done or self.steps % self.args.eval_every_steps == 0:
                self.evaluate(model, tokenizer)
            return done
        spent = self.train_seconds()
        due = self.args.eval_every_s * len(self.points)  # points[0] is t=0
        if spent >= self.args.budget_s or spent >= due:
            self.evaluate(model, tokenizer)
        return spent >= self.args.budget_s


def worker_rlvr(args, env) -> dict:
    import rlvr.trainer.run as run

    curve = Curve(args, env)

    def on_budget(grpo_step):
        def step_on_budget(ctx, step):
            curve.step_begins(ctx.model, ctx.tokenizer)
            result = grpo_step(ctx, step)
            if curve.step_ends(ctx.model, ctx.tokenizer):
                raise BudgetSpent
            return result

        return step_on_budget

    grpo.wrap_grpo_step(run, on_budget)
    with tempfile.TemporaryDirectory() as out:
        try:
            engine = args.worker.removeprefix("rlvr-").removesuffix("-best")  # rlvr-hf, rlvr-vllm (-best)
            extra = tuple(args.best.split()) if args.worker.endswith("-best") else ()
            run.train(grpo.rlvr_config(args, args.model, engine, out, 1_000_000, extra), log=lambda *_: None)
        except BudgetSpent:
            pass
    if not curve.points:
        raise RuntimeError("no step was timed: rlvr.trainer.run no longer calls the step we wrap")
    return {"points": curve.points, "steps": curve.steps}


def worker_trl(args, env) -> dict:
    from transformers import TrainerCallback

    curve = Curve(args, env)
    max_steps = args.steps or int(args.budget_s * 20)  # budget: more than any run reaches (>= 50 ms a step)
    holder = {}

    class OnBudget(TrainerCallback):
        def on_step_begin(self, *_, **__):
            curve.step_begins(holder["trainer"].model, holder["tokenizer"])

        def on_step_end(self, _args, _state, control, **__):
            if curve.step_ends(holder["trainer"].model, holder["tokenizer"]):
                control.should_training_stop = True

    with tempfile.TemporaryDirectory() as out:
        trainer = grpo.trl_trainer(args, args.model, grpo.step_rows(env, args.seed, max_steps, args.prompts), env, out,
                                     max_steps, [OnBudget()])
        holder.update(trainer=trainer, tokenizer=trainer.processing_class)
        trainer.train()
    return {"points": curve.points, "steps": curve.steps}


WORKER_ARGS = ("budget_s", "eval_every_s", "eval_prompts", "prompts", "group", "max_new_tokens", "temperature",
               "beta", "lr", "threads", "preset", "seed", "best", "steps", "eval_every_steps")


def plot(results: dict, budget: float | None, path: Path) -> None:
    plt = common.agg_plot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in results.items():
        ax.plot([p["train_s"] for p in r["points"]], [100 * p["accuracy"] for p in r["points"]], marker="o",
                label=f"{name} ({r['steps']} steps)")
    if budget is not None:  # --steps: no budget line
        ax.axvline(budget, color="grey", linestyle=":")
    ax.set(xlabel="training seconds (evaluation excluded)", ylabel="held-out greedy accuracy (%)",
           title="arithmetic: accuracy vs wall-clock")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-s", type=float, default=90.0)
    parser.add_argument("--eval-every-s", type=float, default=15.0)
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--steps", type=int, default=0, help="equal steps instead of a budget: N steps each")
    parser.add_argument("--eval-every-steps", type=int, default=10, help="with --steps: evaluate every this many")
    grpo.add_shared_arguments(parser, systems="rlvr-hf,trl", plot="docs/bench_learning.png")
    parser.add_argument("--best", default="train=fast",
                        help="the rlvr-*-best systems' overrides, space-separated (default: the same-gradient preset)")
    args = parser.parse_args()

    if args.worker:
        import torch

        from rlvr.trainer.env_config import build_env

        if args.threads:
            torch.set_num_threads(args.threads)
        env = build_env(grpo.compose(grpo.preset_overrides(args)).env)
        raw = (worker_trl if args.worker == "trl" else worker_rlvr)(args, env)
        Path(args.result).write_text(json.dumps(raw))
        return

    import torch

    if args.threads:  # the tiny model's warm start, when not cached yet, runs here
        torch.set_num_threads(args.threads)
    load_before = common.load_average()
    model_path = args.base_model or grpo.tiny_model_path(preset=grpo.preset_overrides(args))
    print(common.machine_line())
    print(f"model: {model_path}; " + (f"{args.steps} steps each" if args.steps else
                                      f"budget {args.budget_s:.0f} s of training each"))
    results, failed = {}, {}
    for name in args.systems.split(","):
        raw, error = grpo.run_worker(name, args, model_path, __file__, WORKER_ARGS)
        if error:
            failed[name] = error
            print(f"{name}: FAILED ({error})")
            continue
        results[name] = raw
        print(f"{name}: {raw['steps']} steps, accuracy {raw['points'][0]['accuracy']:.1%} -> "
              f"{raw['points'][-1]['accuracy']:.1%}")
    if args.steps:
        report_steps(results)
    else:
        report_budget(results, args.budget_s)
    name = ("learning" if args.preset == "tiny" else f"learning_{args.preset}") + ("_steps" if args.steps else "")
    common.write_json(name, {"args": vars(args), "model": model_path, "results": results, "failed": failed},
                      load_before)
    if results:
        plot(results, None if args.steps else args.budget_s, common.RESULTS / f"{name}.png")
        if args.docs_plot:
            shutil.copy(common.RESULTS / f"{name}.png", common.ROOT / "docs" / f"bench_{name}.png")
    if failed:
        sys.exit(1)


def report_budget(results: dict, budget_s: float) -> None:
    print(f"\n| system | steps in {budget_s:.0f} s | s/step | accuracy at 0 s | accuracy at end | change | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        first, last = r["points"][0], r["points"][-1]
        print(f"| {name} | {r['steps']} | {last['train_s'] / max(1, r['steps']):.3f} | {first['accuracy']:.1%} | "
              f"{last['accuracy']:.1%} | {100 * (last['accuracy'] - first['accuracy']):+.1f} pts | "
              f"{r['peak_rss_mb']:.0f} |")
    print("\nCurve (training seconds: accuracy):")
    for name, r in results.items():
        print(f"  {name}: " + ", ".join(f"{p['train_s']:.0f}s {p['accuracy']:.1%}" for p in r["points"]))


def report_steps(results: dict) -> None:
    """Held-out accuracy at each evaluated step, per system, and rlvr's systems minus TRL's at the same step."""
    steps = sorted({p["step"] for r in results.values() for p in r["points"]})
    at = {name: {p["step"]: p["accuracy"] for p in r["points"]} for name, r in results.items()}
    print("\n| system | s/step | peak RSS MB | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|---|---|" + "---|" * len(steps))
    for name, r in results.items():
        last = r["points"][-1]
        print(f"| {name} | {last['train_s'] / max(1, r['steps']):.2f} | {r['peak_rss_mb']:.0f} | "
              + " | ".join(f"{at[name][s]:.1%}" if s in at[name] else "" for s in steps) + " |")
    for name in (n for n in results if n != "trl" and "trl" in results):
        diffs = [f"step {s}: {100 * (at[name][s] - at['trl'][s]):+.1f}" for s in steps
                 if s in at[name] and s in at["trl"]]
        print(f"\n{name} - trl at equal steps (pts): " + ", ".join(diffs))


if __name__ == "__main__":
    main()
