"""Parity of rlvr.trainer.algos.losses.grpo_loss with TRL 1.16.0's GRPO loss on identical tensors.

We call TRL's real `GRPOTrainer._compute_loss` on a stand-in `self` that holds exactly the
attributes that method reads, with the model forward replaced by our fixed logprobs tensor.

    rlvr aggregation            TRL loss_type
    seq_mean_token_mean         "grpo"
    token_mean                  "bnpo"
    seq_mean_token_sum_norm     "dr_grpo"   (max_tokens = max_completion_length)

KL: TRL always uses the k3 estimator (kl_estimator="k3" here). Compared: the loss value and the
gradient w.r.t. logprobs, plus clip fraction and KL against TRL's logged metrics.
TRL with current_gradient_accumulation_steps=1 is the full-batch loss (no num_sequences / num_tokens).
GSPO: rlvr's importance_level="sequence" against TRL's importance_sampling_level="sequence" with
loss_type="grpo" (the setting TRL's paper index gives for GSPO).
"""

import types
from collections import defaultdict

import pytest
import torch

trl = pytest.importorskip("trl")
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402

from rlvr.trainer.algos.losses import grpo_loss, sequence_log_ratio  # noqa: E402

TRL_VERSION = "1.16"
AGGREGATION_TO_TRL = {
    "seq_mean_token_mean": "grpo",
    "token_mean": "bnpo",
    "seq_mean_token_sum_norm": "dr_grpo",
}
N, T, MAX_COMPLETION_LENGTH = 6, 7, 9
EPS_LOW, EPS_HIGH = 0.2, 0.28


def test_trl_version_is_the_one_we_checked():
    assert trl.__version__.startswith(TRL_VERSION + "."), (
        f"these parity tests were written against TRL {TRL_VERSION}.x, found {trl.__version__}: re-read "
        "GRPOTrainer._compute_loss, update the stand-in self below if it reads new attributes, then bump TRL_VERSION"
    )


def _tensors(seed: int):
    gen = torch.Generator().manual_seed(seed)
    logprobs = -2 * torch.rand(N, T, generator=gen)  # [N, T]
    # old and ref differ by up to +-0.5 nats, so ratios span about [0.6, 1.65]: both clips are hit
    old_logprobs = logprobs + (torch.rand(N, T, generator=gen) - 0.5)  # [N, T]
    ref_logprobs = logprobs + (torch.rand(N, T, generator=gen) - 0.5)  # [N, T]
    advantages = torch.randn(N, generator=gen)  # [N]
    lengths = torch.tensor([7, 1, 4, 6, 2, 5])  # ragged
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # [N, T]
    return logprobs, old_logprobs, ref_logprobs, advantages, mask


class _IdentityAccelerator:
    num_processes = 1
    sync_gradients = True

    def gather(self, tensor):
        return tensor

    def gather_for_metrics(self, tensor):
        return tensor

    def reduce(self, tensor, reduction="sum"):
        return tensor


def _trl_loss(logprobs, old_logprobs, ref_logprobs, advantages, mask, *, loss_type, beta,
              importance_sampling_level="token"):
    """TRL's loss and metrics, with `logprobs` standing in for the model's per-token logprobs."""
    entropies = torch.rand(N, T, generator=torch.Generator().manual_seed(1))  # [N, T], logged only
    fake_self = types.SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *args, **kwargs: (logprobs, entropies, None),
        aux_loss_enabled=False,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level=importance_sampling_level,
        beta=beta,
        args=types.SimpleNamespace(use_bias_correction_kl=False, delta=None),
        loss_type=loss_type,
        epsilon_low=EPS_LOW,
        epsilon_high=EPS_HIGH,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        max_completion_length=MAX_COMPLETION_LENGTH,
        _entropy_bonus_enabled=False,
        _metrics=defaultdict(lambda: defaultdict(list)),
        accelerator=_IdentityAccelerator(),
    )
    inputs = {
        "prompt_ids": torch.zeros(N, 3, dtype=torch.long),
        "prompt_mask": torch.ones(N, 3, dtype=torch.long),
        "completion_ids": torch.zeros(N, T, dtype=torch.long),
        "completion_mask": mask,
        "advantages": advantages,
        "old_per_token_logps": old_logprobs,
    }
    if beta != 0.0:
        inputs["ref_per_token_logps"] = ref_logprobs
    loss = GRPOTrainer._compute_loss(fake_self, None, inputs)
    return loss, fake_self._metrics["train"]


