"""One training step of an algorithm on the tiny model, recording the gradient the optimizer was handed and
the step's metrics: for tests that a setting changes how the step computes but not what (chunked
logprobs, token-budget micro-batches). The rollout is the same under the same seed (HF generate)."""

import torch

from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from tests.trainer.algos.test_algorithm_steps import _context
from tests.trainer.test_trainer_step import STEP_OVERRIDES


class RecordingSGD(torch.optim.SGD):
    """SGD that keeps a copy of every gradient it steps on."""

    def __init__(self, params):
        super().__init__(params, lr=1e-2)
        self.grads: list[dict[int, torch.Tensor]] = []

    def step(self, closure=None):
        self.grads.append({i: p.grad.clone() for i, p in enumerate(self.param_groups[0]["params"])
                           if p.grad is not None})
        return super().step(closure)


def step_gradients(compose_train, lm, overrides: list[str]):
    """(metrics, [per optimizer step: {param index: grad}]) of one step of `overrides`' algorithm."""
    cfg = compose_train(STEP_OVERRIDES + overrides)
    ctx = _context(cfg, lm)
    if ALGORITHMS[cfg.algo.name].needs_reference(cfg.algo):
        ctx.reference = lm.model().eval().requires_grad_(False)
        with torch.no_grad():  # not the policy itself, so the KL (and DPO's margins) are not zero
            for p in ctx.reference.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    params = list(ctx.model.parameters()) + (list(ctx.critic.parameters()) if ctx.critic is not None else [])
    ctx.optimizer = RecordingSGD(params)
    ctx.scheduler = torch.optim.lr_scheduler.LambdaLR(ctx.optimizer, lambda step: 1.0)
    torch.manual_seed(0)
    metrics, _ = train_step(ctx, 1, ALGORITHMS[cfg.algo.name])
    return metrics, ctx.optimizer.grads


def assert_same_step(expected, actual, metric_names=("loss", "entropy")):
    (metrics_a, grads_a), (metrics_b, grads_b) = expected, actual
    assert len(grads_a) == len(grads_b) >= 1
    for step_a, step_b in zip(grads_a, grads_b):
        assert step_a.keys() == step_b.keys()
        for i in step_a:
            torch.testing.assert_close(step_b[i], step_a[i], rtol=1e-5, atol=1e-6, msg=lambda m: f"param {i}: {m}")
        assert any(g.abs().max() > 1e-5 for g in step_a.values()), "a zero gradient proves nothing"
    for name in metric_names:
        assert abs(metrics_a[name] - metrics_b[name]) <= 1e-5 * max(1.0, abs(metrics_a[name])), name
