"""What `rlvr train` builds before its first step: `build_run(cfg)` checks the config, builds the environment,
the models, the optimizer and the engine, restores a resumed run's state and opens the run directory.

In this order, each step refusing a bad config or run directory before the next costs anything:

    checks             the config (trainer/validate.py), sandbox hosts, device, ranks (trainer/distributed.py)
    environment        env and its held-out rows (a bad eval set is refused before any model is built),
                       rollout lengths, `reward.*`, the curriculum; its reward scores the rows' reference
                       completions (one that errors on all of them stops here); the local sandbox's weaknesses
    resume             the checkpoint to continue from, refused when it was trained with other parameters
    models             tokenizer, policy (LoRA, packing, DDP/FSDP2), what the algorithm's row asks for besides it
                       (trainer/algos/table.py: a frozen reference, a critic), AdamW and the lr schedule, the
                       checkpoint's optimizer, critic, curriculum and algorithm state
    engine             trainer/rollout/factory.py's, wrapped so every sync hands it the plain HF module
    run directory      loggers, config.yaml (a resume rewrites it only once its first step succeeded: run.py)

Only once everything is built does the run directory change: a start that fails (vLLM missing, a server that
does not come up, a logger that cannot start) leaves nothing that blocks its retry, and a resume that fails
leaves its run as it was.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import torch
from omegaconf import OmegaConf

from rlvr.envs.split import TooFewTestProblems
from rlvr.errors import ConfigError
from rlvr.sandboxes.hosts import apply_hosts
from rlvr.trainer.algos.table import ALGORITHMS, Algorithm
from rlvr.trainer.algos.update import learning_rate_schedule
from rlvr.trainer.checkpoint import latest_checkpoint, load_trainer_state, resume_conflicts, saved_entries
from rlvr.trainer.context import RunContext
from rlvr.trainer.curriculum import build_curriculum
from rlvr.trainer.device import resolve_autocast, resolve_device, use_device
from rlvr.trainer.distributed import Parallel, QuietRunFiles, RankModel
from rlvr.trainer.env_config import build_env
from rlvr.trainer.experience.rewards import check_reward_errors
from rlvr.trainer.judge_setup import gate_judges, serve_judges
from rlvr.trainer.local_sandbox import local_sandbox_warnings
from rlvr.trainer.loggers import build_loggers
from rlvr.trainer.model_card import session_command
from rlvr.trainer.models.lora import engine_weights, for_engine, lora_on
from rlvr.trainer.models.model import (build_policy, build_reference, load_tokenizer, resolve_model_path,
                                       resumed_base_path)
from rlvr.trainer.models.packing import check_packing
from rlvr.trainer.rollout.factory import build_engine, engine_choice, engine_class, resolve_kind
from rlvr.trainer.rollout.generation_settings import generation_settings
from rlvr.trainer.rollout.prompts import prompt_lengths
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.weights import PolicyEngine
from rlvr.trainer.run_dir import RunFiles, prepare_new_run_dir
from rlvr.trainer.threads import ModelThreads, set_model_threads, set_start_threads
from rlvr.trainer.truncation import context_warning, resolve_rollout_lengths
from rlvr.trainer.validate import validate_multi_turn, validate_train_config, validate_world_size


@dataclass
class Run:
    """A run as built: what the loop (run.py) reads besides the step's context."""

    cfg: object  # the run's config (ctx.cfg is this rank's view of it: its share of the prompts)
    ctx: RunContext
    algorithm: Algorithm
    parallel: Parallel
    files: object  # RunFiles on rank 0, QuietRunFiles elsewhere
    run_dir: Path
    env: object  # the configured environment: the held-out eval's, shut down at the end
    test_rows: list[dict]  # the held-out eval's
    curriculum: object | None  # trainer/curriculum.py, when curriculum.enabled
    start_step: int  # 0, or the resumed checkpoint's step
    resumed: bool
    base_model: str | None  # what each checkpoint records (rlvr eval RUN_DIR reads it)
    commands: list[dict]  # each session's command line, as far as this one: every checkpoint's model card lists them
    log: Callable  # print on rank 0, nothing elsewhere
    threads: ModelThreads  # threads=auto: looked at again before every step (trainer/threads.py)


