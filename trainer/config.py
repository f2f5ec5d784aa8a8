"""Typed schema of `rlvr train`'s config, so a misspelt key fails at start, naming the key.

Hydra merges `conf/train.yaml` and its groups (algo, env, model, rollout) onto these
dataclasses. Sizes carry their units: `prompts_per_step` counts prompts,
`completions_per_prompt` counts samples per prompt, `micro_batch_size` counts completions.
`env` stays an open mapping: each environment validates its own parameters when built
(its error names the parameter), and plugin environments bring parameters rlvr cannot know.

The string under each field is its documentation, and the only one: its first line is what
`rlvr train --help` prints beside the key and its default (rlvr/help.py reads it), the lines after it
say more for a reader of this file. tests/rlvr/test_help.py fails for a field without one.

Over 500 lines on purpose: it is the whole schema, one dataclass per config section and per algorithm
family, each field with its unit and meaning; split across files, the keys a reader looks up together
(what `train.*` or `algo.*` accepts) would be in several places.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from rlvr.sandboxes.hosts import SandboxConfig
from rlvr.trainer.field_rules import rule
from rlvr.trainer.loggers import LOGGERS
from rlvr.trainer.truncation import TRUNCATED_REWARDS

# Choices declared with their keys. The modules that implement them import torch, which the schema (and `--help`)
# must not: tests/trainer/test_field_rules.py holds each tuple equal to its implementation's.
SCHEDULES = ("constant", "linear", "cosine")  # trainer/algos/update.py learning_rate_schedule
WANDB_MODES = ("offline", "online", "disabled")  # wandb.init(mode=...)
PARALLEL_STRATEGIES = ("none", "ddp", "fsdp2")  # trainer/distributed.py STRATEGIES
REWARD_KINDS = ("env", "random", "format_only")  # trainer/experience/rewards.py control_rewards (env: none)
SCREEN_MODES = ("zero", "drop_group")  # trainer/experience/rewards.py SCREEN_MODES
DPO_LOSS_TYPES = ("sigmoid", "ipo")  # trainer/algos/dpo_loss.py LOSS_TYPES
PAIR_STRATEGIES = ("best_vs_worst", "all")  # trainer/algos/pairs.py STRATEGIES
KL_ESTIMATORS = ("k1", "k2", "k3")  # trainer/algos/losses.py KL_ESTIMATORS
AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")  # trainer/algos/losses.py
IMPORTANCE_LEVELS = ("token", "sequence")  # trainer/algos/losses.py IMPORTANCE_LEVELS
BASELINES = ("none", "mean", "rloo")  # trainer/algos/advantages.py BASELINES
CRITICS = ("head", "model")  # trainer/models/critic.py CRITICS
OBJECTIVES = ("clip", "penalty")  # trainer/algos/ppo.py: PPO-clip | adaptive-KL PPO-penalty
DISTILL_LOSSES = ("reverse_kl", "gkd")  # trainer/algos/distill_loss.py LOSSES


# ---- algo: one schema per family, chosen by the preset's defaults list (conf/algo/NAME.yaml) ----------------
# trainer/algo_keys.py maps each algo.name to its family and holds the checks of algo.* keys that span several
# keys; a key's own range or choices is on its field. A key of another family is not a field here, so
# `algo=ppo algo.loss_type=ipo` fails at composition.


@dataclass
class AlgoSchema:
    """What every family has: the algorithm's name (trainer/algos/table.py). The composed `algo` node is the
    family's subclass; this base is what `train_schema` declares before the preset is merged onto it."""

    name: str = "grpo"
    """The algorithm, chosen with algo=NAME (its preset conf/algo/NAME.yaml)."""


