"""Typed schema of `rlvr train`'s config, so a misspelt key fails at start, naming the key.

Hydra merges `conf/train.yaml` and its groups (algo, env, model, rollout) onto these
dataclasses. Sizes carry their units: `prompts_per_step` counts prompts,
`completions_per_prompt` counts samples per prompt, `micro_batch_size` counts completions.
`env` stays an open mapping: each environment validates its own parameters when built
(its error names the parameter), and plugin environments bring parameters rlvr cannot know.

Over 300 lines on purpose: it is the whole schema, one dataclass per config section and per algorithm
family, each field with its unit and meaning; split across files, the keys a reader looks up together
(what `train.*` or `algo.*` accepts) would be in several places.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from rlvr.sandboxes.hosts import SandboxConfig
from rlvr.trainer.reward_config import RewardConfig


# ---- algo: one schema per family, chosen by the preset's defaults list (conf/algo/NAME.yaml) ----------------
# trainer/algo_keys.py maps each algo.name to its family and holds every check of algo.* keys. A key of
# another family is not a field here, so `algo=ppo algo.loss_type=ipo` fails at composition.


@dataclass
class AlgoSchema:
    """What every family has: the algorithm's name (trainer/algorithms.py). The composed `algo` node is the
    family's subclass; this base is what `train_schema` declares before the preset is merged onto it."""

    name: str = "grpo"


@dataclass
class PolicyGradientConfig(AlgoSchema):
    """reinforce, grpo, dr_grpo, dapo, gspo (grpo.py, reinforce.py, dynamic_sampling.py)."""

    name: str = "grpo"
    beta: float = 0.0  # KL coefficient to the reference; 0 loads no reference model
    kl_estimator: str = "k3"  # k1 | k2 | k3
    aggregation: str = "seq_mean_token_mean"  # token_mean | seq_mean_token_mean | seq_mean_token_sum_norm
    # the GRPO presets (reinforce has no ratio: no clip range, no mu)
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    scale_advantages_by_std: bool = True  # False: Dr. GRPO
    filter_zero_variance_groups: bool = False  # DAPO dynamic sampling: drop groups whose rewards are all equal
    max_resample_rounds: int = 0  # ... and sample up to this many further rounds of prompts to refill the batch
    mu: int = 1  # inner epochs over one batch; old logprobs computed once before them
    importance_level: str = "token"  # token | sequence (GSPO: one clipped ratio per sequence)
    # DAPO's soft overlong punishment (eq. 13): the last `overlong_buffer` tokens before rollout.max_new_tokens
    # cost up to `overlong_penalty` reward, linearly; 0 tokens: off
    overlong_buffer: int = 0
    overlong_penalty: float = 1.0
    # reinforce: the baseline subtracted from each completion's reward
    baseline: str = "rloo"  # none | mean (batch mean) | rloo (leave-one-out over the G completions)


@dataclass
class PPOConfig(AlgoSchema):
    """ppo (ppo.py)."""

    name: str = "ppo"
    beta: float = 0.0  # KL coefficient of the per-token penalty in the reward; 0 loads no reference model
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    aggregation: str = "seq_mean_token_mean"
    mu: int = 1  # epochs over one batch
    objective: str = "clip"  # clip | penalty (adaptive-KL PPO-penalty)
    gamma: float = 1.0  # GAE discount over tokens
    lam: float = 0.95  # GAE lambda
    critic: str = "head"  # head: a value head on the policy's trunk | model: a separate copy of the base model + head
    vf_coef: float = 0.1  # weight of the value loss
    clip_eps_value: Optional[float] = 0.2  # value clipping around the old values; null: off
    penalty_beta: float = 1.0  # PPO-penalty's initial KL(old || new) coefficient (adapted each step)
    kl_target: float = 0.01  # PPO-penalty's target KL d0


@dataclass
class NaturalGradientConfig(AlgoSchema):
    """trpo, npg (trpo.py)."""

    name: str = "trpo"
    aggregation: str = "seq_mean_token_mean"
    baseline: str = "rloo"  # none | mean | rloo, as REINFORCE's
    max_kl: float = 0.01  # trust-region size delta on the mean per-token KL(old || new)
    cg_iters: int = 10
    cg_damping: float = 0.1
    line_search_steps: int = 10  # trpo only; npg takes the full step
    backtrack_ratio: float = 0.5  # trpo only
    fisher_every: int = 1  # F is estimated on every k-th completion (OpenAI baselines' trpo_mpi: every 5th)


