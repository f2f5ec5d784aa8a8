"""The chosen token's log-probability (and the entropy) over the vocabulary in chunks of positions,
so the float32 [M, V] log-probability matrix is never held whole (`train.logprob_chunk_tokens`).

The plain computation (logprobs.logprobs_from_logits) keeps `log_softmax(logits / T)` [M, V] in
float32 for the backward, beside the logits; for a 150k vocabulary that matrix is the largest tensor
of the step. Here the forward runs `chunk` positions at a time and keeps only the logits it was given
(which the LM head produced anyway) and the targets; the backward recomputes each chunk's softmax:

    d log p_T(y | z) / dz = (onehot(y) - softmax(z / T)) / T

The idea is TRL's chunked logprob function and Liger's fused linear cross-entropy (which also folds
the LM head in, not done here: the logits [M, V] are still the model's output); the code is ours.
"""

from __future__ import annotations

import torch


class _ChunkedPick(torch.autograd.Function):
    """[M, V] logits, [M] targets -> [M] float32 log p(target) under logits / temperature."""

    @staticmethod
    def forward(ctx, logits, targets, temperature: float, chunk: int):
        picked = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)  # [M]
        for start in range(0, logits.shape[0], chunk):
            part = torch.log_softmax(logits[start:start + chunk].float() / temperature, dim=-1)  # [c, V]
            picked[start:start + chunk] = part.gather(-1, targets[start:start + chunk, None]).squeeze(-1)
        ctx.save_for_backward(logits, targets)
        ctx.temperature, ctx.chunk = temperature, chunk
        return picked

    @staticmethod
    def backward(ctx, grad):  # grad: [M]
        logits, targets = ctx.saved_tensors
        temperature, chunk = ctx.temperature, ctx.chunk
        grad_logits = torch.empty_like(logits)  # [M, V]
        for start in range(0, logits.shape[0], chunk):
            rows = slice(start, start + chunk)
            g = grad[rows, None].float()  # [c, 1]
            part = torch.softmax(logits[rows].float() / temperature, dim=-1).mul_(-g)  # [c, V]: -softmax * g
            part.scatter_add_(-1, targets[rows, None], g)  # + onehot * g
            grad_logits[rows] = part.div_(temperature).to(logits.dtype)
        return grad_logits, None, None, None


def chunked_logprobs_from_logits(logits: torch.Tensor, targets: torch.Tensor, temperature: float,
                                 with_entropy: bool, chunk: int):
    """[..., V] logits, [...] targets -> (logprobs [...], entropy [...] or None), `chunk` positions at a
    time; the same numbers as the plain computation (tests/trainer/models/test_chunked_logprobs.py)."""
    if chunk < 1:
        raise ValueError(f"chunk={chunk} must be >= 1")
    flat, flat_targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)  # [M, V], [M]
    picked = _ChunkedPick.apply(flat, flat_targets, temperature, chunk).view(targets.shape)  # [...]
    if not with_entropy:
        return picked, None
    entropy = torch.empty(flat_targets.shape, dtype=torch.float32, device=logits.device)  # [M]
    with torch.no_grad():
        for start in range(0, flat.shape[0], chunk):
            part = torch.log_softmax(flat[start:start + chunk].float() / temperature, dim=-1)  # [c, V]
            entropy[start:start + chunk] = -(part.exp() * part).sum(-1)
    return picked, entropy.view(targets.shape)