@dataclass
class PolicyGradientConfig(AlgoSchema):
    """reinforce, grpo, dr_grpo, dapo, gspo (grpo.py, reinforce.py; dynamic sampling: experience/rewards.py)."""

    name: str = "grpo"
    beta: float = field(default=0.0, metadata=rule(ge=0))
    """KL coefficient to the frozen reference; 0 loads no reference model."""
    kl_estimator: str = field(default="k3", metadata=rule(choices=KL_ESTIMATORS))
    """Estimator of that KL per token: k1 | k2 | k3 (trainer/algos/losses.py)."""
    aggregation: str = field(default="seq_mean_token_mean", metadata=rule(choices=AGGREGATIONS))
    """Loss mean: token_mean | seq_mean_token_mean | seq_mean_token_sum_norm.

    How the per-token loss becomes one number (trainer/algos/losses.py `aggregate`): token_mean, over every
    token of the batch (DAPO); seq_mean_token_mean, over each sequence's tokens, then over sequences (GRPO);
    seq_mean_token_sum_norm, the token sum over sequences x rollout.max_new_tokens (Dr. GRPO)."""
    clip_eps_low: float = field(default=0.2, metadata=rule(ge=0, lt=1))
    """Lower clip range: ratio kept above 1 - clip_eps_low."""
    clip_eps_high: float = field(default=0.2, metadata=rule(ge=0))
    """Upper clip range: ratio kept below 1 + clip_eps_high (DAPO: 0.28)."""
    scale_advantages_by_std: bool = True
    """Divide each group's advantages by its reward std; false: Dr. GRPO."""
    filter_zero_variance_groups: bool = False
    """DAPO dynamic sampling: drop groups whose rewards are all equal."""
    max_resample_rounds: int = field(default=0, metadata=rule(ge=0))
    """With that filter: up to this many more rounds to refill the batch."""
    mu: int = field(default=1, metadata=rule(ge=1))
    """Updates (inner epochs) per batch; old logprobs computed once before."""
    importance_level: str = field(default="token", metadata=rule(choices=IMPORTANCE_LEVELS))
    """Importance ratio per token | sequence (GSPO: one clipped ratio each)."""
    overlong_buffer: int = field(default=0, metadata=rule(ge=0))
    """DAPO: penalise the last N tokens before max_new_tokens; 0: off.

    DAPO's soft overlong punishment (eq. 13): the last `overlong_buffer` tokens before rollout.max_new_tokens
    cost up to `overlong_penalty` reward, linearly."""
    overlong_penalty: float = field(default=1.0, metadata=rule(ge=0))
    """Reward lost at max_new_tokens, linearly over overlong_buffer tokens."""
    baseline: str = field(default="rloo", metadata=rule(choices=BASELINES))
    """reinforce's baseline: none | mean (of the batch) | rloo (leave-one-out)."""


@dataclass
class PPOConfig(AlgoSchema):
    """ppo (ppo.py)."""

    name: str = "ppo"
    beta: float = field(default=0.0, metadata=rule(ge=0))
    """KL coefficient of the per-token penalty in the reward; 0: no reference."""
    clip_eps_low: float = field(default=0.2, metadata=rule(ge=0, lt=1))
    """Lower clip range: ratio kept above 1 - clip_eps_low."""
    clip_eps_high: float = field(default=0.2, metadata=rule(ge=0))
    """Upper clip range: ratio kept below 1 + clip_eps_high."""
    aggregation: str = field(default="seq_mean_token_mean", metadata=rule(choices=AGGREGATIONS))
    """Loss mean: token_mean | seq_mean_token_mean | seq_mean_token_sum_norm.

    As PolicyGradientConfig's."""
    mu: int = field(default=1, metadata=rule(ge=1))
    """Epochs over one batch."""
    objective: str = field(default="clip", metadata=rule(choices=OBJECTIVES))
    """clip (PPO-clip) | penalty (adaptive-KL PPO-penalty)."""
    gamma: float = field(default=1.0, metadata=rule(ge=0, le=1))
    """GAE discount over tokens."""
    lam: float = field(default=0.95, metadata=rule(ge=0, le=1))
    """GAE lambda."""
    critic: str = field(default="head", metadata=rule(choices=CRITICS))
    """head: a value head on the policy's trunk | model: a separate copy."""
    vf_coef: float = 0.1
    """Weight of the value loss."""
    clip_eps_value: Optional[float] = 0.2
    """Value clipping around the old values; null: off."""
    penalty_beta: float = field(default=1.0, metadata=rule(ge=0))
    """PPO-penalty's initial KL(old || new) coefficient (adapted each step)."""
    kl_target: float = field(default=0.01, metadata=rule(gt=0))
    """PPO-penalty's target KL d_targ."""