@dataclass
class DPOConfig(AlgoSchema):
    """dpo (dpo.py; conf/algo/dpo.yaml quotes each default's source)."""

    name: str = "dpo"
    beta: float = 0.1  # DPO's temperature on the implicit reward (IPO's tau), not a KL coefficient
    loss_type: str = "sigmoid"  # sigmoid (DPO; cDPO with label_smoothing > 0) | ipo
    label_smoothing: float = 0.0  # cDPO's probability that a preference label is flipped, in [0, 0.5)
    pair_strategy: str = "all"  # all (every chosen x rejected, capped) | best_vs_worst (one pair per prompt)
    max_pairs_per_prompt: int = 8
    min_margin: float = 0.0  # a pair needs chosen reward - rejected reward >= this (and > 0)
    length_match: bool = False  # prefer pairs of similar completion length
    dpo_updates_per_round: int = 1  # online: optimizer steps over each round's pairs
    pairs_per_step: int = 64  # offline (data=PATH): pairs per optimizer step


ALGO_SCHEMAS = {"policy_gradient": PolicyGradientConfig, "ppo": PPOConfig, "natural_gradient": NaturalGradientConfig,
                "dpo": DPOConfig}  # family -> schema; conf/algo/NAME.yaml names its family's in its defaults list


@dataclass
class ArchConfig:
    vocab_size: int = 512
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    max_positions: int = 256


@dataclass
class WarmStartConfig:
    target_accuracy: list = field(default_factory=lambda: [0.3, 0.6])
    max_steps: int = 3000
    batch_size: int = 32
    lr: float = 1e-3
    eval_every: int = 25
    eval_rows: int = 200
    max_new_tokens: int | None = None  # validation decoding; None = the env's rollout length cut to the context
    stop_on: str = "greedy"  # greedy: validation accuracy; transcripts: teacher-forced tool transcripts (warm_start.py)


@dataclass
class LoraConfig:
    r: int = 0  # 0: full fine-tuning; > 0: LoRA adapters of this rank, e.g. 16 (trainer/models/lora.py)
    alpha: float = 32.0  # scale alpha / r on B A
    dropout: float = 0.0
    target_modules: list = field(default_factory=lambda: ["all-linear"])  # peft names; all-linear: all but the head


