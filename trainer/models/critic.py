"""PPO's critic (`algo.critic`; trainer/algos/ppo.py says how PPO trains it) and the forward that gives the policy's
logprobs and the critic's values together.

  * `head`: a value head, `nn.Linear(hidden_size, 1)`, on the policy's last hidden state: one forward gives both.
  * `model`: `CriticModel`, a copy of the base model's trunk (without its LM head) with a value head of its own.

Both run the one forward of a batch's rows (models/logprobs.py `run_forward`: padded or packed), as the policy's
and the reference's logprobs do.
"""

from __future__ import annotations

import copy

import torch

from rlvr.trainer.models.logprobs import logprobs_from_logits, run_forward
from rlvr.trainer.models.packing import scatter_back

CRITICS = ("head", "model")


def _zero_linear(hidden_size: int) -> torch.nn.Linear:
    head = torch.nn.Linear(hidden_size, 1)  # zero at start: V = 0 until the value loss has trained it
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    return head


class CriticModel(torch.nn.Module):
    """`algo.critic=model`: a value network of its own, the base model's trunk (a deep copy of the
    transformers model's `base_model`, the transformer without the LM head) plus a zero-initialised value head."""

    def __init__(self, model):
        super().__init__()
        # a peft model's `base_model` is its LoRA wrapper: take the trunk of the transformers model under it,
        # whose copy then carries LoRA adapters of its own over frozen base weights (a LoRA critic)
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.trunk = copy.deepcopy(inner.base_model)
        self.head = _zero_linear(model.config.hidden_size)

    def forward(self, batch):
        """values [N, L-1] at the completion tokens (0 elsewhere, which no loss reads), laid out as
        `logprobs_and_values` describes."""
        forward = run_forward(self.trunk, batch, project=False)
        values = self.head(forward.at(forward.out.last_hidden_state).float()).squeeze(-1)  # [M]
        return scatter_back(values, forward.mask)  # [N, L-1]


def build_critic(model, kind: str = "head") -> torch.nn.Module:
    """PPO's critic for `algo.critic`: "head" -> a Linear on the policy's hidden states; "model" -> CriticModel.
    Built from the policy as loaded, i.e. the base model, so the "model" critic starts from the base weights;
    on `resume=` the checkpoint's critic state then replaces them."""
    if kind == "head":
        return _zero_linear(model.config.hidden_size)
    if kind == "model":
        return CriticModel(model)
    raise ValueError(f"unknown critic {kind!r}; expected one of {CRITICS}")


def logprobs_and_values(model, critic, batch, temperature: float, chunk_tokens: int = 0):
    """(logprobs [N, L-1], values [N, L-1], entropy [N, L-1]), set at the completion tokens (0 elsewhere, which
    no loss reads); column t's value is the state after token t, i.e. before the token whose logprob sits in
    column t. A value head reads the policy forward's last hidden state; a `CriticModel` runs its own."""
    separate = isinstance(critic, CriticModel)
    forward = run_forward(model, batch, output_hidden_states=not separate)
    logprobs, entropy = logprobs_from_logits(forward.logits, forward.targets, temperature, with_entropy=True,
                                             chunk_tokens=chunk_tokens)  # [M], [M]
    if separate:
        values = critic(batch)  # [N, L-1]
    else:
        hidden = forward.at(forward.out.hidden_states[-1])  # [M, H]
        values = scatter_back(critic(hidden.float()).squeeze(-1), forward.mask)  # [N, L-1]
    return scatter_back(logprobs, forward.mask), values, scatter_back(entropy, forward.mask)
