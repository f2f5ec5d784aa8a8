"""Checks of `rlvr train`'s config that the schema's types cannot express; each names the field.

A rule on one key's value (a range, a set of choices) lives on that key's field in trainer/config.py and is checked
by one walk (`check_fields`, trainer/field_rules.py), which also lets `--help` show it. What is here spans several
keys (or the machine, a file, the algorithm table), one function per section: rollout, train, model, DPO, strategy.
The few single-key checks left here say why they are not on their field.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from rlvr.trainer.algo_keys import unread_algo_keys, validate_algo
from rlvr.trainer.config import RolloutConfig, RunConfig, unknown_keys
from rlvr.trainer.device import resolve_device
from rlvr.trainer.field_rules import check_fields
from rlvr.errors import ConfigError
from rlvr.envs.multi_turn import is_multi_turn

from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.algos.dpo_data import read_scored_completions
from rlvr.trainer.rollout.factory import CHOICES as ENGINES
from rlvr.trainer.rollout.factory import GROUPS as ENGINE_GROUPS
from rlvr.trainer.rollout.generation_settings import check_generation_settings
from rlvr.trainer.threads import check_threads


def need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate_train_config(cfg) -> None:
    """Every check before any work: each key's own rule (on its field), then the rules across keys, by section."""
    need(cfg.algo.name in ALGORITHMS,
         f"algo.name={cfg.algo.name!r} is not available; choose one of {', '.join(ALGORITHMS)}")
    check_fields(cfg, RunConfig)  # each key's own rule: its range or choices, on its field (trainer/config.py)
    validate_algo(cfg)  # per family (trainer/algo_keys.py)
    check_threads(cfg.threads)  # `threads`: auto | N | 0, read by trainer/threads.py
    _validate_rollout(cfg)
    _validate_train(cfg)
    _validate_model(cfg)
    _validate_dpo(cfg)
    _validate_strategy(cfg)
    _refuse_unread_keys(cfg)


def _validate_rollout(cfg) -> None:
    """`rollout.*`: the engine, its generation settings and groups, asynchronous rollouts, LoRA adapter sync."""
    # The engine's choices are the rows of the engine table (rollout/factory.py: a new engine is a row there), whose
    # module imports torch; the schema imports none (`--help` stays fast), so this one choice is checked here.
    need(cfg.rollout.engine in ENGINES, f"rollout.engine={cfg.rollout.engine!r}; choose one of {', '.join(ENGINES)}")
    # repetition_penalty > 0, 0 <= min_p <= 1, generation_kwargs' keys for the engine (auto: once resolved); the same
    # function checks `rlvr eval`'s rollout, and the engine factory's options
    check_generation_settings(cfg.rollout.engine, cfg.rollout)
    validate_async(cfg, need)
    validate_lora_sync(cfg, need)  # before the groups' rule: its messages say more about lora_sync
    validate_engine_groups(cfg)


def _validate_train(cfg) -> None:
    """`train.*` against the algorithm and against each other; `train.device` against this machine."""
    train = cfg.train
    row = ALGORITHMS[cfg.algo.name]
    need(train.max_tokens_per_micro_batch == 0 or not row.whole_distributions,
         f"train.max_tokens_per_micro_batch={train.max_tokens_per_micro_batch}: algo={cfg.algo.name} takes its own "
         f"natural-gradient step over micro_batch_size rows (trainer/algos/trpo.py); set it to 0")
    resolve_device(train.device)  # a ConfigError naming train.device when it names no usable device
    need(not train.pack_sequences or train.max_tokens_per_micro_batch > 0,
         "train.pack_sequences=true packs each token-budget micro-batch into one row: set "
         "train.max_tokens_per_micro_batch too (e.g. 4096)")
    need(train.logprob_chunk_tokens == 0 or not row.whole_distributions,
         f"train.logprob_chunk_tokens={train.logprob_chunk_tokens}: algo={cfg.algo.name} computes whole "
         f"distributions for its KL (trainer/algos/trpo.py), which nothing chunks; set it to 0")
    need(train.completions_per_prompt >= 2 or not row.needs_groups(cfg.algo),
         f"train.completions_per_prompt={train.completions_per_prompt}: algo={cfg.algo.name} needs >= 2 "
         f"(the group is the baseline)")
    completions = train.prompts_per_step * train.completions_per_prompt
    need(train.micro_batch_size >= completions or completions % train.micro_batch_size == 0,
         f"train.micro_batch_size={train.micro_batch_size} must divide prompts_per_step x completions_per_prompt "
         f"= {completions}")


