"""Per-token logprobs of sampled completions under a model, on a packed batch.

Rows are packed right-padded as prompt + completion, so position ids are the natural
0..L-1 and no left-padding arithmetic is needed. Every [N, L-1] tensor here is indexed by
the position of the token being predicted minus one: column t holds log p(x_{t+1} | x_<=t).
`completion_mask` marks the completion tokens, so losses never see prompt or padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # [N, L]
    attention_mask: torch.Tensor  # [N, L]
    completion_mask: torch.Tensor  # [N, L-1] float, 1 on completion tokens

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, rows: slice | torch.Tensor) -> "PackedBatch":
        return PackedBatch(self.input_ids[rows], self.attention_mask[rows], self.completion_mask[rows])


def pack(prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int) -> PackedBatch:
    lengths = [len(p) + len(c) for p, c in zip(prompt_ids, completion_ids)]
    width = max(lengths)
    input_ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)  # [N, L]
    attention_mask = torch.zeros((len(lengths), width), dtype=torch.long)  # [N, L]
    completion_mask = torch.zeros((len(lengths), width - 1))  # [N, L-1]
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        input_ids[i, : lengths[i]] = torch.tensor(p + c)
        attention_mask[i, : lengths[i]] = 1
        completion_mask[i, len(p) - 1 : lengths[i] - 1] = 1.0
    return PackedBatch(input_ids, attention_mask, completion_mask)


def token_logprobs(model, batch: PackedBatch, temperature: float = 1.0, with_entropy: bool = False):
    """log p(sampled token) for every position, under logits / temperature (as the engine sampled).

    Returns `(logprobs [N, L-1], entropy [N, L-1] or None)`.
    """
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits  # [N, L, V]
    logits = logits[:, :-1].float() / temperature  # [N, L-1, V]
    targets = batch.input_ids[:, 1:]  # [N, L-1]
    logprobs_all = torch.log_softmax(logits, dim=-1)  # [N, L-1, V]
    logprobs = logprobs_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [N, L-1]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)  # [N, L-1]
    return logprobs, entropy