@dataclass
class ModelConfig:
    name: str = "tiny"
    name_or_path: Optional[str] = None  # local HF directory or Hub name; null builds the tiny model
    arch: ArchConfig = field(default_factory=ArchConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    # recompute activations in backward (HF gradient_checkpointing_enable, use_reentrant=False): less memory, more time
    gradient_checkpointing: bool = False
    # none | bf16: the policy's forward passes under torch.autocast(bfloat16), weights and optimizer in float32;
    # allowed on CPU too (slower there without bf16 units); trainer/models/model.py
    autocast: str = "none"
    # chat: prompts through the tokenizer's chat template (refused when it has none) | plain: each message's text,
    # then a blank line, for a base model without a chat template (the template is saved with each checkpoint)
    prompt_format: str = "chat"
    # base | instruct: which prompt the built-in environments give this model (`env.prompt` follows it unless set;
    # envs/base.py PromptStyle). tiny: base (its warm start's format); hf and smollm2: instruct
    kind: str = "base"


@dataclass
class RolloutConfig:
    engine: str = "hf"  # hf | vllm | auto (vllm when it imports, else hf)
    # conf/rollout/*.yaml: the environment's default_max_new_tokens and truncated_reward (trainer/truncation.py);
    # null here, or given as null: the same, filled in when the run starts
    max_new_tokens: Optional[int] = None
    truncated_reward: Optional[str] = None  # what a completion cut at max_new_tokens earns: zero | keep
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: list = field(default_factory=list)
    # Truncated importance weights min(pi_trainer / pi_engine, cap) on the surrogate; null turns them off.
    importance_cap: Optional[float] = 2.0
    # A sampling seed per training prompt, keyed by its place in the step's draw: vLLM then samples the same
    # completions at any world size and after a resume (generation speed within noise: BENCHMARKS.md).
    # hf ignores it (one RNG per batch). false: vLLM samples from its engine seed, as before.
    seed_per_prompt: bool = True
    # rollout=hf, G > 1 samples: each prompt's prefill computed once and its KV cache repeated G times
    # (rollout/hf.py; the same samples, logprobs within 1e-5). false: generate prefills every copy, as before.
    prefill_once: bool = True
    # vLLM only (ignored by hf); the first three matter on GPUs.
    gpu_memory_utilization: float = 0.3  # share of GPU memory vLLM takes (weights + KV cache)
    tensor_parallel_size: int = 1
    enable_sleep_mode: bool = False  # free vLLM's GPU memory during the update (sleep/wake)
    dtype: str = "float32"  # vLLM's compute dtype; float32 keeps its logprobs within 1e-3 of the trainer's
    # vLLM's KV cache (rollout/kv_cache.py): auto = on the CPU, sized to the run (its batch, or the held-out
    # eval's if larger, at the model's full context); a number = bytes; null = vLLM's own (VLLM_CPU_KVCACHE_SPACE
    # GiB, else gpu_memory_utilization of RAM). On a GPU auto leaves it to gpu_memory_utilization.
    kv_cache_bytes: Any = "auto"
    # With model.lora, what each sync pushes to vLLM: merged (W + alpha/r B A, full weights) | adapter (the adapter
    # alone, served by vLLM's LoRA support; rollout=vllm only). Measured: BENCHMARKS.md "LoRA sync".
    lora_sync: str = "merged"
    # Asynchronous rollouts (rollout/async_rollouts.py): a producer samples and scores up to this many steps ahead
    # of the trainer; a trained sample is at most this many versions old. 0: the synchronous loop.
    max_staleness: int = 0
    async_timeout_s: float = 1800.0  # with max_staleness > 0: the longest any wait for the producer may take
    # with max_staleness > 0 and rollout=hf, where the producer's engine samples: process (a child process on a core
    # of its own, rollout/hf_process.py) | thread (a thread of the trainer's process, sharing its interpreter's GIL)
    producer: str = "process"
    # rollout=server only (rollout/server.py, rollout/server_process.py): running servers' base URLs, or none to
    # start num_servers `vllm serve` processes on 127.0.0.1
    endpoints: list = field(default_factory=list)
    num_servers: int = 1
    request_timeout_s: float = 120.0  # the longest one generate request (or weight load) may take on one server
    server_start_timeout_s: float = 600.0  # the longest a started server may take to answer /health
    server_threads: int = 1  # CPU threads of each started server (OMP_NUM_THREADS)
    weights_dir: Optional[str] = None  # where weights are written for the servers to load; null: a temporary directory


@dataclass
class TrainLoopConfig:
    """`train.*`: the loop's length, each step's sizes, and how often it saves, evaluates and logs samples."""

    steps: int = 200
    prompts_per_step: int = 8
    completions_per_prompt: int = 8
    micro_batch_size: int = 64  # completions per forward/backward; the step accumulates over micro-batches
    # > 0: the policy's log-softmax and gather over the vocabulary run this many completion tokens at a time,
    # never holding the float32 [tokens, vocab] matrix (trainer/models/chunked_logprobs.py); 0: all at once
    logprob_chunk_tokens: int = 0
    # > 0: micro-batches filled by this many (padded) tokens, rows sorted by length, instead of micro_batch_size
    # rows; the same loss and gradient, less padding computed (trainer/algos/token_budget.py); 0: off
    max_tokens_per_micro_batch: int = 0
    # true (with max_tokens_per_micro_batch): each micro-batch's rows run as one packed row, positions restarting per
    # sequence and attention kept within each (trainer/models/packing.py); no padding computed, the same loss
    pack_sequences: bool = False
    # auto (the local rank's GPU when CUDA is available, else the CPU) | cpu | cuda | cuda:N: where the policy,
    # reference and critic train (trainer/device.py)
    device: str = "auto"
    save_every: int = 100
    eval_every: int = 50
    eval_prompts: int = 200
    # prompts whose completions go to samples.jsonl each step (offline DPO: pairs); was train.samples_per_step
    logged_prompts_per_step: int = 2


@dataclass
class CurriculumConfig:
    """`curriculum.*`: a difficulty controller over the training prompts (trainer/curriculum.py); off by default."""

    enabled: bool = False
    # easiest first, each a mapping over the environment's difficulty parameters (countdown: num_numbers,
    # max_number; arithmetic: digits, ops; reasoning_gym: config); empty: the environment's own ladder
    levels: list = field(default_factory=list)
    band: list = field(default_factory=lambda: [0.2, 0.8])  # the step pass rate (status/correct) to keep within
    window: int = 4  # steps at a level whose mean pass rate decides a move; a level is held at least this long
    start_level: Optional[int] = None  # index into the levels; null: the configured environment's level, else 0
    # the share of each step's prompts always drawn from the configured task, whatever the level (0: none)
    target_share: float = 0.0


@dataclass
class OptimConfig:
    lr: float = 1e-4
    weight_decay: float = 0.0
    betas: list = field(default_factory=lambda: [0.9, 0.999])
    max_grad_norm: float = 1.0
    warmup_steps: int = 0
    schedule: str = "constant"  # constant | linear | cosine (after warmup)


@dataclass
class WandbConfig:
    project: str = "rlvr"
    entity: Optional[str] = None
    mode: str = "offline"  # offline | online | disabled; offline needs no network (`wandb sync` later)


@dataclass
class StrategyConfig:
    """`trainer.*`: how the run is spread over processes."""

    # none: one process. ddp | fsdp2: under torchrun, data parallel over ranks (trainer/distributed.py)
    strategy: str = "none"


@dataclass
class RunConfig:
    """The whole config of one `rlvr train` run (conf/train.yaml with its groups merged on)."""

    algo: AlgoSchema = field(default_factory=AlgoSchema)  # conf/algo/NAME.yaml merges its family's subclass on
    env: Any = field(default_factory=lambda: {"name": "arithmetic"})
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: StrategyConfig = field(default_factory=StrategyConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)  # conf/reward/*.yaml, trainer/reward_config.py
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)  # trainer/curriculum.py
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # Docker engines for code (rlvr.sandboxes.hosts)
    seed: int = 0
    output_dir: str = "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    resume: Optional[str] = None  # a run directory; continue from its last checkpoint
    overwrite: bool = False  # true: a new run replaces the run already in output_dir (refused otherwise)
    threads: int = 0  # torch CPU threads; 0 leaves torch's default
    data: Optional[str] = None  # algo=dpo only: a scored-completions JSONL for offline DPO (trainer/algos/dpo.py)
    logger: list = field(default_factory=list)  # besides metrics.jsonl: tensorboard, wandb (trainer/loggers.py)
    wandb: WandbConfig = field(default_factory=WandbConfig)