def _validate_model(cfg) -> None:
    """`model.*`: a model to load, the warm start's band, LoRA's settings (each checked only when LoRA is on)."""
    need(cfg.model.name == "tiny" or bool(cfg.model.name_or_path),
         f"model.name_or_path is required for model={cfg.model.name!r} (a local directory or Hub name)")
    path = str(cfg.model.name_or_path or "")
    need(not _looks_local(path) or Path(path).expanduser().exists(),
         f"model.name_or_path={path}: no such {'file' if path.endswith('.gguf') else 'directory'} (give a local Hugging Face model directory, a .gguf "
         f"file, a packaged model such as smollm2, or a Hub name such as Qwen/Qwen2.5-0.5B-Instruct)")
    band = list(cfg.model.warm_start.target_accuracy)  # one key, but a rule between its two items
    need(len(band) == 2 and 0 <= band[0] <= band[1] <= 1,
         f"model.warm_start.target_accuracy={band} must be [low, high] with 0 <= low <= high <= 1")
    lora = cfg.model.lora
    if lora.r < 0 or (lora.r > 0 and (lora.alpha <= 0 or not 0 <= lora.dropout < 1 or not lora.target_modules)):
        raise ConfigError(f"model.lora: r={lora.r} must be >= 0 (0: off) and, when on, alpha={lora.alpha} > 0, "
                          f"dropout={lora.dropout} in [0, 1) and target_modules={list(lora.target_modules)} non-empty")
    from rlvr.trainer.models.lora import peft_config

    if lora.get("peft"):  # a passed-through peft.LoraConfig: refused at start, naming peft's reason
        peft_config(lora)


def _refuse_unread_keys(cfg) -> None:
    """A key nothing reads is refused: one the schema lacks (`+train.stepz=3`), or another algorithm's."""
    for key, siblings in unknown_keys(cfg):
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], siblings, n=1)
        hint = f"did you mean {key.rsplit('.', 1)[0] + '.' if '.' in key else ''}{close[0]}? " if close else ""
        raise ConfigError(f"{key} is not a key of rlvr train's config, so nothing would read it; {hint}"
                          f"`rlvr train --help all` lists every key")
    unread = unread_algo_keys(cfg.algo)
    if unread:
        raise ConfigError(f"{'; '.join(unread)}, not by algo={cfg.algo.name}: drop it, or choose an algorithm "
                          f"that reads it (trainer/algo_keys.py)")


def _looks_local(path: str) -> bool:
    """A filesystem path rather than a Hub name (`owner/name`: one slash, no leading dot or slash)."""
    return bool(path) and (path.startswith(("/", ".", "~")) or path.count("/") >= 2 or "\\" in path)


def _validate_strategy(cfg) -> None:
    """`trainer.strategy` (trainer/distributed.py): which algorithms run data parallel; `model.lora` with it."""
    strategy = cfg.trainer.strategy
    runs_under = ALGORITHMS[cfg.algo.name].strategies
    if strategy != "none" and strategy not in runs_under:
        supported = [name for name, algorithm in ALGORITHMS.items() if strategy in algorithm.strategies]
        raise ConfigError(f"trainer.strategy={strategy} supports algo={'|'.join(supported)}, not "
                          f"algo={cfg.algo.name} (trainer/algos/table.py says which strategies each runs under): "
                          f"use trainer.strategy={' or '.join(('none', *runs_under))}")
    if strategy != "none" and ALGORITHMS[cfg.algo.name].build_critic and cfg.algo.critic != "head":
        raise ConfigError(f"algo.critic={cfg.algo.critic} with trainer.strategy={strategy}: under torchrun PPO runs "
                          "with algo.critic=head (the separate critic model is one-process only)")
    from rlvr.trainer.models.lora import lora_on

    if lora_on(cfg.model.lora) and strategy == "fsdp2":
        raise ConfigError("model.lora.r > 0 runs with trainer.strategy=none or ddp, not fsdp2 (frozen base "
                          "weights and adapters in one FSDP unit are not supported here)")


def validate_world_size(cfg, world_size: int) -> None:
    """Each rank takes an equal, contiguous share of the step's prompts."""
    if cfg.train.prompts_per_step % world_size:
        raise ConfigError(f"train.prompts_per_step={cfg.train.prompts_per_step} must divide by the number of "
                          f"processes (WORLD_SIZE={world_size}) under trainer.strategy={cfg.trainer.strategy}")


