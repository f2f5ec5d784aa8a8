"""Data parallelism under torchrun: `trainer.strategy=none|ddp|fsdp2`.

    torchrun --nproc_per_node N -m rlvr train trainer.strategy=ddp ...

(Over 300 lines on purpose: a third is this docstring, the argument that N ranks make the update one
process makes, and the rest are the pieces it names, each a few lines: the per-step collectives the
algorithm updates call, the `Parallel` the loop asks, the metric reduction and the rank's view of the
environment. Split, the argument would sit apart from what it argues about.)

Each rank draws the step's `prompts_per_step` rows exactly as one process would (from the seed
and the step) and keeps its contiguous share; it samples, scores and backpropagates that share.
Gradients are averaged over ranks by torch's DistributedDataParallel (`ddp`: every rank holds the
whole model) or reduce-scattered by FSDP2 (`fsdp2`, `torch.distributed.fsdp.fully_shard`: each
rank holds a shard of the parameters, gradients and optimizer state). Nothing here is home-made
parallelism; this file only arranges torch's pieces so that the update equals the one-process one:

  * Loss scale. `losses.aggregate` divides by the WHOLE batch's num_sequences / num_tokens so that
    micro-batches add up; with ranks those counts are summed over ranks (`global_counts`), and
    since DDP and FSDP2 AVERAGE gradients over ranks, each rank's loss is multiplied by the world
    size (`loss_scale`) before backward: mean_r(W * grad L_r) = sum_r grad L_r = the one-process gradient.
  * Equal collective calls. A DDP/FSDP2 backward (and an FSDP2 forward) is a collective: a rank
    that runs fewer of them than the others hangs the job. Ranks hold equal numbers of prompts,
    but DAPO's zero-variance filter can leave a rank fewer rows or none, so the micro-batch
    count is the MAX over ranks and a rank that has run out of rows runs a zero-weight pass on
    one dummy row (`RankModel`: an empty batch in, a 0-row output connected to every parameter
    out). Each micro-batch's backward all-reduces (DDP) or reduce-scatters (FSDP2) and adds to
    the gradient already there; that sum is what one process accumulates (DDP's `no_sync`
    would save the early all-reduces but needs the forward inside the context too).
  * DDP is built with `forward_sync_buffers=False` (torch 2.13's name for `broadcast_buffers=False`):
    the only buffers of a causal LM are rotary tables that never change, and a buffer broadcast
    before each forward would make every no-grad forward (old and reference logprobs) a collective too.
  * Generation and the held-out eval never go through the wrapper (`Parallel.plain`, applied at
    each sync by trainer/rollout/weights.py). Under `ddp` the engine gets the wrapped module itself; under `fsdp2` a full, unsharded copy (`Parallel.plain`) refreshed from
    `get_model_state_dict(full_state_dict=True)` after each update, because an FSDP2 forward is
    collective: ranks generating different lengths, or rank 0 evaluating alone, would hang. The
    copy costs one full model per rank (as a colocated vLLM engine does anyway); FSDP2 still shards
    what dominates training memory (gradients and AdamW's two moments).
  * Only rank 0 evaluates and writes: metrics.jsonl (metrics reduced over ranks, `reduce_metrics`),
    samples.jsonl, summary.json, checkpoints and the progress bar. Checkpoints are plain Hugging
    Face directories (the full model) plus the full optimizer state, so a run resumes under any strategy
    with the same world size (a different one also resumes; only the per-rank RNG streams restart).
  * Rank r seeds torch with `seed + r`: rank 0 samples as a single process would, and ranks do
    not draw the same noise for their different prompts. vLLM does not use that stream for training
    samples: each prompt carries a seed keyed by its place in the step's whole draw
    (`experience/collect.py`, `draw_and_generate`), so its completions do not depend on the world size.
  * Each rank generates with its own engine, hf or vLLM (one colocated vLLM engine per rank; it
    writes its start-up copy of the model on every rank, see rollout/vllm.py, and is shut down
    before the process group goes). Measured with 2 CPU ranks: the engines' logprobs stay within
    1.2e-6 of the trainer's under DDP and FSDP2.
  * Backend: gloo (CPU tensors; the trainer keeps the policy on CPU) and, where CUDA exists,
    "cpu:gloo,cuda:nccl" so CUDA tensors go through NCCL.

Supported algorithms (trainer/algos/table.py): the GRPO family, REINFORCE and DPO under ddp and fsdp2
(DPO: each rank pairs its own groups, or takes a contiguous share of an offline step's pairs; pairs are
counted over ranks like sequences); PPO under ddp with `algo.critic=head`: its value head sits outside
the DDP module, so its gradient is averaged by `reduce_gradients`, and the batch statistics PPO takes
(whitened advantages, the adaptive KL, explained variance) are summed over ranks (`global_sum`).
TRPO/NPG's conjugate gradient (extra full-batch backward passes) is refused with a ConfigError.
"""