def build_run(cfg, log=print) -> Run:
    """Everything `train` does before its first step (the module docstring gives the order)."""
    validate_train_config(cfg)
    apply_hosts(cfg.sandbox.hosts)  # every code sandbox of this run, and of its worker processes, uses them
    device = resolve_device(cfg.train.device)  # train.device: auto -> this rank's GPU when there is one
    use_device(device)  # before NCCL starts: each rank on its own GPU
    parallel = Parallel.from_env(cfg.trainer.strategy)  # under torchrun: joins the process group
    validate_world_size(cfg, parallel.world_size)
    if not parallel.is_main:  # rank 0 alone prints and writes
        log = lambda *args, **kwargs: None  # noqa: E731
    if line := resolve_autocast(cfg.model, device):  # model.autocast=auto: bf16 where the device computes it
        log(line)
    set_start_threads(cfg.threads)  # threads=auto: one until the policy is built (trainer/threads.py)
    run_dir = Path(cfg.resume or cfg.output_dir)
    if not cfg.resume and not cfg.overwrite:
        prepare_new_run_dir(run_dir, overwrite=False)  # an earlier run's directory is refused before any work
    serve_judges(cfg, run_dir, log)  # a judge named by checkpoint: its vLLM server, its url in the reward (judge_setup.py)
    env = build_env(cfg.env)
    curriculum = _check_environment(cfg, env, parallel.world_size)
    test_rows = _held_out_rows(cfg, env, log)
    if parallel.is_main:
        for line in local_sandbox_warnings(env):  # what `rlvr sandbox doctor --backend local` says it cannot contain
            log(line)
    _check_references(cfg, env, log)  # a reward that errors on the task's own answers stops before any model loads
    gate_judges(cfg, env, log)  # a judge that accepts master keys or injections stops here, with its table
    checkpoint = _checkpoint_to_resume(cfg, run_dir)
    if not cfg.resume and cfg.overwrite and parallel.is_main:  # (without overwrite, refused above)
        prepare_new_run_dir(run_dir, overwrite=True)  # the earlier run's files go now, after every check
    files = RunFiles(run_dir) if parallel.is_main else QuietRunFiles()  # created once the config has passed every check
    # what this run needs besides the policy, its functions imported (trainer/algos/table.py)
    algorithm = ALGORITHMS[cfg.algo.name].loaded()
    saved = saved_entries(checkpoint, "base_model", "commands") if checkpoint else {}
    tokenizer, model, plain, reference, critic, base_model = _models(cfg, env, algorithm, checkpoint, saved, parallel,
                                                                     device, log)
    # a frozen teacher (algo=distill's), refused here when its tokenizer is not the student's
    cache = {"teacher": algorithm.teacher(cfg, tokenizer, device, parallel.world_size, log)} if algorithm.teacher else {}
    threads = set_model_threads(cfg.threads, plain)  # threads=auto: by the policy's size and the machine's load
    if threads.line:
        log(threads.line)
    params = list(model.parameters()) + (list(critic.parameters()) if critic is not None else [])
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                                  weight_decay=cfg.optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, learning_rate_schedule(cfg.optim, cfg.train.steps))
    start_step, algo_state = 0, {}
    if checkpoint:
        start_step, algo_state = _restore(checkpoint, model, optimizer, scheduler, critic, curriculum, parallel, log)
        log(f"resuming {run_dir} from {checkpoint.name}")
    # each session's command line, as far as this checkpoint: every later checkpoint's model card lists them
    commands = [*saved.get("commands", []),
                {"step": start_step, "command": session_command(), "world_size": parallel.world_size}]
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens,
                              temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, top_k=cfg.rollout.top_k,
                              stop=tuple(cfg.rollout.stop), **generation_settings(cfg.rollout))
    engine = _engine(cfg, env, tokenizer, plain, parallel, test_rows, run_dir, log)
    # Only now, with everything built, does the run directory change (the module docstring says why). A new run
    # exists from its config.yaml on (run_dir.py); a resumed run's config.yaml is rewritten once this session's
    # first step has succeeded (run.py).
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
                     sampling, optimizer, scheduler, critic, algo_state, cache=cache, log=log)
    run = Run(cfg, ctx, algorithm, parallel, files, run_dir, env, test_rows, curriculum, start_step, bool(checkpoint),
              base_model, commands, log, threads)
    _log_start(run, device, plain)
    return run


