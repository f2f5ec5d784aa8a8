"""Per-token logprobs of sampled completions under a model, on a packed batch.

Rows are packed right-padded as prompt + completion, so position ids are the natural
0..L-1 and no left-padding arithmetic is needed. Every [N, L-1] tensor here is indexed by
the position of the token being predicted minus one: column t holds log p(x_{t+1} | x_<=t).
`completion_mask` marks the completion tokens, so losses never see prompt or padding;
`token_logprobs` computes only those columns and leaves 0 in the others.

The batch stays on the CPU; each forward moves its inputs to the model's device (`train.device`,
trainer/device.py) and brings back only the per-token results, never the logits.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable

import torch

from rlvr.trainer.device import model_device
from rlvr.trainer.models.chunked_logprobs import chunked_logprobs_from_logits
from rlvr.trainer.models.packing import PACKED_FORWARD, pack_row, scatter_back


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # [N, L]
    attention_mask: torch.Tensor  # [N, L]
    completion_mask: torch.Tensor  # [N, L-1] float, 1 on completion tokens
    # columns the model needs (past them every row is padding); None: all L. Tensors keep their width L,
    # so a loss lines the results up with the whole batch's per-row tensors
    width: int | None = None
    # True: the model runs the rows as one packed row (models/packing.py, `train.pack_sequences`)
    packed: bool = False

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, rows: slice | torch.Tensor, trim: bool = False, pack: bool = False) -> "PackedBatch":
        """The rows `rows`; `trim`: `width` set to their longest row, so `token_logprobs` runs the model on
        those columns only (token-budget micro-batches, trainer/algos/token_budget.py); `pack`: the model
        runs them as one packed row (models/packing.py)."""
        attention_mask = self.attention_mask[rows]
        width = None
        if trim and len(attention_mask) > 0:
            width = max(2, int(attention_mask.any(0).nonzero().max()) + 1)
        return PackedBatch(self.input_ids[rows], attention_mask, self.completion_mask[rows], width, pack)

    def lengths(self) -> torch.Tensor:
        """[N] tokens per row, padding excluded."""
        return self.attention_mask.sum(1)

    @staticmethod
    def empty() -> "PackedBatch":
        """No rows (a rank with nothing to train on still runs its share of collective passes)."""
        no_rows = torch.zeros((0, 2), dtype=torch.long)  # [0, L]
        return PackedBatch(no_rows, no_rows.clone(), torch.zeros((0, 1)))


def pack(prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int,
         loss_masks: list[list[int]] | None = None) -> PackedBatch:
    """Right-padded prompt + completion rows. `loss_masks` (multi-turn trajectories, one 0/1 per completion
    token): `completion_mask` is 1 only on the completion tokens whose mask is 1, the sampled ones; without
    it every completion token counts."""
    lengths = [len(p) + len(c) for p, c in zip(prompt_ids, completion_ids)]
    width = max(lengths)
    input_ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)  # [N, L]
    attention_mask = torch.zeros((len(lengths), width), dtype=torch.long)  # [N, L]
    completion_mask = torch.zeros((len(lengths), width - 1))  # [N, L-1]
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        input_ids[i, : lengths[i]] = torch.tensor(p + c)
        attention_mask[i, : lengths[i]] = 1
        completion_mask[i, len(p) - 1 : lengths[i] - 1] = 1.0
    if loss_masks is not None:
        for i, (p, m) in enumerate(zip(prompt_ids, loss_masks)):
            if len(m) != len(completion_ids[i]):
                raise ValueError(f"loss_masks[{i}] has {len(m)} entries for {len(completion_ids[i])} completion tokens")
            completion_mask[i, len(p) - 1 : len(p) - 1 + len(m)] = torch.tensor(m, dtype=completion_mask.dtype)
    return PackedBatch(input_ids, attention_mask, completion_mask)


@dataclass
class Forward:
    """One forward of a batch's rows (`run_forward`) and where the completion tokens sit in its outputs."""

    out: object  # the model's output
    logits: torch.Tensor | None  # [M, V] at the M positions that predict a completion token; None: not projected
    at: Callable[[torch.Tensor], torch.Tensor]  # an output's [n, T, ...] tensor -> [M, ...] at those positions
    targets: torch.Tensor  # [M] the completion tokens themselves
    mask: torch.Tensor  # [N, L-1] bool: where `scatter_back` puts M results in the batch's layout


