"""rlvr's DPO losses (trainer/algos/dpo_loss.py) against TRL 1.16's DPOTrainer on identical tensors, and by hand.

TRL's loss lives inside `DPOTrainer._compute_loss`, which runs the model itself. To call TRL's own code
without building a trainer (no dataset, no accelerate setup), the test makes a bare instance
(`DPOTrainer.__new__`), sets the attributes `_compute_loss` reads, and hands it a stand-in model whose
output carries chosen per-token logprobs (what TRL's fused LM head returns: logprobs of the completion
tokens, 0 elsewhere); reference logprobs go in precomputed (`precompute_ref_logps`), as TRL allows.
TRL 1.16's "sigmoid" ignores label_smoothing, so cDPO is compared with TRL's "aot" loss called on one
pair at a time: sorting one value is the identity, and "aot" then is exactly
-(1 - eps) log sigmoid(beta * delta) - eps log sigmoid(-beta * delta).
"""

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from rlvr.trainer.algos.dpo_loss import dpo_loss

PROMPT_LEN, WIDTH = 3, 12
LENGTHS = [2, 5, 9, 4, 7, 1]  # completion tokens of 3 chosen, then 3 rejected sequences


def _sequences(seed: int):
    """Per-token logprobs [2P, WIDTH-1] on the completion positions (0 elsewhere) and the masks TRL reads."""
    generator = torch.Generator().manual_seed(seed)
    completion_mask = torch.zeros(len(LENGTHS), WIDTH, dtype=torch.long)  # [2P, T], unshifted, as TRL
    for i, n in enumerate(LENGTHS):
        completion_mask[i, PROMPT_LEN : PROMPT_LEN + n] = 1
    shifted = completion_mask[:, 1:].float()  # [2P, T-1]
    token_logps = -torch.rand(len(LENGTHS), WIDTH - 1, generator=generator) * 3 * shifted  # [2P, T-1]
    ref_logps = token_logps.sum(1) + torch.randn(len(LENGTHS), generator=generator)  # [2P]
    return token_logps, ref_logps, completion_mask


def _trl_loss(loss_type: str, beta: float, label_smoothing: float, token_logps, ref_logps, completion_mask):
    from trl.trainer.dpo_trainer import DPOTrainer

    trainer = DPOTrainer.__new__(DPOTrainer)
    attributes = dict(
        beta=beta, label_smoothing=label_smoothing, loss_types=[loss_type], loss_weights=[1.0], ld_alpha=None,
        f_divergence_type="reverse_kl", precompute_ref_logps=True, aux_loss_enabled=False, use_weighting=False,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _total_train_tokens=0, _tp_size=1,
        accelerator=SimpleNamespace(device=torch.device("cpu"), gather=lambda t: t, gather_for_metrics=lambda t: t),
    )
    trainer.__dict__.update(attributes)
    rows = token_logps.shape[0]

    def model(**_):
        zeros = torch.zeros(rows, WIDTH - 1)
        return SimpleNamespace(log_probs=token_logps, entropy=zeros, mean_logits=zeros,
                               is_top1=torch.zeros(rows, WIDTH - 1, dtype=torch.bool))

    model.training = True
    trainer.model = model
    half = rows // 2
    inputs = {"input_ids": torch.zeros(rows, WIDTH, dtype=torch.long), "attention_mask": torch.ones(rows, WIDTH),
              "completion_mask": completion_mask, "ref_chosen_logps": ref_logps[:half],
              "ref_rejected_logps": ref_logps[half:]}
    loss = trainer._compute_loss(model, inputs, return_outputs=False)
    return loss, {k: v[-1] for k, v in trainer._metrics["train"].items()}


def _ours(loss_type, beta, label_smoothing, token_logps, ref_logps, completion_mask):
    logps = token_logps.sum(1)  # [2P]
    lengths = completion_mask.sum(1).float()  # [2P]
    half = len(logps) // 2
    return dpo_loss(logps[:half], logps[half:], ref_logps[:half], ref_logps[half:], beta=beta, loss_type=loss_type,
                    label_smoothing=label_smoothing, chosen_lengths=lengths[:half], rejected_lengths=lengths[half:])