def _check_environment(cfg, env, world_size: int):
    """The checks that need the environment; resolves the rollout lengths it sets. Returns the curriculum (or None)."""
    validate_multi_turn(cfg, env)
    resolve_rollout_lengths(cfg.rollout, env)  # null: the environment's length and truncation rule
    curriculum = build_curriculum(cfg, env, build_env, world_size)  # None unless curriculum.enabled
    if cfg.algo.get("overlong_buffer", 0) >= cfg.rollout.max_new_tokens:  # a key of the policy-gradient family
        raise ConfigError(f"algo.overlong_buffer={cfg.algo.overlong_buffer} must be < rollout.max_new_tokens="
                          f"{cfg.rollout.max_new_tokens} ({env.name}'s default unless set)")
    return curriculum


def _held_out_rows(cfg, env, log) -> list[dict]:
    """The held-out eval's rows: `train.eval_prompts` test rows, or all an environment has when it has fewer."""
    eval_prompts, available = cfg.train.eval_prompts, env.test_size()
    if available is not None and eval_prompts > available:  # the default 200 on HumanEval's 164: all of them
        log(f"train.eval_prompts={eval_prompts}: {env.name} has {available} test problems; the held-out eval uses "
            f"all {available}")
        eval_prompts = available
    try:  # before any model is built, so a bad eval set is refused at once
        return env.rows("test", eval_prompts, seed=cfg.seed)
    except TooFewTestProblems as error:  # a task that does not count its test problems: all of them, as rlvr eval
        if not error.available:
            raise ConfigError(f"train.eval_prompts={cfg.train.eval_prompts}: {error}") from None
        log(f"train.eval_prompts={eval_prompts}: only {error.available} distinct test problems of {env.name} exist "
            f"for these parameters; the held-out eval uses all {error.available}")
        return env.rows("test", error.available, seed=cfg.seed)
    except ValueError as error:
        raise ConfigError(f"train.eval_prompts={cfg.train.eval_prompts}: {error}") from None


def _check_references(cfg, env, log) -> None:
    """The environment's reference completions (each row's `reference`: the dataset env's answer column in
    `<answer>` tags or its reference column, arithmetic's and countdown's solutions, a code task's solution) for a
    step's worth of train rows, scored by its reward before anything is generated: a component that errors on all
    of them stops the run with its first error (experience/rewards.py), one that errors on some warns. Rows without
    a reference are skipped, and so is a multi-turn environment, whose reward scores whole trajectories."""
    from rlvr.envs.multi_turn import is_multi_turn

    if is_multi_turn(env):
        return
    rows = [row for row in env.rows("train", cfg.train.prompts_per_step, seed=cfg.seed) if row.get("reference")]
    if rows:
        check_reward_errors(env.score([row["reference"] for row in rows], rows), env,
                            f"the reference answers of {env.name}'s train rows, before any generation",
                            log)


def _checkpoint_to_resume(cfg, run_dir: Path) -> Path | None:
    """`resume=DIR`'s last checkpoint, refused when this command builds other parameters than it was trained with."""
    checkpoint = latest_checkpoint(run_dir) if cfg.resume else None
    if cfg.resume and checkpoint is None:
        raise ConfigError(f"resume={cfg.resume}: no checkpoint with trainer_state.pt under {run_dir}/checkpoints")
    if checkpoint and (run_dir / "config.yaml").exists():
        conflicts = resume_conflicts(OmegaConf.load(run_dir / "config.yaml"), cfg)
        if conflicts:
            raise ConfigError(f"resume={cfg.resume}: {checkpoint.name} was trained with other parameters than this "
                              f"command builds ({'; '.join(conflicts)}); pass the run's values, or start a new run "
                              f"from it (model=hf model.name_or_path={checkpoint})")
    return checkpoint


def _models(cfg, env, algorithm: Algorithm, checkpoint: Path | None, saved: dict, parallel: Parallel, device, log):
    """(tokenizer, policy as trained (wrapped), its plain HF module, reference or None, critic or None, base model)."""
    # A resume takes its policy and tokenizer from the checkpoint; the base model (the tiny model: minutes of warm
    # start when the cache was emptied) is resolved only for what needs it: LoRA's base weights, or a reference.
    base_path = None
    if not checkpoint or lora_on(cfg.model.lora) or algorithm.needs_reference(cfg.algo):
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
    return tokenizer, model, plain, reference, critic, base_model