def run_forward(model, batch: PackedBatch, project: bool = True, **kwargs) -> Forward:
    """The one forward of a batch's rows that the policy, the reference and PPO's critic all run: padded rows cut
    to `batch.width`, or (`batch.packed`) the rows packed into one (models/packing.py). `project`: the model has
    an LM head, which projects to the vocabulary only the positions from the batch's first completion column on
    (padded) or the completion positions (packed), through HF's `logits_to_keep` where the forward takes it;
    `project=False`: a trunk without a head (PPO's separate critic). `kwargs` go to the model (PPO's
    `output_hidden_states`). A batch without completion tokens (an empty micro-batch on a distributed rank)
    runs padded and selects none (M = 0), but its forward still reaches every parameter."""
    device = model_device(model)
    mask = batch.completion_mask.bool()  # [N, L-1]
    columns = mask.any(0).nonzero()  # [C, 1]
    if batch.packed and len(columns):
        row = pack_row(batch.input_ids, batch.attention_mask, batch.completion_mask)
        positions = row.positions.to(device)  # [M]
        inputs = dict(input_ids=row.input_ids.to(device), position_ids=row.position_ids.to(device),  # [1, T]
                      **PACKED_FORWARD)
        if project and _takes_logits_to_keep(model):
            out = model(**inputs, logits_to_keep=positions, **kwargs)
            logits = out.logits[0]  # [M, V]
        else:
            out = model(**inputs, **kwargs)
            logits = out.logits[0, positions] if project else None  # [M, V]
        return Forward(out, logits, lambda x: x[0, positions], row.targets.to(device), row.mask)
    width = batch.width or batch.input_ids.shape[1]  # W: the model sees columns 0..W-1 (past them: padding)
    first = int(columns[0]) if len(columns) else width - 1  # the first column any row predicts a completion token in
    input_ids = batch.input_ids[:, :width].to(device)  # [N, W]
    attention_mask = batch.attention_mask[:, :width].to(device)  # [N, W]
    keep = width - 1 - first  # columns first..W-2
    selected = mask[:, first:width - 1].to(device)  # [N, keep]
    if project and _takes_logits_to_keep(model):
        out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep + 1, **kwargs)
        logits = out.logits[:, :-1][selected]  # [M, V]: of positions first..W-2
    else:
        out = model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        logits = out.logits[:, first:-1][selected] if project else None  # [M, V]
    return Forward(out, logits, lambda x: x[:, first:width - 1][selected], input_ids[:, first + 1:][selected], mask)


def token_logprobs(model, batch: PackedBatch, temperature: float = 1.0, with_entropy: bool = False,
                   chunk_tokens: int = 0):
    """log p(sampled token) at every completion position, under logits / temperature (as the engine sampled).

    Returns `(logprobs [N, L-1], entropy [N, L-1] or None)`, both 0 outside `completion_mask`
    (prompt and padding columns, which no loss or metric reads).

    Only what the losses read is computed, as TRL's GRPOTrainer does (its `logits_to_keep` and
    fused LM head, trl/trainer/grpo_trainer.py `_get_per_token_logps_and_entropies`): the model
    projects to the vocabulary only the last K positions, from the batch's first completion column
    on (HF's `logits_to_keep=K`), and log-softmax and entropy run only on completion tokens. On the
    0.84M tiny model (vocabulary 512) this cut forward + backward by about 5% (BENCHMARKS.md); the
    share grows with the vocabulary (150k for Qwen2.5) and with the prompt's share of the row.

    `chunk_tokens > 0` (`train.logprob_chunk_tokens`): the log-softmax and gather run that many
    completion tokens at a time (chunked_logprobs.py), never holding the float32 [M, V] matrix.
    `batch.packed`: the rows run as one packed row (models/packing.py); the same numbers, no padding computed.
    """
    forward = run_forward(model, batch)
    picked, picked_entropy = logprobs_from_logits(forward.logits, forward.targets, temperature, with_entropy,
                                                  chunk_tokens)  # [M]
    entropy = None if picked_entropy is None else scatter_back(picked_entropy, forward.mask)
    return scatter_back(picked, forward.mask), entropy  # [N, L-1] on the batch's device


def log_distributions(model, batch: PackedBatch, temperature: float = 1.0) -> torch.Tensor:
    """log pi(. | s_t) over the whole vocabulary at every position: [N, L-1, V]. For a KL between whole
    distributions (TRPO's); a loss on the sampled tokens wants `token_logprobs`, which computes far less."""
    device = model_device(model)
    logits = model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device)).logits  # [N, L, V]
    return log_softmax(logits[:, :-1], temperature).to(batch.input_ids.device)  # [N, L-1, V]


def log_softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """[..., V] logits -> [..., V] log-probabilities of logits / temperature, in float32."""
    return torch.log_softmax(logits.float() / temperature, dim=-1)


def pick(log_dist: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """[..., V] log-probabilities, [...] token ids -> [...] the log-probability of each id."""
    return log_dist.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def logprobs_from_logits(logits: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool = False,
                         chunk_tokens: int = 0):
    """[..., V] logits, [...] targets -> (logprobs [...], entropy [...] or None): the one place the
    log-softmax and the gather are written (`token_logprobs`, PPO's policy-and-value forward).
    `chunk_tokens > 0`: the same numbers, `chunk_tokens` positions at a time (chunked_logprobs.py)."""
    if chunk_tokens > 0:
        return chunked_logprobs_from_logits(logits, targets, temperature, with_entropy, chunk_tokens)
    log_dist = log_softmax(logits, temperature)  # [..., V]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(log_dist.exp() * log_dist).sum(-1)  # [...]
    return pick(log_dist, targets), entropy


@functools.lru_cache(maxsize=None)
def _forward_takes_logits_to_keep(model_type: type) -> bool:
    return "logits_to_keep" in inspect.signature(model_type.forward).parameters


def _takes_logits_to_keep(model) -> bool:
    """Whether `model(..., logits_to_keep=K)` reaches a forward that takes it. Hugging Face causal LMs
    do (transformers >= 4.50); the wrappers rlvr builds pass keyword arguments through to the model
    they hold: distributed.RankModel (`inner`), DistributedDataParallel (`module`), `torch.compile`
    (`_orig_mod`) and a PEFT model (`get_base_model()`). Any other forward gets the full logits,
    sliced here."""
    while not _forward_takes_logits_to_keep(type(model)):
        inner = next((getattr(model, name) for name in ("inner", "module", "_orig_mod") if hasattr(model, name)),
                     None)
        if inner is None and hasattr(model, "get_base_model"):
            inner = model.get_base_model()
        if not isinstance(inner, torch.nn.Module) or inner is model:
            return False
        model = inner
    return True
