"""Several sequences in one row (`train.pack_sequences`, with `train.max_tokens_per_micro_batch`).

A micro-batch's rows, right-padded [n, L], become one row [1, T] of their tokens end to end
(T = the sum of their lengths: no padding is computed), with `position_ids` restarting at 0 for each
sequence and no attention mask. Hugging Face transformers (5.x, masking_utils.py) reads that layout as
packed sequences: `_preprocess_mask_arguments` calls `find_packed_sequence_indices(position_ids)` when
no attention mask and no cache is passed, and `create_causal_mask` ANDs the causal mask with "same
sequence" (a block-diagonal causal mask) for the sdpa, eager and flex kernels (only without a KV cache:
a forward with `use_cache` on, the config's default, builds one and gets a plain causal mask, so every
packed forward passes `use_cache=False`, `PACKED_FORWARD`); flash-attention's varlen
path (`modeling_flash_attention_utils._is_packed_sequence`, batch size 1) cuts the row at every position
0 (`prepare_fa_kwargs_from_position_ids`). So each token attends to its own sequence's earlier tokens
only, at the positions it would have in its own row. Any other attention implementation gets no mask
at all (masking_utils returns early for one it does not know), so `check_packing` refuses those, and
refuses a model whose packed logits differ from its per-sequence ones (a model that builds its mask
its own way). verl (`use_remove_padding`), NeMo-RL and open-instruct pack the same way; the code is ours.

Only the positions that predict a completion token are projected to the vocabulary (`logits_to_keep` as
an index tensor), and the results go back to the batch's [n, L-1] layout, so every loss reads the same
tensors as on padded rows (tests/trainer/algos/test_packing.py: the same loss and gradients per algorithm family).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.errors import ConfigError

# attention implementations whose masks masking_utils builds from restarting position_ids (see above)
PACKED_ATTENTION = ("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3", "flash_attention_4")
PACKED_FORWARD = {"use_cache": False}  # a cache turns packed-sequence detection off (see above)


@dataclass
class PackedRow:
    """A micro-batch's n sequences as one row, and where its completion tokens sit in it."""

    input_ids: torch.Tensor  # [1, T]
    position_ids: torch.Tensor  # [1, T], 0.. per sequence
    positions: torch.Tensor  # [M] the row position predicting each completion token (completion_mask's row-major order)
    targets: torch.Tensor  # [M] those tokens
    mask: torch.Tensor  # [n, L-1] bool, the completion mask the results are scattered back into


def pack_row(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_mask: torch.Tensor) -> PackedRow:
    """Right-padded rows ([n, L] ids and 0/1 mask, [n, L-1] completion mask) -> one packed row."""
    keep = attention_mask.bool()  # [n, L]
    if (keep[:, 1:] & ~keep[:, :-1]).any():
        raise ValueError("pack_row needs right-padded rows (each row's tokens first, then padding)")
    lengths = keep.sum(1)  # [n]
    width = input_ids.shape[1]
    columns = torch.arange(width, device=input_ids.device).expand_as(input_ids)  # [n, L]
    offsets = lengths.cumsum(0) - lengths  # [n] where each sequence starts in the row
    mask = completion_mask.bool()  # [n, L-1]
    rows, cols = mask.nonzero(as_tuple=True)  # [M], [M]
    return PackedRow(input_ids[keep][None], columns[keep][None], offsets[rows] + cols, input_ids[rows, cols + 1], mask)


def scatter_back(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[M] per completion token -> [n, L-1] on the mask's device, 0 elsewhere (differentiable)."""
    return values.new_zeros(mask.shape, device=mask.device).masked_scatter(mask, values.to(mask.device))


def check_packing(model) -> None:
    """Refuse `train.pack_sequences=true` where packed rows would not keep attention within each sequence:
    an attention implementation masking_utils builds no packed mask for, a transformers without packed-sequence
    detection, or a model whose logits on two packed sequences differ from its logits on each alone
    (relative to the logits' scale: 1e-4 in float32, 3e-2 under bf16 autocast)."""
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401
    except ImportError:
        import transformers

        raise ConfigError(f"train.pack_sequences=true: transformers {transformers.__version__} does not build "
                          f"block-diagonal masks from position_ids (masking_utils.find_packed_sequence_indices); "
                          f"upgrade transformers or set train.pack_sequences=false") from None
    config = getattr(model, "config", None)
    attention = getattr(config, "_attn_implementation", None)
    if attention not in PACKED_ATTENTION:
        raise ConfigError(f"train.pack_sequences=true: the model's attention implementation {attention!r} gets no "
                          f"per-sequence mask from packed position_ids; supported: {', '.join(PACKED_ATTENTION)} "
                          f"(or set train.pack_sequences=false)")
    if attention.startswith("flash_attention"):
        return  # float32 is not a flash dtype; the varlen path is transformers' own (see the module docstring)
    _check_logits(model, 3e-2 if hasattr(model, "_autocast_device") else 1e-4)


@torch.no_grad()
def _check_logits(model, tolerance: float) -> None:
    from rlvr.trainer.device import model_device

    device = model_device(model)
    vocab = int(model.config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    first, second = (torch.randint(0, vocab, (1, n), generator=generator).to(device) for n in (5, 7))
    positions = torch.cat([torch.arange(5), torch.arange(7)])[None].to(device)  # [1, 12]
    was_training = model.training
    model.eval()
    try:
        alone = torch.cat([model(input_ids=first).logits[0], model(input_ids=second).logits[0]]).float()  # [12, V]
        packed = model(input_ids=torch.cat([first, second], 1), position_ids=positions,
                       **PACKED_FORWARD).logits[0].float()  # [12, V]
    finally:
        model.train(was_training)
    error = (packed - alone).abs().max().item() / max(alone.abs().max().item(), 1.0)
    if error > tolerance:
        raise ConfigError(f"train.pack_sequences=true: {type(model).__name__} attends across packed sequences "
                          f"(relative logit error {error:.2e} vs each sequence alone); set train.pack_sequences=false")