def _validate_dpo(cfg) -> None:
    """DPO's keys (trainer/algos/dpo.py); `data` belongs to the algorithms that read offline data (algo=dpo)."""
    algo = cfg.algo
    if ALGORITHMS[algo.name].validate is not None:  # its own checks (sft's sources and data=FILE: algos/sft_data.py)
        return ALGORITHMS[algo.name].validate(cfg)
    if not ALGORITHMS[algo.name].offline_data:
        if cfg.data:
            readers = "|".join(name for name, row in ALGORITHMS.items() if row.reads_data)
            raise ConfigError(f"data={cfg.data} (offline preference or SFT data) is read only by algo={readers}, "
                              f"not algo={algo.name}")
        return
    checks = [  # each of DPOConfig's keys has its own range or choices on its field (trainer/config.py)
        (algo.label_smoothing == 0 or algo.loss_type == "sigmoid",
         f"algo.label_smoothing={algo.label_smoothing} (cDPO) applies to algo.loss_type=sigmoid, not {algo.loss_type!r}"),
        (bool(cfg.data) or cfg.train.completions_per_prompt >= 2,
         f"train.completions_per_prompt={cfg.train.completions_per_prompt}: online algo=dpo needs >= 2 "
         f"(pairs come from one prompt's completions)"),
        (not cfg.data or Path(cfg.data).is_file(), f"data={cfg.data}: no such file"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    if cfg.data:
        read_scored_completions(cfg.data)  # a bad line stops the run here, before any model is built


def validate_multi_turn(cfg, env) -> None:
    """A multi-turn environment (envs/multi_turn.py) trains with the policy-gradient algorithms and online DPO,
    whose losses read the loss mask. Refused by name: offline DPO (`data=`: its file holds one-turn completions,
    not trajectories with a mask) and DAPO's overlong penalty (it counts every completion token, not the
    sampled ones)."""
    if not is_multi_turn(env):
        return
    if ALGORITHMS[cfg.algo.name].offline_data and cfg.get("data"):
        raise ConfigError(f"algo={cfg.algo.name} data={cfg.data}: env={env.name} is multi-turn and offline data "
                          f"holds one-turn completions, not trajectories; drop data= to pair the policy's own "
                          f"trajectories online")
    if cfg.algo.get("overlong_buffer", 0):
        raise ConfigError(f"algo.overlong_buffer={cfg.algo.overlong_buffer}: env={env.name} is multi-turn and the "
                          f"overlong penalty does not yet tell sampled tokens from the environment's; set it to 0")


def validate_engine_groups(cfg) -> None:
    """A key of an engine group (`rollout.hf.*`, `rollout.vllm.*`, `rollout.server.*`) that the chosen engine does
    not read (rollout/factory.py ENGINES) is refused when set away from its default: it would change nothing."""
    from omegaconf import OmegaConf

    defaults = OmegaConf.structured(RolloutConfig)
    read = ENGINE_GROUPS[cfg.rollout.engine]
    for group in sorted(set().union(*ENGINE_GROUPS.values()) - set(read)):
        changed = [f"rollout.{group}.{key}={value}" for key, value in cfg.rollout[group].items()
                   if value != defaults[group][key]]
        if changed:
            raise ConfigError(f"{changed[0]}: rollout={cfg.rollout.engine} does not read rollout.{group}.* (it reads "
                              f"{' and '.join(f'rollout.{g}.*' for g in read)}); choose rollout={group} or leave "
                              f"rollout.{group} at its defaults")


def validate_lora_sync(cfg, need) -> None:
    """`rollout.vllm.lora_sync` (rollout/vllm.py): adapter sync needs adapters and the colocated vLLM engine."""
    mode = cfg.rollout.vllm.lora_sync
    if mode == "merged":
        return
    from rlvr.trainer.models.lora import adapter_sync_refusal, lora_on

    need(lora_on(cfg.model.lora), "rollout.vllm.lora_sync=adapter needs LoRA adapters to sync: set model.lora.r > 0")
    refusal = adapter_sync_refusal(cfg.model.lora)
    need(refusal is None, refusal)
    need(cfg.rollout.engine in ("vllm", "auto"),
         f"rollout.vllm.lora_sync=adapter runs with rollout=vllm; rollout={cfg.rollout.engine} "
         + ("samples from the adapter model itself" if cfg.rollout.engine == "hf"
            else "pushes merged weights only (adapter loading on servers is not supported yet)"))
    need(cfg.rollout.max_staleness == 0, f"rollout.vllm.lora_sync=adapter runs with the synchronous loop; "
         f"rollout.max_staleness={cfg.rollout.max_staleness} publishes merged weight snapshots")


def validate_async(cfg, need) -> None:
    """`rollout.max_staleness > 0` (experience/async_rollouts.py): only where stale samples are corrected."""
    k = cfg.rollout.max_staleness
    if k == 0:
        return
    need(ALGORITHMS[cfg.algo.name].corrects_staleness,
         f"rollout.max_staleness={k} needs an algorithm that corrects stale samples with rollout.importance_cap "
         f"({', '.join(n for n, a in ALGORITHMS.items() if a.corrects_staleness)}); algo={cfg.algo.name} does not")
    need(cfg.rollout.importance_cap is not None,
         f"rollout.max_staleness={k} needs rollout.importance_cap (the truncated importance weights that correct "
         f"stale samples); it is null")