@dataclass
class NaturalGradientConfig(AlgoSchema):
    """trpo, npg (trpo.py)."""

    name: str = "trpo"
    aggregation: str = field(default="seq_mean_token_mean", metadata=rule(choices=AGGREGATIONS))
    """Loss mean: token_mean | seq_mean_token_mean | seq_mean_token_sum_norm.

    As PolicyGradientConfig's."""
    baseline: str = field(default="rloo", metadata=rule(choices=BASELINES))
    """Subtracted from each reward: none | mean | rloo (leave-one-out)."""
    max_kl: float = field(default=0.01, metadata=rule(gt=0))
    """Trust-region size delta on the mean per-token KL(old || new)."""
    cg_iters: int = field(default=10, metadata=rule(ge=1))
    """Conjugate-gradient iterations that solve F x = g for the step direction."""
    cg_damping: float = 0.1
    """Damping added to the Fisher matrix F (as in the TRPO authors' code)."""
    line_search_steps: int = 10
    """trpo: line-search tries before keeping the old weights (npg: none)."""
    backtrack_ratio: float = field(default=0.5, metadata=rule(gt=0, lt=1))
    """trpo: the factor each line-search step shrinks the step by."""
    fisher_every: int = field(default=1, metadata=rule(ge=1))
    """Estimate F on every k-th completion (baselines' trpo_mpi: every 5th)."""


@dataclass
class DPOConfig(AlgoSchema):
    """dpo (dpo.py; conf/algo/dpo.yaml quotes each default's source)."""

    name: str = "dpo"
    beta: float = field(default=0.1, metadata=rule(
        gt=0, message="{key}={value}: DPO's beta (its temperature) must be > 0"))
    """DPO's temperature on the implicit reward (IPO's tau); not a KL weight."""
    loss_type: str = field(default="sigmoid", metadata=rule(choices=DPO_LOSS_TYPES))
    """sigmoid (DPO; cDPO with label_smoothing > 0) | ipo."""
    label_smoothing: float = field(default=0.0, metadata=rule(ge=0, lt=0.5))
    """cDPO's probability that a preference label is flipped, in [0, 0.5)."""
    pair_strategy: str = field(default="all", metadata=rule(choices=PAIR_STRATEGIES))
    """all (every chosen x rejected, capped) | best_vs_worst (one per prompt)."""
    max_pairs_per_prompt: int = field(default=8, metadata=rule(ge=1))
    """The most pairs one prompt's group gives."""
    min_margin: float = field(default=0.0, metadata=rule(ge=0))
    """A pair needs chosen reward - rejected reward >= this (and > 0)."""
    length_match: bool = False
    """Prefer pairs of similar completion length (against DPO's length bias)."""
    dpo_updates_per_round: int = field(default=1, metadata=rule(ge=1))
    """Online: optimizer steps over each round's pairs."""
    pairs_per_step: int = field(default=64, metadata=rule(ge=1))
    """Offline (data=PATH): pairs per optimizer step."""


@dataclass
class DistillConfig(AlgoSchema):
    """distill (distill.py, distill_loss.py; the teacher: trainer/models/teacher.py)."""

    name: str = "distill"
    teacher: Optional[str] = None
    """The frozen teacher: a checkpoint or run directory, a .gguf, smollm2, or a Hub name.

    It must share the student's tokenizer (refused at start otherwise, naming both); loaded in process, its
    memory printed at start."""
    loss: str = field(default="reverse_kl", metadata=rule(choices=DISTILL_LOSSES))
    """reverse_kl (the sampled tokens' advantage log q - log pi) | gkd (JSD over the vocabulary)."""
    jsd_beta: float = field(default=0.5, metadata=rule(ge=0, le=1))
    """gkd's generalized-JSD beta in [0, 1]: 0 forward KL(teacher||student), 1 reverse KL (TRL's beta)."""
    reward_weight: float = field(default=0.0, metadata=rule(ge=0))
    """Weight of the verifier reward's group advantage added to every token's; 0: the teacher alone."""
    aggregation: str = field(default="token_mean", metadata=rule(choices=AGGREGATIONS))
    """Loss mean: token_mean | seq_mean_token_mean | seq_mean_token_sum_norm.

    As PolicyGradientConfig's; token_mean weights every sampled token's divergence alike."""


