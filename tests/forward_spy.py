"""Record the forward passes a model class runs with gradients on: the shapes a training step feeds its policy.

A test of an optimisation that only compares with the plain path passes when the optimisation does nothing; this
spy lets it also assert the plan it ran (how many forward passes, how many rows and columns each), which only the
optimisation produces. Generation and no-grad scoring (old or reference logprobs) run with gradients off and are
not recorded."""

from __future__ import annotations

import contextlib
import functools

import torch


@contextlib.contextmanager
def grad_forwards(model_class, grad_only: bool = True):
    """Yields a list that collects `input_ids.shape` of each `model_class.forward` call made with grad enabled
    (`grad_only=False`: of every call, generation's included)."""
    shapes: list[tuple[int, ...]] = []
    original = model_class.forward

    @functools.wraps(original)  # generate reads the forward's signature (which arguments it takes)
    def forward(self, *args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if (torch.is_grad_enabled() or not grad_only) and ids is not None:
            shapes.append(tuple(ids.shape))
        return original(self, *args, **kwargs)

    model_class.forward = forward
    try:
        yield shapes
    finally:
        model_class.forward = original