RENAMED_KEYS = {"train.samples_per_step": "train.logged_prompts_per_step"}  # old name -> new (it counts prompts)


def refuse_renamed_keys(overrides: list[str]) -> None:
    """A key given by its old name (RENAMED_KEYS) is refused in one line that names the new one."""
    from rlvr.errors import ConfigError

    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in RENAMED_KEYS:
            raise ConfigError(f"{key} is now {RENAMED_KEYS[key]} (the same setting, named for what it counts): "
                              f"pass {RENAMED_KEYS[key]}={override.split('=', 1)[1] if '=' in override else '...'}")


def unknown_keys(cfg, schema=None, prefix: str = "") -> list[tuple[str, list[str]]]:
    """(dotted key, its siblings in the schema) for each key of `cfg` that `RunConfig` lacks.

    Hydra refuses `train.stepz=3`, but `+train.stepz=3` (the fix its message suggests) adds the key,
    and nothing would read it. `env` is open (each environment checks its own parameters) and is skipped.
    """
    from dataclasses import is_dataclass

    from omegaconf import DictConfig, OmegaConf

    schema = OmegaConf.structured(RunConfig) if schema is None else schema
    found = []
    for key in cfg:
        path = f"{prefix}{key}"
        if key not in schema:
            found.append((path, [str(k) for k in schema]))
        elif isinstance(cfg[key], DictConfig) and isinstance(schema[key], DictConfig) \
                and is_dataclass(OmegaConf.get_type(schema[key])):
            kind = OmegaConf.get_type(cfg[key])  # `algo`: the family's subclass of the declared AlgoSchema
            narrower = is_dataclass(kind) and issubclass(kind, OmegaConf.get_type(schema[key]))
            found.extend(unknown_keys(cfg[key], OmegaConf.structured(kind) if narrower else schema[key], f"{path}."))
    return found


def env_default(name: str, attribute: str, prompt: str | None = None):
    """`${rlvr.env:NAME,ATTRIBUTE,PROMPT}` in conf/rollout/*.yaml: environment NAME's class attribute (envs/base.py
    `default_max_new_tokens`, `truncated_reward`) under prompt style PROMPT (`env.prompt`, where the environment
    has styles), or the base environment's for a plugin that declares none."""
    from rlvr.envs.base import Env
    from rlvr.envs.registry import env_registry

    try:
        factory = env_registry.get(name)
    except Exception:  # noqa: BLE001 - an unknown or broken env is refused, naming it, when it is built
        factory = None
    if isinstance(factory, type) and issubclass(factory, Env):
        return factory.style_default(attribute, prompt)
    return getattr(factory, attribute, getattr(Env, attribute))


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("rlvr.env", env_default, replace=True)


def register_schemas() -> None:
    register_resolvers()
    store = ConfigStore.instance()
    store.store(name="train_schema", node=RunConfig)
    for family, schema in ALGO_SCHEMAS.items():  # conf/algo/NAME.yaml: `defaults: [/algo_schema/FAMILY@_here_]`
        store.store(group="algo_schema", name=family, node=schema)