from __future__ import annotations

import copy
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.distributed as dist
from omegaconf import OmegaConf

from rlvr.errors import ConfigError

STRATEGIES = ("none", "ddp", "fsdp2")
# How each rank's step metric becomes the run's: shares of a whole-batch normalised quantity add up;
# wall times take the slowest rank; throughputs add; everything else (rates and means over equal
# numbers of completions per rank, lr, grad_norm, which is identical on all ranks) is averaged.
SUMMED = ("loss", "policy_loss", "entropy", "kl", "clip_frac", "ratio_mean", "rollout/logprob_diff_mean",
          "tokens_per_s", "vf_loss", "vf_clip_frac", "kl_old",
          "rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy", "logps/chosen", "logps/rejected",
          "distill/reverse_kl", "distill/teacher_logprob", "distill/divergence")
# Shares of each rank's completions (statuses): a rank that saw none of a status logs no key, i.e. 0.
ZERO_WHEN_MISSING = ("status/",)
MAXED = ("rollout/logprob_diff_max",)


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def gather_from_ranks(values: torch.Tensor) -> torch.Tensor:
    """[W, *values.shape]: every rank's `values` (the same shape on all), in rank order; one process: [1, ...]."""
    if world_size() == 1:
        return values.unsqueeze(0)
    parts = [torch.empty_like(values) for _ in range(world_size())]
    dist.all_gather(parts, values.contiguous())
    return torch.stack(parts)


def global_sum(value: torch.Tensor) -> torch.Tensor:
    """`value` summed over ranks (a new tensor; one process: `value` itself)."""
    if world_size() == 1:
        return value
    total = value.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total


def reduce_gradients(module: torch.nn.Module) -> None:
    """Average `module`'s gradients over ranks, as DDP does for the modules it wraps (PPO's value head)."""
    if world_size() == 1:
        return
    for parameter in module.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
            parameter.grad /= world_size()


def gather_objects(value) -> list:
    """Every rank's picklable `value`, in rank order; one process: [value]."""
    if world_size() == 1:
        return [value]
    gathered: list = [None] * world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def loss_scale() -> float:
    """DDP and FSDP2 average gradients over ranks; scaling each rank's loss by W makes that a sum."""
    return float(world_size())


def global_counts(num_sequences: int, num_tokens: torch.Tensor, micro_batch_size: int,
                  micro_batches: int | None = None):
    """(sequences, tokens) summed over ranks and the number of micro-batches every rank must run (the max).

    One process: `(num_sequences, num_tokens, ceil(num_sequences / micro_batch_size))` unchanged.
    `micro_batches`: this rank's count when the rows are not cut by `micro_batch_size` (a token budget)."""
    if micro_batches is None:
        micro_batches = math.ceil(num_sequences / micro_batch_size)
    if world_size() == 1:
        return num_sequences, num_tokens, micro_batches
    sums = torch.tensor([float(num_sequences), float(num_tokens)], dtype=torch.float64)
    most = torch.tensor([micro_batches], dtype=torch.int64)
    dist.all_reduce(sums, op=dist.ReduceOp.SUM)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    return int(sums[0].item()), sums[1].to(num_tokens.dtype), int(most.item())


