"""`rlvr train`: set up from the config (trainer/setup.py), run the algorithm's step in a loop (trainer/step.py),
evaluate, log, checkpoint, summarise.

Everything a run leaves behind sits in its run directory (docs/concepts/run-directory.md): `config.yaml`,
`metrics.jsonl`, `samples.jsonl`, `checkpoints/step_N/` (each with its model card and config,
trainer/model_card.py), `summary.json`. A killed run is continued with `resume=RUN_DIR` from its last
checkpoint, whose weights and tokenizer it loads (the base model only where LoRA or a reference needs it);
the steps after that checkpoint are run again (their log lines are dropped first), with the same data and
the same RNG.
A new run refuses an `output_dir` that already holds a run unless `overwrite=true` (trainer/run_dir.py).
`callbacks` (trainer/callbacks.py) are called after each step, each eval and at the end, and may stop the run
after a step (evaluated, checkpointed and summarised as a last step is).
`train(cfg)` trains `cfg` as given; `rlvr train resume=DIR` builds it from the run's saved config.yaml
with the command line's overrides on top (trainer/resume_config.py).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from rlvr.trainer.callbacks import Callbacks
from rlvr.trainer.checkpoint import latest_checkpoint, save_checkpoint
from rlvr.trainer.evaluation.evaluate import evaluate_greedy
from rlvr.trainer.experience.async_rollouts import start_async_rollouts
from rlvr.trainer.hub import push_checkpoint
from rlvr.trainer.model_card import checkpoint_files
from rlvr.trainer.rollout.generation_settings import generation_settings
from rlvr.trainer.models.model import autocast_paused
from rlvr.trainer.setup import Run, build_run
from rlvr.trainer.step import train_step
from rlvr.trainer.truncation import truncation_warning


def train(cfg, log=print, callbacks=None) -> dict:
    hooks = Callbacks(callbacks)  # a callback with none of the hooks is refused before the run starts
    run = build_run(cfg, log)  # trainer/setup.py: checks, environment, models, optimizer, engine, run directory
    ctx, files, parallel = run.ctx, run.files, run.parallel
    hooks.callbacks = hooks.callbacks if parallel.is_main else []  # hooks run on rank 0; the stop reaches every rank
    if run.start_step == 0:
        results = held_out_eval(run)
        files.log_metrics({"step": 0, **results})
        hooks.on_eval(0, results)
    if cfg.rollout.max_staleness:  # the producer samples ahead with its own engine (experience/async_rollouts.py)
        start_async_rollouts(ctx, run.start_step, cfg.train.steps)  # ctx.engine becomes the trainer's side of it
    started, quiet_until = time.time(), 0
    bar = tqdm(range(run.start_step + 1, cfg.train.steps + 1), initial=run.start_step, total=cfg.train.steps,
               desc=cfg.algo.name, unit="step", dynamic_ncols=True,
               mininterval=0.2 if sys.stderr.isatty() else 15.0,  # a log file gets a line every 15 s
               disable=not parallel.is_main)
    for step in bar:
        if line := run.threads.before_step():  # threads=auto: the cores other processes leave (trainer/threads.py)
            log(line)
        metrics, samples = take_step(run, step)  # collect -> update -> schedule -> sync -> metrics (trainer/step.py)
        metrics = parallel.reduce_metrics(metrics, completions_per_rank(cfg, parallel))  # over ranks
        if run.curriculum is not None:  # on the reduced metrics: every rank moves alike
            metrics.update(run.curriculum.observe(metrics))
        hooks.on_step(step, metrics, samples)
        stop = hooks.should_stop()
        if step % cfg.train.eval_every == 0 or step == cfg.train.steps or stop:
            results = held_out_eval(run)
            metrics.update(results)
            hooks.on_eval(step, results)
            stop = hooks.should_stop()
        files.log_metrics(metrics)
        files.log_samples(samples)
        if run.resumed and step == run.start_step + 1:  # the resume works: later resumes start from its config
            files.write_config(cfg)
        quiet_until = warn_if_truncated(run, metrics, step, quiet_until)
        bar.set_postfix(progress(metrics), refresh=False)
        if step % cfg.train.save_every == 0 or step == cfg.train.steps or stop:
            save(run, step)
        if stop:
            break
    bar.close()
    run.env.shutdown()  # the sandboxes' warm containers and the verifiers' workers go now, not at interpreter exit
    ctx.engine.shutdown()  # vLLM tears down its process groups: before ours goes, not at exit after it
    parallel.close()
    if not parallel.is_main:
        return {}
    files.close()
    history = files.read_metrics()
    last_step = max([run.start_step] + [m["step"] for m in history])  # below train.steps when a callback stopped it
    summary = summarise(history, time.time() - started, run.run_dir,
                        steps_this_session=last_step - run.start_step)
    if hooks.stopped_by is not None:
        summary["stopped_by"] = hooks.stopped_by
    (run.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    log(format_summary(summary))
    hooks.on_end(summary, latest_checkpoint(run.run_dir))
    return summary


def take_step(run: Run, step: int) -> tuple[dict, list[dict]]:
    """The algorithm's step, and the asynchronous producer's metrics for it; the producer stops if the step fails."""
    rollouts = run.ctx.rollouts
    try:
        metrics, samples = train_step(run.ctx, step, run.algorithm)
    except BaseException:
        if rollouts is not None:  # the producer thread stops with the loop
            rollouts.close()
        raise
    if rollouts is not None:
        metrics.update(rollouts.step_metrics(step))
    return metrics, samples


def completions_per_rank(cfg, parallel) -> int:
    return cfg.train.prompts_per_step * cfg.train.completions_per_prompt // parallel.world_size


def held_out_eval(run: Run) -> dict:
    """`eval/*`: greedy completions of the test rows, on rank 0 alone (the plain model: no collective).

    In float32 under `model.autocast=bf16`: an HF engine generates with the policy (or FSDP2's full copy), whose
    bf16 forward would make the number the autocast's, not the checkpoint's that `rlvr eval` reads (vLLM holds
    float32 weights already)."""
    if not run.parallel.is_main:
        return {}
    cfg = run.cfg
    with contextlib.ExitStack() as paused:
        for model in generating_models(run.ctx):
            paused.enter_context(autocast_paused(model))
        result = evaluate_greedy(run.ctx.engine, run.env, run.test_rows, cfg.rollout.max_new_tokens,
                                 truncated_reward=cfg.rollout.truncated_reward,
                                 settings=generation_settings(cfg.rollout))  # the run's penalty and kwargs too
    warning = truncation_warning(result.get("truncated_frac", 0.0), cfg.rollout.max_new_tokens, "the held-out eval's")
    if warning:
        run.log(warning)
    return {f"eval/{k}": v for k, v in result.items()}


def generating_models(ctx) -> list[torch.nn.Module]:
    """The policy and the modules the engine generates with in this process (through wrappers such as
    PolicyEngine: FSDP2's full copy, an HF engine's model); the policy alone for engines that hold their own
    weights (vLLM, servers)."""
    models, engine = [ctx.model], ctx.engine
    while engine is not None:
        if isinstance(getattr(engine, "model", None), torch.nn.Module):
            models.append(engine.model)
        engine = getattr(engine, "engine", None)
    return models


def warn_if_truncated(run: Run, metrics: dict, step: int, quiet_until: int) -> int:
    """A warning when most of the step's completions were cut: once, then at most once per eval_every steps.
    Returns the step until which it stays quiet."""
    warning = truncation_warning(metrics.get("truncated_frac", 0.0), run.cfg.rollout.max_new_tokens, f"step {step}'s")
    if warning and step >= quiet_until and run.parallel.is_main:
        tqdm.write(warning, file=sys.stderr)
        return step + run.cfg.train.eval_every
    return quiet_until


def progress(metrics: dict) -> dict:
    """The progress bar's reward and held-out accuracy."""
    postfix = {"reward": f"{metrics['reward/mean']:.3f}"} if "reward/mean" in metrics else {}  # offline dpo: none
    if "eval/accuracy" in metrics:
        postfix["eval_acc"] = f"{metrics['eval/accuracy']:.1%}"
    return postfix


def save(run: Run, step: int) -> None:
    """checkpoints/step_N/: the weights with their model card and config, and trainer_state.pt (optimizer, schedule,
    critic, curriculum, algorithm state, each rank's RNG) that `resume=` continues from."""
    ctx, parallel = run.ctx, run.parallel
    extra = {"base_model": run.base_model, "commands": run.commands, "algo_state": dict(ctx.state)}
    if run.curriculum is not None:
        extra["curriculum"] = run.curriculum.state_dict()
    if ctx.critic is not None:
        extra["critic"] = ctx.critic.state_dict()
    # collectives: every rank takes part
    weights, optimizer_state = parallel.plain(ctx.model), parallel.optimizer_state(ctx.model, ctx.optimizer)
    extra["rank_rng"] = parallel.rng_states()
    if parallel.is_main:  # with the model card and config that let the folder be shared as it is
        card = checkpoint_files(run.cfg, step, run.files.latest_eval, run.commands, run.base_model, weights)
        path = save_checkpoint(run.run_dir, step, weights, ctx.tokenizer, ctx.optimizer, ctx.scheduler, extra,
                               optimizer_state, card)
        push_checkpoint(run.cfg, path, step, log=run.log)  # train.push_to_hub: a failure warns, the run goes on


def summarise(history: list[dict], seconds: float, run_dir: Path, steps_this_session: int | None = None) -> dict:
    """summary.json. The train reward's before and after are the means of its first and last `train_reward_window`
    steps: 10, or half the steps on a run under 20, so the two windows never share a step (under 2 steps: none;
    the keys keep their `_10` names, which scripts read)."""
    evals = [m for m in history if "eval/accuracy" in m]
    train = [m for m in history if "reward/mean" in m]
    first, last = evals[0], evals[-1]
    k = min(10, len(train) // 2)

    def window(rows):  # mean training reward over the window
        return sum(m["reward/mean"] for m in rows) / len(rows) if k else None  # offline dpo samples nothing

    return {
        "run_dir": str(run_dir),
        "steps": max((m["step"] for m in history), default=0),  # offline dpo logs no reward/mean
        "steps_this_session": steps_this_session,  # after a resume: the steps this process ran
        "seconds_this_session": round(seconds, 1),
        "eval_prompts": last["eval/n"],
        "train_reward_window": k or None,
        "before": {"step": first["step"], "accuracy": first["eval/accuracy"], "reward_mean": first["eval/reward_mean"],
                   "hack_rate": first.get("eval/hack_rate"), "train_reward_first_10": window(train[:k])},
        "after": {"step": last["step"], "accuracy": last["eval/accuracy"], "reward_mean": last["eval/reward_mean"],
                  "hack_rate": last.get("eval/hack_rate"), "train_reward_last_10": window(train[len(train) - k:])},
    }


def format_summary(s: dict) -> str:
    b, a = s["before"], s["after"]
    rows = [
        ("held-out greedy accuracy", f"{b['accuracy']:.1%}", f"{a['accuracy']:.1%}",
         f"{100 * (a['accuracy'] - b['accuracy']):+.1f} pts"),
        ("held-out mean reward", f"{b['reward_mean']:.3f}", f"{a['reward_mean']:.3f}",
         f"{a['reward_mean'] - b['reward_mean']:+.3f}"),
    ]
    if b.get("hack_rate") or a.get("hack_rate"):  # only where a verifier flagged one: accuracy above counts it correct
        rows.append(("held-out hack rate", f"{b['hack_rate'] or 0:.1%}", f"{a['hack_rate'] or 0:.1%}",
                     f"{100 * ((a['hack_rate'] or 0) - (b['hack_rate'] or 0)):+.1f} pts"))
    if b["train_reward_first_10"] is not None:
        k = s.get("train_reward_window") or 10  # a summary.json from before the window was recorded: 10
        label = "train reward (10-step mean)" if k == 10 else f"train reward (first/last {k} steps' mean)"
        rows.append((label, f"{b['train_reward_first_10']:.3f}",
                     f"{a['train_reward_last_10']:.3f}", f"{a['train_reward_last_10'] - b['train_reward_first_10']:+.3f}"))
    header = f"| metric ({s['eval_prompts']} test prompts) | before (step {b['step']}) | after (step {a['step']}) | change |"
    lines = [header, "|---|---|---|---|"] + [f"| {m} | {x} | {y} | {d} |" for m, x, y, d in rows]
    ran = s.get("steps_this_session")
    ran = s["steps"] if ran is None else ran
    resumed = f" (of {s['steps']}; the rest before a resume)" if ran != s["steps"] else ""
    stopped = f" (stopped by the callback {s['stopped_by']})" if s.get("stopped_by") else ""
    steps = f"{ran} step{'' if ran == 1 else 's'}"
    return "\n".join(lines) + (f"\n{steps}{resumed}{stopped} in {s['seconds_this_session']:.0f} s; "
                                f"run directory {s['run_dir']}")