@dataclass
class SFTConfig(AlgoSchema):
    """sft (sft.py, sft_data.py, sft_loss.py; conf/algo/sft.yaml quotes each default's source)."""

    name: str = "sft"
    source: str = "auto"
    """What it trains on: auto (data when data=FILE is given, else reference) | reference | data | rft."""
    keep_per_prompt: int = 1
    """rft: the most distinct verified-correct completions kept per prompt."""


ALGO_SCHEMAS = {"policy_gradient": PolicyGradientConfig, "ppo": PPOConfig, "natural_gradient": NaturalGradientConfig,
                "dpo": DPOConfig, "distill": DistillConfig,
                "sft": SFTConfig}  # family -> schema; conf/algo/NAME.yaml names its family's in its defaults list


@dataclass
class ArchConfig:
    """`model.arch.*`: the tiny model's Qwen2 shape, used when model.name_or_path is null."""

    vocab_size: int = 512
    """Tokenizer vocabulary, trained locally on the environment's text."""
    hidden_size: int = 128
    """Width of the residual stream."""
    num_layers: int = 4
    """Transformer layers."""
    num_heads: int = 4
    """Attention heads."""
    num_kv_heads: int = 2
    """Key/value heads (grouped-query attention)."""
    intermediate_size: int = 384
    """Width of each MLP."""
    max_positions: int = 256
    """Context length in tokens (prompt + completion)."""


@dataclass
class WarmStartConfig:
    """`model.warm_start.*`: the tiny model's supervised start (trainer/warm_start.py)."""

    target_accuracy: list = field(default_factory=lambda: [0.3, 0.6])
    """[low, high]: stop once validation accuracy is in this band."""
    max_steps: int = 3000
    """The most supervised steps before giving up on the band."""
    batch_size: int = 32
    """Reference solutions per supervised step."""
    lr: float = 1e-3
    """Learning rate of the warm start."""
    eval_every: int = 25
    """Steps between validation checks."""
    eval_rows: int = 200
    """Validation rows per check."""
    max_new_tokens: int | None = None
    """Validation decoding length; null: the env's, cut to the context."""
    stop_on: str = field(default="greedy", metadata=rule(choices=("greedy", "transcripts"),
                                                         message="{key}={value!r} must be greedy or transcripts"))
    """The band's measure: greedy (validation accuracy) | transcripts.

    transcripts: teacher-forced tool transcripts, for a multi-turn tool environment (warm_start.py)."""


@dataclass
class LoraConfig:
    """`model.lora.*`: LoRA adapters instead of full fine-tuning (trainer/models/lora.py)."""

    r: int = 0
    """0: full fine-tuning; > 0: LoRA adapters of this rank, e.g. 16."""
    alpha: float = 32.0
    """Adapter scale: B A is multiplied by alpha / r."""
    dropout: float = 0.0
    """Dropout on the adapters' input (trainer and sampler then disagree)."""
    target_modules: list = field(default_factory=lambda: ["all-linear"])
    """peft module names to adapt; all-linear: every linear layer but the head."""
    peft: Any = None
    """A `peft.LoraConfig`'s fields, passed to peft as they are, e.g. {use_dora: true, modules_to_save: [lm_head]}.

    Given, LoRA is on with peft's own defaults for what it leaves out; a short key above set off its default
    fills its field (r, lora_alpha, lora_dropout, target_modules), and a field set both ways is refused naming
    both. rlvr.train(peft_config=LoraConfig(...)) sets it (trainer/models/lora.py)."""