@pytest.mark.parametrize("loss_type,beta", [("sigmoid", 0.1), ("sigmoid", 0.5), ("ipo", 0.1), ("ipo", 1.0)])
def test_matches_trl_loss_and_metrics(loss_type, beta):
    for seed in range(3):
        tensors = _sequences(seed)
        trl_loss, trl_metrics = _trl_loss(loss_type, beta, 0.0, *tensors)
        loss, metrics = _ours(loss_type, beta, 0.0, *tensors)
        assert loss.item() == pytest.approx(trl_loss.item(), rel=1e-6, abs=1e-7)
        for ours, theirs in [("rewards/chosen", "rewards/chosen"), ("rewards/rejected", "rewards/rejected"),
                             ("rewards/margin", "rewards/margins"), ("rewards/accuracy", "rewards/accuracies")]:
            assert metrics[ours].item() == pytest.approx(trl_metrics[theirs], rel=1e-6, abs=1e-7), ours


@pytest.mark.parametrize("label_smoothing", [0.1, 0.3])
def test_cdpo_matches_trl_aot_on_single_pairs(label_smoothing):
    token_logps, ref_logps, completion_mask = _sequences(7)
    loss, _ = _ours("sigmoid", 0.2, label_smoothing, token_logps, ref_logps, completion_mask)
    half = len(LENGTHS) // 2
    per_pair = []
    for i in range(half):
        rows = torch.tensor([i, i + half])
        trl_loss, _ = _trl_loss("aot", 0.2, label_smoothing, token_logps[rows], ref_logps[rows], completion_mask[rows])
        per_pair.append(trl_loss.item())
    assert loss.item() == pytest.approx(sum(per_pair) / half, rel=1e-6)
    plain, _ = _ours("sigmoid", 0.2, 0.0, token_logps, ref_logps, completion_mask)
    assert loss.item() != pytest.approx(plain.item(), rel=1e-3)  # smoothing really changes the loss


def test_hand_derived_values():
    # One pair: policy logps chosen -10, rejected -12; reference chosen -11, rejected -11; beta 0.5.
    # log-ratios: chosen -10 - (-11) = 1, rejected -12 - (-11) = -1; delta = 1 - (-1) = 2; beta * delta = 1.
    # sigmoid: -log sigmoid(1) = log(1 + e^-1) = 0.3132617
    # cDPO eps 0.25: 0.75 * log(1 + e^-1) + 0.25 * log(1 + e^1) = 0.75 * 0.3132617 + 0.25 * 1.3132617 = 0.5632617
    # rewards: chosen 0.5 * 1 = 0.5, rejected 0.5 * -1 = -0.5, margin 1.0, accuracy 1
    # IPO with lengths 2 (chosen) and 4 (rejected): 1/2 - (-1/4) = 0.75; 1/(2 beta) = 1; (0.75 - 1)^2 = 0.0625
    args = [torch.tensor([-10.0]), torch.tensor([-12.0]), torch.tensor([-11.0]), torch.tensor([-11.0])]
    loss, metrics = dpo_loss(*args, beta=0.5)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1)))
    assert loss.item() == pytest.approx(0.3132617, abs=1e-7)
    assert [metrics[k].item() for k in ("rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy")] \
        == pytest.approx([0.5, -0.5, 1.0, 1.0])
    loss, _ = dpo_loss(*args, beta=0.5, label_smoothing=0.25)
    assert loss.item() == pytest.approx(0.5632617, abs=1e-7)
    loss, _ = dpo_loss(*args, beta=0.5, loss_type="ipo", chosen_lengths=torch.tensor([2.0]),
                       rejected_lengths=torch.tensor([4.0]))
    assert loss.item() == pytest.approx(0.0625)


def test_micro_batches_add_up_to_the_batch_mean_gradient():
    torch.manual_seed(0)
    logps = torch.randn(8, requires_grad=True)  # [2P], P = 4
    ref = torch.randn(8)
    full, _ = dpo_loss(logps[:4], logps[4:], ref[:4], ref[4:], beta=0.3)
    (full_grad,) = torch.autograd.grad(full, logps)
    total = 0
    for rows in (slice(0, 1), slice(1, 4)):  # micro-batches of 1 and 3 pairs, each divided by the 4 pairs
        chosen, rejected = logps[:4][rows], logps[4:][rows]
        part, _ = dpo_loss(chosen, rejected, ref[:4][rows], ref[4:][rows], beta=0.3, num_pairs=4)
        total = total + part
    (micro_grad,) = torch.autograd.grad(total, logps)
    assert total.item() == pytest.approx(full.item())
    assert torch.allclose(micro_grad, full_grad)


def test_ipo_without_lengths_is_refused():
    one = torch.zeros(1)
    with pytest.raises(ValueError, match="chosen_lengths"):
        dpo_loss(one, one, one, one, beta=0.1, loss_type="ipo")