@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("aggregation", sorted(AGGREGATION_TO_TRL))
def test_grpo_loss_matches_trl(aggregation, beta):
    logprobs, old_logprobs, ref_logprobs, advantages, mask = _tensors(seed=0)

    ours_logprobs = logprobs.clone().requires_grad_()
    ours, metrics = grpo_loss(
        ours_logprobs,
        old_logprobs,
        advantages,
        mask,
        ref_logprobs=ref_logprobs,
        beta=beta,
        kl_estimator="k3",
        clip_eps_low=EPS_LOW,
        clip_eps_high=EPS_HIGH,
        aggregation=aggregation,
        max_tokens=MAX_COMPLETION_LENGTH,
    )
    ours.backward()

    trl_logprobs = logprobs.clone().requires_grad_()
    theirs, trl_metrics = _trl_loss(
        trl_logprobs,
        old_logprobs,
        ref_logprobs,
        advantages,
        mask,
        loss_type=AGGREGATION_TO_TRL[aggregation],
        beta=beta,
    )
    theirs.backward()

    assert 0.0 < metrics["clip_frac"].item() < 1.0, "the fixture should exercise clipping"
    torch.testing.assert_close(ours, theirs.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(ours_logprobs.grad, trl_logprobs.grad, atol=1e-6, rtol=0)
    assert metrics["clip_frac"].item() == pytest.approx(trl_metrics["clip_ratio/region_mean"][0], abs=1e-6)
    if beta != 0.0:
        assert metrics["kl"].item() == pytest.approx(trl_metrics["kl"][0], abs=1e-6)


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_gspo_sequence_level_loss_matches_trl(beta):
    logprobs, old_logprobs, ref_logprobs, advantages, mask = _tensors(seed=0)
    seq_ratio = sequence_log_ratio(logprobs, old_logprobs, mask).exp().squeeze(-1)  # [N]
    clipped = ((seq_ratio < 1 - EPS_LOW) & (advantages < 0)) | ((seq_ratio > 1 + EPS_HIGH) & (advantages > 0))
    assert 0 < clipped.sum() < N, "the fixture should clip some sequences, not all"

    ours_logprobs = logprobs.clone().requires_grad_()
    ours, metrics = grpo_loss(ours_logprobs, old_logprobs, advantages, mask, ref_logprobs=ref_logprobs, beta=beta,
                              clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH, aggregation="seq_mean_token_mean",
                              importance_level="sequence")
    ours.backward()
    trl_logprobs = logprobs.clone().requires_grad_()
    theirs, trl_metrics = _trl_loss(trl_logprobs, old_logprobs, ref_logprobs, advantages, mask, loss_type="grpo",
                                    beta=beta, importance_sampling_level="sequence")
    theirs.backward()

    torch.testing.assert_close(ours, theirs.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(ours_logprobs.grad, trl_logprobs.grad, atol=1e-6, rtol=0)
    # TRL logs the fraction of clipped SEQUENCES; rlvr the fraction of tokens in clipped sequences
    assert trl_metrics["clip_ratio/region_mean"][0] == pytest.approx(clipped.float().mean().item(), abs=1e-6)
    lengths = mask.sum(-1).float()  # [N]
    assert metrics["clip_frac"].item() == pytest.approx((lengths * clipped).sum().item() / lengths.sum().item())
    if beta != 0.0:
        assert metrics["kl"].item() == pytest.approx(trl_metrics["kl"][0], abs=1e-6)