@dataclass
class ModelConfig:
    """`model.*`: the policy (trainer/models/model.py)."""

    name: str = "tiny"
    """The model preset, chosen with model=NAME (conf/model/NAME.yaml)."""
    name_or_path: Optional[str] = None
    """Local HF directory, .gguf file or Hub name; null builds the tiny model."""
    arch: ArchConfig = field(default_factory=ArchConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    gradient_checkpointing: bool = False
    """Recompute activations in backward: less memory, more time.

    Hugging Face's gradient_checkpointing_enable with use_reentrant=False."""
    autocast: str = field(default="none", metadata=rule(choices=("none", "bf16", "auto")))
    """none | bf16 | auto: forward passes under bf16 autocast, weights in float32.

    The optimizer stays in float32 too; allowed on CPU (slower there without bf16 units); trainer/models/model.py.
    auto: bf16 where the device computes bf16 in hardware (a CUDA GPU that reports it, a CPU with AVX512-BF16 or
    AMX), else none; the start log says which (trainer/device.py)."""
    prompt_format: str = field(default="chat", metadata=rule(choices=("chat", "plain")))
    """chat: the tokenizer's chat template | plain: the texts (base models).

    chat is refused for a tokenizer without a template; plain joins each message's text with a blank line.
    The template is saved with each checkpoint."""
    kind: str = field(default="base", metadata=rule(choices=("base", "instruct"), message=(
        "{key}={value!r} must be base or instruct (which prompt the built-in environments give the model)")))
    """base | instruct: which prompt the built-in environments give the model.

    `env.prompt` follows it unless set (envs/base.py PromptStyle). tiny: base (its warm start's format);
    hf and smollm2: instruct."""


@dataclass
class HFRolloutConfig:
    """`rollout.hf.*`: Hugging Face generate (rollout/hf.py, rollout/hf_process.py)."""

    prefill_once: bool = True
    """rollout=hf: one prefill per prompt, its KV cache copied for G samples.

    The same samples and logprobs within 1e-5 (rollout/hf.py); false: generate prefills every copy."""
    producer: str = field(default="process", metadata=rule(choices=("process", "thread"),
                                                           message="{key}={value!r} must be process or thread"))
    """Async, rollout=hf: process (a core of its own) | thread (shares GIL).

    process: a child process on a core of its own (rollout/hf_process.py); thread: a thread of the trainer's
    process, sharing its interpreter's GIL."""


@dataclass
class VLLMRolloutConfig:
    """`rollout.vllm.*`: vLLM's settings (rollout/vllm.py; the started servers of rollout=server take dtype and
    kv_cache_bytes)."""

    gpu_memory_utilization: float = field(default=0.3, metadata=rule(gt=0, le=1))
    """vLLM: share of GPU memory it takes (weights + KV cache)."""
    tensor_parallel_size: int = field(default=1, metadata=rule(ge=1))
    """vLLM: GPUs each engine's model is split over."""
    enable_sleep_mode: bool = False
    """vLLM: free its GPU memory during the update (sleep, then wake)."""
    dtype: str = "float32"
    """vLLM's compute dtype; float32 keeps its logprobs near the trainer's."""
    kv_cache_bytes: Any = "auto"
    """vLLM's KV cache: auto (sized to the run on CPU) | bytes | null (vLLM's).

    auto = on the CPU, sized to the run (its batch, or the held-out eval's if larger, at the model's full context);
    a number = bytes; null = vLLM's own (VLLM_CPU_KVCACHE_SPACE GiB, else gpu_memory_utilization of RAM). On a GPU
    auto leaves it to gpu_memory_utilization (rollout/kv_cache.py)."""
    lora_sync: str = field(default="merged", metadata=rule(choices=("merged", "adapter")))
    """With model.lora: merged (full weights) | adapter (rollout=vllm only).

    adapter pushes the adapter alone, served by vLLM's LoRA support. Measured: BENCHMARKS.md "LoRA sync"."""


@dataclass
class ServerRolloutConfig:
    """`rollout.server.*`: vLLM servers over HTTP (rollout/server.py, rollout/server_process.py)."""

    endpoints: list = field(default_factory=list)
    """rollout=server: running servers' base URLs; []: start num_servers here.

    rollout/server.py, rollout/server_process.py: started servers are `vllm serve` processes on 127.0.0.1."""
    num_servers: int = 1
    """rollout=server without endpoints: `vllm serve` processes to start."""
    request_timeout_s: float = 120.0
    """rollout=server: the longest one request or weight load may take."""
    start_timeout_s: float = 600.0
    """rollout=server: the longest a started server may take to answer /health."""
    threads: int = 1
    """rollout=server: CPU threads of each started server (OMP_NUM_THREADS)."""
    weights_dir: Optional[str] = None
    """rollout=server: where weights go for the servers; null: a temp dir."""


@dataclass
class RolloutConfig:
    """`rollout.*`: how completions are sampled (trainer/rollout/)."""

    engine: str = "hf"
    """The engine: rollout=hf | vllm | server | auto (vllm if installed)."""
    max_new_tokens: Optional[int] = field(default=None, metadata=rule(ge=1, note="or null: the environment's default"))
    """Most tokens per completion; null: the environment's default.

    conf/rollout/*.yaml fill in the environment's default_max_new_tokens (and truncated_reward) when the run
    starts; given as null on the command line: the same."""
    truncated_reward: Optional[str] = field(default=None, metadata=rule(
        choices=TRUNCATED_REWARDS, note="or null: the environment's default"))
    """What a completion cut at max_new_tokens earns: zero | keep; null: env's."""
    temperature: float = field(default=1.0, metadata=rule(gt=0))
    """Sampling temperature (logprobs are computed at the same temperature)."""
    top_p: float = field(default=1.0, metadata=rule(gt=0, le=1))
    """Nucleus sampling: sample from the top-p probability mass; 1: off."""
    top_k: int = 0
    """Sample among the k likeliest tokens; 0: off."""
    min_p: float = 0.0
    """Drop tokens below min_p x the top token's probability; 0: off.

    In [0, 1]; applied after temperature, before top-k/top-p, alike on hf, vllm and server
    (rollout/generation_settings.py). Held-out greedy evals are unaffected (it never moves the argmax)."""
    repetition_penalty: float = 1.0
    """> 0; > 1 penalises tokens already in prompt or completion; 1: off.

    vLLM's (and transformers') rule: a seen token's logit divided by it when positive, multiplied when not, on
    every engine alike (rollout/generation_settings.py). It applies to the run's held-out greedy eval and to
    `rlvr eval` too: the policy is evaluated as it samples."""
    generation_kwargs: Any = None
    """More of the engine's own generation keys, as {KEY:V,...}; null: none.

    Given whole (rollout.generation_kwargs={no_repeat_ngram_size:3}) and passed as it is. hf: transformers' GenerationConfig fields (e.g. no_repeat_ngram_size); vllm: vllm.SamplingParams fields (e.g.
    presence_penalty); server: /v1/completions fields. A key the engine does not know, one rlvr sets itself
    (temperature, top_p, max_new_tokens, ...: use rollout.KEY) or one that breaks the rollout (beam search) is
    refused at start, by name (rollout/generation_settings.py). Every sampling of the run gets them, evals too."""
    stop: list = field(default_factory=list)
    """Strings that end a completion early, e.g. ['</answer>']."""
    importance_cap: Optional[float] = field(default=2.0, metadata=rule(ge=1, note="or null to turn the correction off"))
    """Truncated importance weight min(pi_trainer / pi_engine, cap); null: off."""
    seed_per_prompt: bool = True
    """A sampling seed per training prompt: vLLM samples alike at any scale.

    Keyed by the prompt's place in the step's draw: vLLM then samples the same completions at any world size and
    after a resume (generation speed within noise: BENCHMARKS.md). hf ignores it (one RNG per batch). false: vLLM
    samples from its engine seed."""
    max_staleness: int = field(default=0, metadata=rule(ge=0, note="0: the synchronous loop"))
    """Async rollouts: sample up to this many steps ahead; 0: synchronous.

    A producer samples and scores ahead of the trainer (experience/async_rollouts.py); a trained sample is at most
    this many policy versions old."""
    async_timeout_s: float = field(default=1800.0, metadata=rule(gt=0))
    """With max_staleness > 0: the longest any wait for the producer may take."""
    hf: HFRolloutConfig = field(default_factory=HFRolloutConfig)
    """`rollout.hf.*`: what only rollout=hf reads."""
    vllm: VLLMRolloutConfig = field(default_factory=VLLMRolloutConfig)
    """`rollout.vllm.*`: vLLM's own settings, colocated (rollout=vllm) or in started servers (rollout=server)."""
    server: ServerRolloutConfig = field(default_factory=ServerRolloutConfig)
    """`rollout.server.*`: what only rollout=server reads."""


@dataclass
class TrainLoopConfig:
    """`train.*`: the loop's length, each step's sizes, and how often it saves, evaluates and logs samples."""

    steps: int = field(default=200, metadata=rule(ge=1))
    """Optimizer steps of the run (each samples a fresh batch)."""
    prompts_per_step: int = field(default=8, metadata=rule(ge=1))
    """Prompts drawn per step."""
    completions_per_prompt: int = 8
    """Completions sampled per prompt: the group size G."""
    micro_batch_size: int = field(default=64, metadata=rule(ge=1))
    """Completions per forward/backward; a step accumulates over micro-batches."""
    logprob_chunk_tokens: int = field(default=0, metadata=rule(ge=0, note="0: off"))
    """> 0: vocabulary log-softmax this many tokens at a time; 0: all at once.

    Never holds the float32 [tokens, vocab] matrix (trainer/models/chunked_logprobs.py)."""
    max_tokens_per_micro_batch: int = field(default=0, metadata=rule(ge=0, note="0: off"))
    """> 0: micro-batches of this many tokens, not micro_batch_size rows.

    Rows sorted by length; the same loss and gradient, less padding computed (trainer/algos/token_budget.py)."""
    pack_sequences: bool = False
    """With max_tokens_per_micro_batch: run each micro-batch as one packed row.

    Positions restart per sequence and attention stays within each (trainer/models/packing.py); no padding
    computed, the same loss."""
    device: str = "auto"
    """Where the policy trains: auto (GPU if any, else CPU) | cpu | cuda[:N].

    The reference and critic go there too (trainer/device.py)."""
    save_every: int = field(default=100, metadata=rule(ge=1))
    """Steps between checkpoints (the last step is always saved)."""
    push_to_hub: bool = False
    """Upload each checkpoint to the Hub repo hub_model_id (TRL's every_save).

    Through huggingface_hub's upload_folder, without trainer_state.pt; the token is HF_TOKEN's or `hf auth
    login`'s; a failed upload warns and the run goes on (trainer/hub.py)."""
    hub_model_id: Optional[str] = None
    """With push_to_hub: the repo, owner/name or name; null: the run directory's name."""
    hub_private_repo: Optional[bool] = None
    """With push_to_hub: create the repo private; null: the Hub's default."""
    eval_every: int = field(default=50, metadata=rule(ge=1))
    """Steps between held-out greedy evals (the last step always has one)."""
    eval_prompts: int = field(default=200, metadata=rule(ge=1))
    """Test prompts in each held-out eval (capped at the env's test split)."""
    logged_prompts_per_step: int = 2
    """Prompts whose completions go to samples.jsonl each step.

    Was train.samples_per_step."""


@dataclass
class RewardConfig:
    """`reward.*`: what the trainer does with the environment's reward (conf/reward/*.yaml, experience/rewards.py).

    `reward=random` and `reward=format_only` are the control presets (rewards.py, stage 3). This section is here,
    not in a file of its own, so that every key of `rlvr train` has its type, default, meaning and rule in this one
    file. (`sandbox.*`, SandboxConfig, stays in rlvr/sandboxes/hosts.py: `rlvr eval` and `rlvr verify`
    carry the same block, and verifiers/batch.py, a floor below the trainer, cannot import this module.)"""

    kind: str = field(default="env", metadata=rule(choices=REWARD_KINDS))
    """The reward: reward=env (the env's verifiers) | random | format_only."""
    rate: float = field(default=0.5, metadata=rule(ge=0, le=1))
    """reward=random: the probability of reward 1 per completion."""
    screen: bool = False
    """true: completions with hack signatures are screened (experience/rewards.py)."""
    screen_mode: str = field(default="zero", metadata=rule(choices=SCREEN_MODES))
    """With screen: zero (the flagged completion) | drop_group (its group)."""


@dataclass
class CurriculumConfig:
    """`curriculum.*`: a difficulty controller over the training prompts (trainer/curriculum.py); off by default."""

    enabled: bool = False
    """Move through difficulty levels by the step's pass rate."""
    levels: list = field(default_factory=list)
    """Levels, easiest first, each {param: value}; []: the env's own ladder.

    countdown: num_numbers, max_number; arithmetic: digits, ops; reasoning_gym: config."""
    band: list = field(default_factory=lambda: [0.2, 0.8])
    """Keep the pass rate in [low, high]: above, up a level; below, down one."""
    window: int = 4
    """Steps at a level whose mean pass rate decides a move (least time held)."""
    start_level: Optional[int] = None
    """Index into levels; null: the configured env's level, else 0."""
    target_share: float = 0.0
    """Share of each step's prompts always from the configured env (0: none)."""


@dataclass
class OptimConfig:
    """`optim.*`: AdamW and its learning-rate schedule."""

    lr: float = field(default=1e-4, metadata=rule(gt=0))
    """Learning rate (a preset may set its own)."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    betas: list = field(default_factory=lambda: [0.9, 0.999])
    """AdamW's [beta1, beta2]."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm."""
    warmup_steps: int = 0
    """Steps of linear learning-rate warmup from 0."""
    schedule: str = field(default="constant", metadata=rule(choices=SCHEDULES))
    """LR after warmup: constant | linear | cosine (to 0 at the last step)."""


@dataclass
class WandbConfig:
    """`wandb.*`: Weights & Biases, with logger=[wandb]."""

    project: str = "rlvr"
    """Weights & Biases project."""
    entity: Optional[str] = None
    """Weights & Biases team or user; null: your default."""
    mode: str = field(default="offline", metadata=rule(choices=WANDB_MODES))
    """offline (no network; `wandb sync` later) | online | disabled."""


@dataclass
class StrategyConfig:
    """`trainer.*`: how the run is spread over processes."""

    strategy: str = field(default="none", metadata=rule(choices=PARALLEL_STRATEGIES))
    """none: one process | ddp | fsdp2: data parallel under torchrun.

    Which algorithms run under which: trainer/algos/table.py's `strategies` (trainer/distributed.py)."""


@dataclass
class RunConfig:
    """The whole config of one `rlvr train` run (conf/train.yaml with its groups merged on)."""

    algo: AlgoSchema = field(default_factory=AlgoSchema)  # conf/algo/NAME.yaml merges its family's subclass on
    env: Any = field(default_factory=lambda: {"name": "arithmetic"})
    """The environment (env=NAME); its keys are its own: `rlvr envs`."""
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: StrategyConfig = field(default_factory=StrategyConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)  # conf/reward/*.yaml
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)  # trainer/curriculum.py
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # Docker engines for code (rlvr.sandboxes.hosts)
    seed: int = 0
    """Seeds the prompts drawn, the sampling and the model's initialisation."""
    output_dir: str = "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    """The run directory (config.yaml, metrics.jsonl, checkpoints/)."""
    resume: Optional[str] = None
    """A run directory: continue it from its last checkpoint."""
    overwrite: bool = False
    """true: a new run replaces the run in output_dir (refused otherwise)."""
    threads: Any = "auto"
    """Torch CPU threads: auto (1 under 10M parameters, else every core) | N | 0 (torch's default: every core)."""
    data: Optional[str] = None
    """algo=dpo: a scored-completions JSONL (rlvr eval's) for offline DPO; algo=sft: prompt/completion rows."""
    logger: list = field(default_factory=list, metadata=rule(choices=LOGGERS, each=True))
    """Besides metrics.jsonl, any of: tensorboard, wandb (trainer/loggers.py)."""
    wandb: WandbConfig = field(default_factory=WandbConfig)


# Old name -> new, each the same setting: samples_per_step counts prompts; the engine-only rollout keys moved into
# their engine's group (rollout.hf, rollout.vllm, rollout.server).
RENAMED_KEYS = {
    "train.samples_per_step": "train.logged_prompts_per_step",
    "rollout.prefill_once": "rollout.hf.prefill_once",
    "rollout.producer": "rollout.hf.producer",
    **{f"rollout.{key}": f"rollout.vllm.{key}" for key in (
        "gpu_memory_utilization", "tensor_parallel_size", "enable_sleep_mode", "dtype", "kv_cache_bytes", "lora_sync")},
    **{f"rollout.{key}": f"rollout.server.{key}" for key in (
        "endpoints", "num_servers", "request_timeout_s", "weights_dir")},
    "rollout.server_start_timeout_s": "rollout.server.start_timeout_s",
    "rollout.server_threads": "rollout.server.threads",
}


def refuse_renamed_keys(overrides: list[str]) -> None:
    """A key given by its old name (RENAMED_KEYS) is refused in one line that names the new one."""
    from rlvr.errors import ConfigError

    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in RENAMED_KEYS:
            why = "in its engine's group" if key.startswith("rollout.") else "named for what it counts"
            raise ConfigError(f"{key} is now {RENAMED_KEYS[key]} (the same setting, {why}): "
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
