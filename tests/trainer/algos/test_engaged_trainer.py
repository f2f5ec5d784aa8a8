"""Trainer switches shown engaged (issue 52): each test asserts the value only the switch gives, so it fails when the
switch is ignored (tests/mutation_check.py switches each off and requires these to fail)."""

import pytest
import torch
from omegaconf import OmegaConf

from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from rlvr.trainer.algos import grpo
from rlvr.trainer.algos.update import learning_rate_schedule
from tests.trainer.algos.test_algorithm_steps import _context
from tests.trainer.test_trainer_step import STEP_OVERRIDES


@pytest.mark.parametrize("schedule,after", [
    ("constant", [1.0, 1.0, 1.0]),
    ("linear", [1.0, 1 - 1 / 6, 1 - 2 / 6]),  # (step - 4) / (10 - 4) of the way to 0
])
def test_warmup_ramps_the_learning_rate_linearly_then_the_schedule_runs(schedule, after):
    """optim.warmup_steps=4: the factor on optim.lr is 1/4, 2/4, 3/4, 4/4 over the first four steps (step 0 already
    trains at 1/4, not 0), then the schedule starts from 1. Read through torch's LambdaLR as the loop uses it."""
    factor = learning_rate_schedule(OmegaConf.create({"warmup_steps": 4, "schedule": schedule}), total_steps=10)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    rates = []
    for _ in range(7):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([0.1 * f for f in [0.25, 0.5, 0.75, 1.0, *after]])


def test_dr_grpo_trains_on_advantages_not_divided_by_the_groups_std(tiny_lm_sft, compose_train, monkeypatch):
    """algo=dr_grpo (algo.scale_advantages_by_std=false): the update receives r - mean(r) per group. The fixture's
    rewards alternate 1, 0 in each group of 4 (std 0.577), so the std-scaled advantage (+-0.866) is told apart."""
    cfg = compose_train(STEP_OVERRIDES + ["algo=dr_grpo"])
    assert cfg.algo.scale_advantages_by_std is False
    ctx = _context(cfg, tiny_lm_sft)
    seen, update = {}, grpo.accumulate_gradients

    def recording(model, rows, advantages, *args, **kwargs):
        seen["advantages"] = advantages.clone()
        return update(model, rows, advantages, *args, **kwargs)

    monkeypatch.setattr(grpo, "accumulate_gradients", recording)
    torch.manual_seed(0)
    train_step(ctx, 1, ALGORITHMS["dr_grpo"])
    groups = cfg.train.prompts_per_step
    expected = torch.tensor([0.5, -0.5] * (2 * groups))  # rewards 0, 1, 0, 1 in a group: mean 0.5
    expected = -expected  # the first completion of a group scores 0: 0 - 0.5
    torch.testing.assert_close(seen["advantages"], expected)


@pytest.mark.parametrize("checkpointing,forwards", [(False, 1), (True, 2)])
def test_gradient_checkpointing_recomputes_each_layer_in_backward(tiny_lm_sft, checkpointing, forwards):
    """model.gradient_checkpointing=true: a layer's activations are not kept but recomputed in backward, so each
    decoder layer's MLP runs twice per forward+backward (once without). Counted with a forward pre-hook inside the
    checkpointed region; equal gradients alone (test_grad_ckpt.py) would hold with the setting ignored."""
    from rlvr.trainer.models.model import build_policy

    cfg = OmegaConf.create({"lora": {"r": 0}, "gradient_checkpointing": checkpointing, "autocast": "none"})
    policy = build_policy(cfg, str(tiny_lm_sft.path))
    policy.train()
    layers = policy.model.layers
    calls = [0] * len(layers)
    for i, layer in enumerate(layers):
        # a pre-hook: torch's non-reentrant recompute stops as soon as the saved tensors backward needs are back,
        # before the MLP's forward returns, so a forward (post) hook never sees the second run
        layer.mlp.register_forward_pre_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
    ids = tiny_lm_sft.tokenizer("3+4=7", add_special_tokens=False, return_tensors="pt")["input_ids"]
    policy(input_ids=ids).logits.float().sum().backward()
    assert calls == [forwards] * len(layers)


def test_importance_cap_weights_the_gradient_by_the_capped_ratio(tiny_lm_sft):
    """rollout.importance_cap=2 with an engine that gave every sampled token a quarter of the trainer's probability:
    each token's weight is min(4, 2) = 2, so the gradient is twice the uncorrected one (at mu=1 the ratio is 1 and
    nothing clips). Ignored, the gradient would equal the uncorrected one."""
    import math

    from rlvr.trainer.algos.grpo import accumulate_gradients
    from rlvr.trainer.models.logprobs import pack, token_logprobs
    from rlvr.trainer.models.model import build_policy

    tok = tiny_lm_sft.tokenizer
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in ("3+4=", "3+4=", "5+1=", "5+1=")]
    completions = [tok(t, add_special_tokens=False)["input_ids"] for t in ("7", "8", "6", "61")]
    batch = pack(prompts, completions, tok.pad_token_id)
    algo = OmegaConf.create({"beta": 0.0, "kl_estimator": "k3", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
                             "aggregation": "token_mean", "importance_level": "token"})
    cfg = OmegaConf.create({"lora": {"r": 0}, "gradient_checkpointing": False, "autocast": "none"})
    policy = build_policy(cfg, str(tiny_lm_sft.path))
    with torch.no_grad():
        trainer = token_logprobs(policy, batch)[0]  # [N, L-1]
    engine = trainer - math.log(4.0) * batch.completion_mask  # [N, L-1] the engine's: a quarter of the probability
    grads = {}
    for cap in (None, 2.0):
        policy.zero_grad(set_to_none=True)
        accumulate_gradients(policy, batch, torch.tensor([1.0, -1.0, 0.5, -0.5]), None, None, algo,
                             micro_batch_size=4, temperature=1.0, max_tokens=4, engine_logprobs=engine,
                             importance_cap=cap)
        grads[cap] = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
    assert any(g.abs().max() > 0 for g in grads[None].values())
    for name, grad in grads[None].items():
        torch.testing.assert_close(grads[2.0][name], 2 * grad, rtol=1e-4, atol=1e-7, msg=name)
