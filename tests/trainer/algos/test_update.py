"""trainer/algos/update.py on a toy loss: the gradient does not depend on the micro-batch size, and the
metrics are combined as its docstring says (sums add, means weigh by tokens or rows, entropy is the
token mean over the whole batch)."""

import pytest
import torch

from rlvr.trainer.algos.update import MicroLoss, accumulate, accumulate_and_step, batch_counts

# 4 rows with 3, 1, 2 and 0 completion tokens; a per-row statistic 1, 2, 3, 4 and per-token entropy 0.5 x row
MASK = torch.tensor([[1.0, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 0]])  # [N, T]
STAT = torch.tensor([1.0, 2.0, 3.0, 4.0])  # [N]
ENTROPY = 0.5 * torch.arange(1.0, 5.0).unsqueeze(-1).expand(4, 3) * MASK  # [N, T]


def _run(micro_batch_size, per="token"):
    weight = torch.nn.Parameter(torch.ones(3))  # [T]
    counts = batch_counts(len(MASK), MASK.sum(), micro_batch_size)

    def micro_loss(rows):
        mask = MASK[rows]  # [n, T]
        loss = (weight * STAT[rows, None] * mask).sum() / counts.tokens  # normalised by the whole batch's tokens
        tokens = mask.sum().clamp(min=1)
        return MicroLoss(loss, len(mask), mask, ENTROPY[rows], means={"stat": (STAT[rows] * mask.sum(-1)).sum() / tokens
                                                                      if per == "token" else STAT[rows].mean()},
                         sums={"tokens_seen": mask.sum() / counts.tokens})

    metrics = accumulate(micro_loss, counts, per)
    return metrics, weight.grad.clone()


def test_micro_batches_add_their_metrics_as_documented():
    metrics, _ = _run(1)
    assert metrics["tokens_seen"] == pytest.approx(1.0)  # sums add up to the whole
    assert metrics["stat"] == pytest.approx((1 * 3 + 2 * 1 + 3 * 2) / 6)  # token-weighted mean
    assert metrics["entropy"] == pytest.approx((0.5 * 3 + 1.0 * 1 + 1.5 * 2) / 6)  # over all 6 tokens
    by_rows, _ = _run(1, per="sequence")
    assert by_rows["stat"] == pytest.approx((1 + 2 + 3 + 4) / 4)  # row-weighted mean (DPO's pairs)


@pytest.mark.parametrize("per", ["token", "sequence"])
def test_the_gradient_and_metrics_do_not_depend_on_the_micro_batch_size(per):
    whole, grad_whole = _run(4, per)
    torch.testing.assert_close(grad_whole, torch.tensor([1 + 2 + 3, 1 + 3, 1.0]) / 6)  # sum_rows STAT x mask / 6
    for size in (1, 2, 3):
        metrics, grad = _run(size, per)
        torch.testing.assert_close(grad, grad_whole)
        for key in ("loss", "stat", "entropy", "tokens_seen"):
            assert metrics[key] == pytest.approx(whole[key]), (size, key)


def test_accumulate_and_step_clips_steps_and_zeroes():
    model = torch.nn.Linear(3, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    before = model.weight.detach().clone()
    counts = batch_counts(2, torch.tensor(2.0), 1)

    def micro_loss(rows):
        return MicroLoss(100 * model(torch.ones(1, 3)).sum(), 1, torch.ones(1, 1))

    metrics = accumulate_and_step(micro_loss, counts, optimizer, model, max_grad_norm=1.0)
    assert metrics["grad_norm"] == pytest.approx(200 * 3 ** 0.5)  # before clipping: 2 micro-batches x 100 x [1, 1, 1]
    torch.testing.assert_close((before - model.weight).norm(), torch.tensor(1.0))  # clipped to norm 1, lr 1
    assert model.weight.grad is None
