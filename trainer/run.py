"""`rlvr train`: set up from the config, run the algorithm's step in a loop, log, checkpoint, summarise.

Everything a run leaves behind sits in its run directory (README "Run directory"): `config.yaml`,
`metrics.jsonl`, `samples.jsonl`, `checkpoints/step_N/` (each with its model card and config,
trainer/model_card.py), `summary.json`. A killed run is continued with `resume=RUN_DIR` from its last
checkpoint, whose weights and tokenizer it loads (the base model only where LoRA or a reference needs it);
the steps after that checkpoint are run again (their log lines are dropped first), with the same data and
the same RNG.
A new run refuses an `output_dir` that already holds a run unless `overwrite=true` (trainer/run_dir.py).
`train(cfg)` trains `cfg` as given; `rlvr train resume=DIR` builds it from the run's saved config.yaml
with the command line's overrides on top (trainer/resume_config.py).
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from rlvr.envs.split import TooFewTestProblems
from rlvr.errors import ConfigError
from rlvr.sandboxes.hosts import apply_hosts
from rlvr.trainer.algorithms import ALGORITHMS
from rlvr.trainer.curriculum import build_curriculum
from rlvr.trainer.checkpoint import (latest_checkpoint, load_trainer_state, resume_conflicts, save_checkpoint,
                                     saved_entries)
from rlvr.trainer.device import resolve_device, use_device
from rlvr.trainer.distributed import Parallel, QuietRunFiles, RankModel
from rlvr.trainer.env_config import build_env
from rlvr.trainer.evaluation.evaluate import evaluate_greedy
from rlvr.trainer.loggers import build_loggers
from rlvr.trainer.models.lora import for_engine
from rlvr.trainer.models.packing import check_packing
from rlvr.trainer.reward_config import check_reward_config
from rlvr.trainer.model_card import checkpoint_files, session_command
from rlvr.trainer.models.model import (build_policy, build_reference, load_tokenizer, resolve_model_path,
                                       resumed_base_path)
from rlvr.trainer.rollout.async_rollouts import start_async_rollouts
from rlvr.trainer.rollout.factory import build_engine, engine_class
from rlvr.trainer.rollout.prompts import prompt_lengths
from rlvr.trainer.rollout.types import Engine, SamplingParams
from rlvr.trainer.rollout.weights import PolicyEngine
from rlvr.trainer.run_dir import RunFiles, prepare_new_run_dir
from rlvr.trainer.truncation import context_warning, resolve_rollout_lengths, truncation_warning
from rlvr.trainer.validate import validate_multi_turn, validate_train_config, validate_world_size


@dataclass
class RunContext:
    cfg: object
    env: object
    tokenizer: object
    model: object
    reference: object
    engine: Engine
    sampling: SamplingParams
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    critic: torch.nn.Module | None = None  # ppo's: a value head, or a whole critic model (algo.critic)
    state: dict = field(default_factory=dict)  # what an algorithm carries across steps (ppo's penalty_beta)
    cache: dict = field(default_factory=dict)  # what an algorithm rebuilds rather than checkpoints (dpo's offline pairs)
    rollouts: object | None = None  # rollout.max_staleness > 0: the producer sample_and_score takes from


def train(cfg, log=print) -> dict:
    validate_train_config(cfg)
    apply_hosts(cfg.sandbox.hosts)  # every code sandbox of this run, and of its worker processes, uses them
    device = resolve_device(cfg.train.device)  # train.device: auto -> this rank's GPU when there is one
    use_device(device)  # before NCCL starts: each rank on its own GPU
    parallel = Parallel.from_env(cfg.trainer.strategy)  # under torchrun: joins the process group
    validate_world_size(cfg, parallel.world_size)
    if not parallel.is_main:  # rank 0 alone prints and writes
        log = lambda *args, **kwargs: None  # noqa: E731
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    run_dir = Path(cfg.resume or cfg.output_dir)
    if not cfg.resume and not cfg.overwrite:
        prepare_new_run_dir(run_dir, overwrite=False)  # an earlier run's directory is refused before any work
    env = build_env(cfg.env)
    validate_multi_turn(cfg, env)
    resolve_rollout_lengths(cfg.rollout, env)  # null: the environment's length and truncation rule
    check_reward_config(cfg.reward)
    curriculum = build_curriculum(cfg, env, build_env, parallel.world_size)  # None unless curriculum.enabled
    if cfg.algo.get("overlong_buffer", 0) >= cfg.rollout.max_new_tokens:  # a key of the policy-gradient family
        raise ConfigError(f"algo.overlong_buffer={cfg.algo.overlong_buffer} must be < rollout.max_new_tokens="
                          f"{cfg.rollout.max_new_tokens} ({env.name}'s default unless set)")
    eval_prompts, available = cfg.train.eval_prompts, env.test_size()
    if available is not None and eval_prompts > available:  # the default 200 on HumanEval's 164: all of them
        log(f"train.eval_prompts={eval_prompts}: {env.name} has {available} test problems; the held-out eval uses "
            f"all {available}")
        eval_prompts = available
    try:  # before any model is built, so a bad eval set is refused at once
        test_rows = env.rows("test", eval_prompts, seed=cfg.seed)
    except TooFewTestProblems as error:  # a task that does not count its test problems: all of them, as rlvr eval
        if not error.available:
            raise ConfigError(f"train.eval_prompts={cfg.train.eval_prompts}: {error}") from None
        log(f"train.eval_prompts={eval_prompts}: only {error.available} distinct test problems of {env.name} exist "
            f"for these parameters; the held-out eval uses all {error.available}")
        test_rows = env.rows("test", error.available, seed=cfg.seed)
    except ValueError as error:
        raise ConfigError(f"train.eval_prompts={cfg.train.eval_prompts}: {error}") from None

    checkpoint = latest_checkpoint(run_dir) if cfg.resume else None
    if cfg.resume and checkpoint is None:
        raise ConfigError(f"resume={cfg.resume}: no checkpoint with trainer_state.pt under {run_dir}/checkpoints")
    if checkpoint and (run_dir / "config.yaml").exists():
        conflicts = resume_conflicts(OmegaConf.load(run_dir / "config.yaml"), cfg)
        if conflicts:
            raise ConfigError(f"resume={cfg.resume}: {checkpoint.name} was trained with other parameters than this "
                              f"command builds ({'; '.join(conflicts)}); pass the run's values, or start a new run "
                              f"from it (model=hf model.name_or_path={checkpoint})")
    if not cfg.resume and cfg.overwrite and parallel.is_main:  # (without overwrite, refused above)
        prepare_new_run_dir(run_dir, overwrite=True)  # the earlier run's files go now, after every check
    files = RunFiles(run_dir) if parallel.is_main else QuietRunFiles()  # created once the config has passed every check
    algorithm = ALGORITHMS[cfg.algo.name]  # what this run needs besides the policy (trainer/algorithms.py)
    saved = saved_entries(checkpoint, "base_model", "commands") if checkpoint else {}
    # A resume takes its policy and tokenizer from the checkpoint; the base model (the tiny model: minutes of warm
    # start when the cache was emptied) is resolved only for what needs it: LoRA's base weights, or a reference.
    base_path = None
    if not checkpoint or cfg.model.lora.r > 0 or algorithm.needs_reference(cfg.algo):
        with parallel.main_first():  # one rank builds the cached tiny model, the others load it
            base_path = (resumed_base_path(cfg, env, saved.get("base_model"), log=log) if checkpoint
                         else resolve_model_path(cfg, env, log=log))
    base_model = base_path or saved.get("base_model")  # what each checkpoint records (rlvr eval RUN_DIR reads it)
    # a resume reads its prompts with the checkpoint's own tokenizer (saved beside its weights), never a rebuilt one
    tokenizer = load_tokenizer(str(checkpoint) if checkpoint else base_path, chat=True,
                               prompt_format=cfg.model.prompt_format)
    # ddp | fsdp2 wrap before the optimizer is built; model.lora adds adapters (trainer/models/lora.py)
    policy = build_policy(cfg.model, base_path, checkpoint, seed=cfg.seed).to(device)
    if cfg.train.pack_sequences:  # refused where packed rows would attend across sequences (models/packing.py)
        check_packing(policy)
    model = parallel.wrap(policy)
    plain = parallel.plain(model)  # the HF module with the full weights (fsdp2: gathered, once for the set-up below)
    reference = build_reference(plain, base_path) if algorithm.needs_reference(cfg.algo) else None
    if reference is not None:
        reference = reference.to(device)
    random.seed(cfg.seed)  # after the model build, which draws from the RNG only when not cached
    torch.manual_seed(cfg.seed + parallel.rank)  # rank 0 draws as one process would
    if reference is not None and parallel.world_size > 1:
        reference = RankModel(reference)  # a rank left with no rows after filtering still runs its forward
    # a critic (PPO's), from the unwrapped policy (under ddp it stays outside DDP: algos/ppo.py averages its grads)
    critic = algorithm.build_critic(plain, cfg.algo.get("critic")) if algorithm.build_critic else None
    if critic is not None:
        critic = critic.to(device)
    params = list(model.parameters()) + (list(critic.parameters()) if critic is not None else [])
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                                  weight_decay=cfg.optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(cfg))
    start_step, algo_state = 0, {}
    if checkpoint:
        trainer_state = load_trainer_state(checkpoint, optimizer, scheduler, rank=parallel.rank,
                                           load_optimizer=lambda s: parallel.load_optimizer_state(model, optimizer, s))
        start_step, algo_state = trainer_state["step"], trainer_state.get("algo_state", {})
        if critic is not None:  # "value_head": the key of checkpoints saved before the rename
            critic.load_state_dict(trainer_state["critic"] if "critic" in trainer_state else trainer_state["value_head"])
        if curriculum is not None:
            if "curriculum" in trainer_state:
                curriculum.load_state_dict(trainer_state["curriculum"])
            else:
                log(f"{checkpoint.name} was trained without a curriculum; it starts now at level {curriculum.level}")
        log(f"resuming {run_dir} from {checkpoint.name}")
    # each session's command line, as far as this checkpoint: every later checkpoint's model card lists them
    commands = [*saved.get("commands", []),
                {"step": start_step, "command": session_command(), "world_size": parallel.world_size}]

    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens,
                              temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, top_k=cfg.rollout.top_k,
                              stop=tuple(cfg.rollout.stop))
    # vLLM: LoRA adapters reach it merged, or as the adapter alone (rollout.lora_sync=adapter)
    copies_weights = engine_class(cfg.rollout.engine).copies_weights
    adapter_sync = cfg.rollout.lora_sync == "adapter"
    engine = PolicyEngine(build_engine(cfg.rollout.engine, for_engine(plain, copies_weights, adapter_sync), tokenizer,
                                       {**OmegaConf.to_container(cfg.rollout, resolve=True),
                                        "seed": cfg.seed + parallel.rank, "max_sequences": _engine_rows(cfg),
                                        "max_row_tokens": _engine_row_tokens(cfg, env, tokenizer, test_rows,
                                                                             copies_weights),
                                        "log_dir": str(run_dir / "servers")}),  # rollout=server: each server's log
                          weights=lambda policy: for_engine(parallel.plain(policy), copies_weights, adapter_sync))
    # Only now, with everything built, does the run directory change: a start that fails (vLLM missing, a server
    # that does not come up, a logger that cannot start) leaves nothing that blocks its retry, and a resume that
    # fails leaves its run as it was. A new run exists from its config.yaml on (run_dir.py); a resumed run's
    # config.yaml is rewritten once this session's first step has succeeded (below).
    if parallel.is_main:
        files.loggers = build_loggers(cfg.logger, run_dir, OmegaConf.to_container(cfg, resolve=True), cfg.wandb,
                                      resume_step=start_step if checkpoint else None)
    if checkpoint:
        files.truncate_after(start_step)
    else:
        files.write_config(cfg)
    # with ranks, the step sees its rank's share of the prompts (trainer/distributed.py)
    train_env = curriculum.env if curriculum else env  # a curriculum: train prompts from its current level
    ctx = RunContext(parallel.local_config(cfg), parallel.shard_env(train_env), tokenizer, model, reference, engine,
                     sampling, optimizer, scheduler, critic, algo_state)
    completions = cfg.train.prompts_per_step * cfg.train.completions_per_prompt
    if algorithm.offline_data and cfg.data:  # offline: nothing is sampled in training
        per_step = (f"per step: {cfg.algo.pairs_per_step} preference pairs from data={cfg.data} (nothing is "
                    f"sampled); {cfg.train.steps} steps; held-out eval on {len(test_rows)} test prompts\n")
    else:
        per_step = (f"per step: {cfg.train.prompts_per_step} prompts x {cfg.train.completions_per_prompt} completions "
                    f"= {completions} completions in {math.ceil(completions / cfg.train.micro_batch_size)} "
                    f"micro-batch(es) of <= {cfg.train.micro_batch_size}; {cfg.train.steps} steps; held-out eval on "
                    f"{len(test_rows)} test prompts\n")
    log(f"run directory: {run_dir}\ndevice: {device} (train.device={cfg.train.device})"
        + (f"; micro-batches packed by train.max_tokens_per_micro_batch={cfg.train.max_tokens_per_micro_batch}"
           if cfg.train.pack_sequences else "") + f"\n{per_step}"
        f"completions: up to rollout.max_new_tokens={cfg.rollout.max_new_tokens} tokens; a truncated one's reward: "
        f"rollout.truncated_reward={cfg.rollout.truncated_reward}")
    warning = context_warning(prompt_lengths(tokenizer, env, test_rows), cfg.rollout.max_new_tokens,
                              getattr(plain.config, "max_position_embeddings", None))
    if warning and parallel.is_main:
        log(warning)
    if curriculum is not None:
        log(curriculum.describe())

    def held_out_eval() -> dict:
        if not parallel.is_main:  # rank 0 alone evaluates, on the plain model (no collective)
            return {}
        result = evaluate_greedy(engine, env, test_rows, cfg.rollout.max_new_tokens,
                                 truncated_reward=cfg.rollout.truncated_reward)
        warning = truncation_warning(result.get("truncated_frac", 0.0), cfg.rollout.max_new_tokens,
                                     "the held-out eval's")
        if warning:
            log(warning)
        return {f"eval/{k}": v for k, v in result.items()}

    if start_step == 0:
        files.log_metrics({"step": 0, **held_out_eval()})
    if cfg.rollout.max_staleness:  # the producer samples ahead with its own engine (rollout/async_rollouts.py)
        start_async_rollouts(ctx, start_step, cfg.train.steps)
        engine = ctx.engine  # the held-out eval's and the shutdown's: the trainer's side of the producer
    started, quiet_until = time.time(), 0
    bar = tqdm(range(start_step + 1, cfg.train.steps + 1), initial=start_step, total=cfg.train.steps,
               desc=cfg.algo.name, unit="step", dynamic_ncols=True,
               mininterval=0.2 if sys.stderr.isatty() else 15.0,  # a log file gets a line every 15 s
               disable=not parallel.is_main)
    for step in bar:
        try:
            metrics, samples = algorithm.step(ctx, step)
        except BaseException:
            if ctx.rollouts is not None:  # the producer thread stops with the loop
                ctx.rollouts.close()
            raise
        if ctx.rollouts is not None:
            metrics.update(ctx.rollouts.step_metrics(step))
        metrics = parallel.reduce_metrics(metrics, completions // parallel.world_size)
        if curriculum is not None:  # on the reduced metrics: every rank moves alike
            metrics.update(curriculum.observe(metrics))
        if step % cfg.train.eval_every == 0 or step == cfg.train.steps:
            metrics.update(held_out_eval())
        files.log_metrics(metrics)
        files.log_samples(samples)
        if checkpoint and step == start_step + 1:  # the resume works: later resumes start from its config
            files.write_config(cfg)
        warning = truncation_warning(metrics.get("truncated_frac", 0.0), cfg.rollout.max_new_tokens, f"step {step}'s")
        if warning and step >= quiet_until and parallel.is_main:  # once, then at most once per eval_every steps
            tqdm.write(warning, file=sys.stderr)
            quiet_until = step + cfg.train.eval_every
        postfix = {"reward": f"{metrics['reward/mean']:.3f}"} if "reward/mean" in metrics else {}  # offline dpo: none
        if "eval/accuracy" in metrics:
            postfix["eval_acc"] = f"{metrics['eval/accuracy']:.1%}"
        bar.set_postfix(postfix, refresh=False)
        if step % cfg.train.save_every == 0 or step == cfg.train.steps:
            extra = {"base_model": base_model, "commands": commands, "algo_state": dict(ctx.state)}
            if curriculum is not None:
                extra["curriculum"] = curriculum.state_dict()
            if critic is not None:
                extra["critic"] = critic.state_dict()
            weights, optimizer_state = parallel.plain(model), parallel.optimizer_state(model, optimizer)  # collectives
            extra["rank_rng"] = parallel.rng_states()
            if parallel.is_main:  # with the model card and config that let the folder be shared as it is
                card = checkpoint_files(cfg, step, files.latest_eval, commands, base_model, weights)
                save_checkpoint(run_dir, step, weights, tokenizer, optimizer, scheduler, extra, optimizer_state, card)
    bar.close()
    env.shutdown()  # the sandboxes' warm containers and the verifiers' workers go now, not at interpreter exit
    engine.shutdown()  # vLLM tears down its process groups: before ours goes, not at exit after it
    parallel.close()
    if not parallel.is_main:
        return {}
    files.close()
    summary = summarise(files.read_metrics(), time.time() - started, run_dir, steps_this_session=cfg.train.steps - start_step)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    log(format_summary(summary))
    return summary


def _engine_row_tokens(cfg, env, tokenizer, test_rows: list[dict], vllm_engine: bool) -> int | None:
    """The longest row the engine generates, which a vLLM KV cache of `rollout.kv_cache_bytes=auto` is sized for:
    the longest prompt of the test rows and a draw of train rows, with a quarter more for train prompts not drawn
    here (a longer one only makes vLLM preempt, never fail), plus max_new_tokens. None (the model's context) for a
    multi-turn environment, whose rows grow by turns, and for HF generate, which has no such cache."""
    from rlvr.envs.multi_turn import is_multi_turn

    if is_multi_turn(env) or not vllm_engine:
        return None
    rows = list(test_rows) + env.rows("train", 64, seed=cfg.seed)
    return int(max(prompt_lengths(tokenizer, env, rows)) * 1.25) + int(cfg.rollout.max_new_tokens)


def _engine_rows(cfg) -> int:
    """The most rows the engine generates at once: the step's completions or the held-out eval's batch
    (evaluate_greedy's 256 at most), which a vLLM KV cache of `rollout.kv_cache_bytes=auto` is sized for."""
    return max(cfg.train.prompts_per_step * cfg.train.completions_per_prompt, min(cfg.train.eval_prompts, 256))


def _lr_lambda(cfg):
    warmup, total, schedule = cfg.optim.warmup_steps, cfg.train.steps, cfg.optim.schedule

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def summarise(history: list[dict], seconds: float, run_dir: Path, steps_this_session: int | None = None) -> dict:
    evals = [m for m in history if "eval/accuracy" in m]
    train = [m for m in history if "reward/mean" in m]
    first, last = evals[0], evals[-1]

    def window(rows):  # mean training reward over up to 10 steps
        return sum(m["reward/mean"] for m in rows) / len(rows) if rows else None  # offline dpo samples nothing

    return {
        "run_dir": str(run_dir),
        "steps": max((m["step"] for m in history), default=0),  # offline dpo logs no reward/mean
        "steps_this_session": steps_this_session,  # after a resume: the steps this process ran
        "seconds_this_session": round(seconds, 1),
        "eval_prompts": last["eval/n"],
        "before": {"step": first["step"], "accuracy": first["eval/accuracy"], "reward_mean": first["eval/reward_mean"],
                   "hack_rate": first.get("eval/hack_rate"), "train_reward_first_10": window(train[:10])},
        "after": {"step": last["step"], "accuracy": last["eval/accuracy"], "reward_mean": last["eval/reward_mean"],
                  "hack_rate": last.get("eval/hack_rate"), "train_reward_last_10": window(train[-10:])},
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
        rows.append(("train reward (10-step mean)", f"{b['train_reward_first_10']:.3f}",
                     f"{a['train_reward_last_10']:.3f}", f"{a['train_reward_last_10'] - b['train_reward_first_10']:+.3f}"))
    header = f"| metric ({s['eval_prompts']} test prompts) | before (step {b['step']}) | after (step {a['step']}) | change |"
    lines = [header, "|---|---|---|---|"] + [f"| {m} | {x} | {y} | {d} |" for m, x, y, d in rows]
    ran = s.get("steps_this_session")
    ran = s["steps"] if ran is None else ran
    resumed = f" (of {s['steps']}; the rest before a resume)" if ran != s["steps"] else ""
    return "\n".join(lines) + (f"\n{ran} steps{resumed} in {s['seconds_this_session']:.0f} s; "
                                f"run directory {s['run_dir']}")