def any_rows(num_rows: int) -> bool:
    """Whether any rank has rows to train on (all ranks must agree on whether to update)."""
    return int(global_sum(torch.tensor(num_rows, dtype=torch.int64)).item()) > 0


class RankModel(torch.nn.Module):
    """The wrapped policy (DDP or FSDP2) as the algorithms call it: `model(input_ids=, attention_mask=).logits`.

    An empty batch runs one dummy row and returns its logits sliced to 0 rows: the forward (and,
    when a loss is built from it, the backward) still reaches every parameter, so the rank makes
    the same collective calls as its peers while contributing exactly zero gradient."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, attention_mask=None, **kwargs):
        if input_ids.shape[0] > 0:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        dummy = torch.zeros((1, max(input_ids.shape[1], 1)), dtype=input_ids.dtype, device=input_ids.device)  # [1, L]
        out = self.inner(input_ids=dummy, attention_mask=torch.ones_like(dummy), **kwargs)
        return SimpleNamespace(logits=out.logits[:0])  # [0, L, V]


@dataclass
class Parallel:
    """This process's place in the job, and what the run loop asks of the strategy."""

    strategy: str = "none"
    rank: int = 0
    world_size: int = 1
    _mirror: torch.nn.Module | None = None  # fsdp2: the full copy the engine generates with

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, strategy: str) -> "Parallel":
        """Joins the process group torchrun described in RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT."""
        launched = int(os.environ.get("WORLD_SIZE", "1"))
        if strategy == "none":
            if launched > 1:
                raise ConfigError(f"trainer.strategy=none but torchrun started WORLD_SIZE={launched} processes: "
                                  "choose trainer.strategy=ddp or fsdp2 (or run one process)")
            return cls()
        missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise ConfigError(f"trainer.strategy={strategy} runs under torchrun ({', '.join(missing)} unset): "
                              f"torchrun --standalone --nproc_per_node N -m rlvr train trainer.strategy={strategy} ...")
        if not dist.is_initialized():
            dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
        return cls(strategy, dist.get_rank(), dist.get_world_size())

    # ---- data -------------------------------------------------------------------------------
    def local_config(self, cfg):
        """The config a rank's step sees: `train.prompts_per_step` is its share (rows are sharded by `shard_env`)."""
        if self.world_size == 1:
            return cfg
        local = copy.deepcopy(cfg)
        OmegaConf.update(local, "train.prompts_per_step", cfg.train.prompts_per_step // self.world_size)
        return local

    def shard_env(self, env):
        return env if self.world_size == 1 else RankShardEnv(env, self.rank, self.world_size)

    # ---- model ------------------------------------------------------------------------------
    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """DDP or FSDP2 around the policy (before the optimizer is built: FSDP2 replaces parameters)."""
        if self.strategy == "none":
            return model
        if self.strategy == "ddp":
            return RankModel(torch.nn.parallel.DistributedDataParallel(model, forward_sync_buffers=False))
        from torch.distributed.fsdp import fully_shard

        self._mirror = copy.deepcopy(model).requires_grad_(False)
        # One FSDP2 unit per decoder layer, then the root (embeddings, norm, head): the layers HF lists in
        # `_no_split_modules`, as accelerate's FSDP auto-wrap policy and torchtitan's per-block sharding do.
        layer_classes = set(getattr(model, "_no_split_modules", None) or ())
        for module in model.modules():
            if type(module).__name__ in layer_classes:
                fully_shard(module)
        fully_shard(model)
        return RankModel(model)

    def plain(self, model: torch.nn.Module) -> torch.nn.Module:
        """The Hugging Face module with the current full weights, for generation and saving.
        Under fsdp2 this gathers the shards (a collective: every rank must call it)."""
        if self.strategy == "none":
            return model
        inner = model.inner if isinstance(model, RankModel) else model
        if self.strategy == "ddp":
            return inner.module
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(inner, options=StateDictOptions(full_state_dict=True, cpu_offload=False))
        self._mirror.load_state_dict(full)
        return self._mirror

    # ---- checkpoint state -------------------------------------------------------------------
    def optimizer_state(self, model, optimizer) -> dict:
        """The full optimizer state (on rank 0 under fsdp2, where it is gathered: every rank must call)."""
        if self.strategy != "fsdp2":
            return optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model.inner, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_optimizer_state(self, model, optimizer, state: dict) -> None:
        if self.strategy != "fsdp2":
            optimizer.load_state_dict(state)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model.inner, optimizer, optim_state_dict=state,
                                 options=StateDictOptions(full_state_dict=True))

    def rng_states(self) -> list[torch.Tensor]:
        """Every rank's torch RNG state, in rank order (a collective)."""
        return gather_objects(torch.get_rng_state())

    # ---- metrics and control ------------------------------------------------------------------
    def reduce_metrics(self, metrics: dict, completions_per_rank: int) -> dict:
        """One step's metrics over all ranks (see SUMMED / MAXED); `reward/std` is recombined exactly."""
        if self.world_size == 1:
            return metrics
        return combine_metrics(gather_objects(metrics), completions_per_rank)

    @contextmanager
    def main_first(self):
        """Rank 0 runs the block first (e.g. builds the cached tiny model), then the others."""
        if not self.is_main:
            self.barrier()
        yield
        if self.is_main:
            self.barrier()

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def close(self) -> None:
        if self.strategy != "none" and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def combine_metrics(per_rank: list[dict], completions_per_rank: int) -> dict:
    """Pure: per-rank metric dicts -> the run's. A key missing on a rank (a rank with no rows after
    filtering logs no update metrics) counts as 0 in a sum and is left out of a mean or max; a missing
    status/ share counts as 0 in the mean (that rank had no completion of that status)."""
    keys = list(dict.fromkeys(k for m in per_rank for k in m))
    out = {}
    for key in keys:
        if key.startswith(ZERO_WHEN_MISSING):
            values = [m.get(key, 0.0) for m in per_rank]
        else:
            values = [m[key] for m in per_rank if key in m]
        if key not in SUMMED and all(v == values[0] for v in values):  # step, lr, grad_norm: kept as they are
            out[key] = values[0]
        elif not all(isinstance(v, (int, float)) for v in values):
            out[key] = values[0]
        elif key in SUMMED:
            out[key] = sum(values)
        elif key in MAXED or key.startswith("time/"):
            out[key] = max(values)
        else:
            out[key] = sum(values) / len(values)
    if all("reward/std" in m and "reward/mean" in m for m in per_rank):
        n, mean = completions_per_rank, out["reward/mean"]
        # (N - 1) var = sum_r [(n - 1) s_r^2 + n (m_r - mean)^2], with N = n * ranks (Chan et al.'s pooled variance)
        pooled = sum((n - 1) * m["reward/std"] ** 2 + n * (m["reward/mean"] - mean) ** 2 for m in per_rank)
        out["reward/std"] = math.sqrt(pooled / max(n * len(per_rank) - 1, 1))
    return out


class RankShardEnv:
    """The environment as one rank sees it: `rows("train", n)` draws the n * world_size rows one
    process would draw for the whole step and returns this rank's contiguous n; other splits pass through."""

    def __init__(self, env, rank: int, world: int):
        self.env, self.rank, self.world = env, rank, world

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        if split != "train":
            return self.env.rows(split, n, seed=seed)
        rows = self.env.rows(split, n * self.world, seed=seed)
        return rows[self.rank * n : (self.rank + 1) * n]

    def __getattr__(self, name):
        return getattr(self.env, name)


class QuietRunFiles:
    """The run directory as a rank other than 0 sees it: rank 0 alone writes (RunFiles' interface, doing nothing)."""

    loggers = ()

    def __getattr__(self, name):
        return lambda *args, **kwargs: None