def _restore(checkpoint: Path, model, optimizer, scheduler, critic, curriculum, parallel: Parallel,
             log) -> tuple[int, dict]:
    """A resumed run's optimizer, schedule, critic and curriculum from `checkpoint`; returns (its step, algo state)."""
    trainer_state = load_trainer_state(checkpoint, optimizer, scheduler, rank=parallel.rank,
                                       load_optimizer=lambda s: parallel.load_optimizer_state(model, optimizer, s))
    if critic is not None:  # "value_head": the key of checkpoints saved before the rename
        critic.load_state_dict(trainer_state["critic"] if "critic" in trainer_state else trainer_state["value_head"])
    if curriculum is not None:
        if "curriculum" in trainer_state:
            curriculum.load_state_dict(trainer_state["curriculum"])
        else:
            log(f"{checkpoint.name} was trained without a curriculum; it starts now at level {curriculum.level}")
    return trainer_state["step"], trainer_state.get("algo_state", {})


def _engine(cfg, env, tokenizer, plain, parallel: Parallel, test_rows: list[dict], run_dir: Path,
            log) -> PolicyEngine:
    """The run's engine (rollout.engine, `auto` resolved here once: the engine and why are logged, and `cfg` holds the
    resolved name from here on, which config.yaml and the model cards record), wrapped so
    every `sync_weights(policy)` hands it the plain HF module; vLLM: LoRA adapters reach it merged, or as the
    adapter alone (rollout.vllm.lora_sync=adapter)."""
    kind = resolve_kind(cfg.rollout.engine, cfg.rollout, plain.config)
    log(engine_choice(cfg.rollout.engine, kind, plain.config))
    cfg.rollout.engine = kind  # config.yaml and each model card record the engine that ran, not `auto`
    copies_weights = engine_class(kind).copies_weights
    adapter_sync = cfg.rollout.vllm.lora_sync == "adapter"
    options = {**OmegaConf.to_container(cfg.rollout, resolve=True), "seed": cfg.seed + parallel.rank,
               "max_sequences": _engine_rows(cfg),
               "max_row_tokens": _engine_row_tokens(cfg, env, tokenizer, test_rows, copies_weights),
               "log_dir": str(run_dir / "servers")}  # rollout=server: each server's log
    return PolicyEngine(build_engine(kind, for_engine(plain, copies_weights, adapter_sync), tokenizer,
                                     options),
                        weights=partial(engine_weights, parallel.plain, copies_weights, adapter_sync))


def _log_start(run: Run, device, plain) -> None:
    """The derived sizes (per step, per micro-batch), the device, and the warnings a start can already give."""
    cfg, log = run.cfg, run.log
    completions = cfg.train.prompts_per_step * cfg.train.completions_per_prompt
    if run.algorithm.offline_data and cfg.data:  # offline: nothing is sampled in training
        per_step = (f"per step: {cfg.algo.pairs_per_step} preference pairs from data={cfg.data} (nothing is "
                    f"sampled); {cfg.train.steps} steps; held-out eval on {len(run.test_rows)} test prompts\n")
    else:
        per_step = (f"per step: {cfg.train.prompts_per_step} prompts x {cfg.train.completions_per_prompt} completions "
                    f"= {completions} completions in {math.ceil(completions / cfg.train.micro_batch_size)} "
                    f"micro-batch(es) of <= {cfg.train.micro_batch_size}; {cfg.train.steps} steps; held-out eval on "
                    f"{len(run.test_rows)} test prompts\n")
    log(f"run directory: {run.run_dir}\ndevice: {device} (train.device={cfg.train.device})"
        + (f"; micro-batches packed by train.max_tokens_per_micro_batch={cfg.train.max_tokens_per_micro_batch}"
           if cfg.train.pack_sequences else "") + f"\n{per_step}"
        f"completions: up to rollout.max_new_tokens={cfg.rollout.max_new_tokens} tokens; a truncated one's reward: "
        f"rollout.truncated_reward={cfg.rollout.truncated_reward}")
    warning = context_warning(prompt_lengths(run.ctx.tokenizer, run.env, run.test_rows), cfg.rollout.max_new_tokens,
                              getattr(plain.config, "max_position_embeddings", None))
    if warning and run.parallel.is_main:
        log(warning)
    if run.curriculum is not None:
        log(run.curriculum.describe())


def _engine_row_tokens(cfg, env, tokenizer, test_rows: list[dict], vllm_engine: bool) -> int | None:
    """The longest row the engine generates, which a vLLM KV cache of `rollout.vllm.kv_cache_bytes=auto` is sized for:
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
    (evaluate_greedy's 256 at most), which a vLLM KV cache of `rollout.vllm.kv_cache_bytes=auto` is sized for."""
    return max(cfg.train.prompts_per_step * cfg.train.completions_per_prompt, min(cfg.train.eval_prompts, 256))


