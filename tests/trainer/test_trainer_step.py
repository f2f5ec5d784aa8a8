"""The GRPO step end to end on a tiny model: gradient accumulation is exact, one step moves every
parameter (TRL's test), and the step logs the metrics docs/concepts/run-directory.md lists for
metrics.jsonl."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

from rlvr.envs.arithmetic import ArithmeticEnv
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.step import train_step
from rlvr.trainer.algos.grpo import accumulate_gradients
from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.context import RunContext
from rlvr.verifiers.result import Status, VerifyResult

MAX_NEW_TOKENS = 16


def grpo_step(ctx, step):  # GRPO's row in the frame of every step (trainer/step.py)
    return train_step(ctx, step, ALGORITHMS["grpo"])


@pytest.fixture(scope="module")
def packed_rollout(tiny_lm_sft):
    """8 completions (2 prompts x 4) of varied length from the SFT model, packed, with random advantages."""
    from rlvr.envs import load_env

    env = load_env("arithmetic", digits=1, ops=["+"])
    tok = tiny_lm_sft.tokenizer
    torch.manual_seed(0)
    rollout = HFEngine(tiny_lm_sft.model(), tok).generate(
        render_prompts(tok, env, env.rows("train", 2, seed=0)), SamplingParams(n=4, max_new_tokens=MAX_NEW_TOKENS)
    )
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id)
    assert len({len(c) for c in rollout.completion_ids}) > 1, "varied lengths make the aggregations differ"
    return batch, torch.randn(len(batch), generator=torch.Generator().manual_seed(1))


def _algo(aggregation, beta):
    return SimpleNamespace(beta=beta, kl_estimator="k3", clip_eps_low=0.2, clip_eps_high=0.28, aggregation=aggregation,
                           importance_level="token")


@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_micro_batch_1_x_8_equals_8_x_1(tiny_lm_sft, packed_rollout, aggregation, beta):
    batch, advantages = packed_rollout
    policy = tiny_lm_sft.model()
    with torch.no_grad():
        current, _ = token_logprobs(policy, batch)  # [N, L-1]
        # As with mu > 1: old logprobs differ from the current ones, so ratios move and some clip.
        old = current + 0.3 * torch.randn(current.shape, generator=torch.Generator().manual_seed(2))
        reference = tiny_lm_sft.model()
        for p in reference.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
        ref = token_logprobs(reference, batch)[0] if beta else None

    grads, metrics = [], []
    for micro_batch_size in (1, 8):
        model = tiny_lm_sft.model()
        model.zero_grad(set_to_none=True)
        metrics.append(accumulate_gradients(model, batch, advantages, old, ref, _algo(aggregation, beta),
                                            micro_batch_size=micro_batch_size, temperature=1.0,
                                            max_tokens=MAX_NEW_TOKENS))
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})

    one, eight = grads
    assert one.keys() == eight.keys()
    for name in one:
        torch.testing.assert_close(one[name], eight[name], atol=1e-6, rtol=1e-5, msg=lambda m: f"{name}: {m}")
    assert any(g.abs().max() > 1e-4 for g in eight.values())
    assert metrics[0]["clip_frac"] > 0, "the perturbed old logprobs should clip some tokens"
    assert metrics[0].keys() == metrics[1].keys()
    for key in metrics[0]:
        assert metrics[0][key] == pytest.approx(metrics[1][key], rel=1e-5, abs=1e-6), key
    if beta:
        assert metrics[1]["kl"] > 1e-4


class AlternatingRewardEnv(ArithmeticEnv):
    """Arithmetic prompts whose completions score 1, 0, 1, 0, ... in order: every group has reward variance.
    Subclassing leaves it unregistered (the decorator registered ArithmeticEnv only)."""

    def score(self, completions, rows):
        return [VerifyResult(float(i % 2), Status.CORRECT if i % 2 else Status.INCORRECT) for i in range(len(completions))]


def _context(cfg, env, lm, lr):
    model = lm.model()
    reference = None
    if cfg.algo.beta:
        reference = lm.model().eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=tuple(cfg.optim.betas), weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    sampling = SamplingParams(n=cfg.train.completions_per_prompt, max_new_tokens=cfg.rollout.max_new_tokens,
                              temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, top_k=cfg.rollout.top_k,
                              stop=tuple(cfg.rollout.stop))
    return RunContext(cfg, env, lm.tokenizer, model, reference, HFEngine(model, lm.tokenizer), sampling,
                      optimizer, scheduler)


STEP_OVERRIDES = ["train.prompts_per_step=2", "train.completions_per_prompt=4", "train.micro_batch_size=4",
                  f"rollout.max_new_tokens={MAX_NEW_TOKENS}", "optim.lr=1e-2", "env.digits=1"]


@pytest.mark.parametrize("lm_name", ["tiny_lm", "tiny_lm_sft"])
def test_one_step_changes_every_parameter(request, compose_train, lm_name):
    lm = request.getfixturevalue(lm_name)
    cfg = compose_train(STEP_OVERRIDES)
    ctx = _context(cfg, AlternatingRewardEnv(digits=1, ops=["+"]), lm, lr=1e-2)
    before = {name: p.detach().clone() for name, p in ctx.model.named_parameters()}
    torch.manual_seed(0)
    metrics, _ = grpo_step(ctx, step=1)

    assert metrics["zero_adv_frac"] == 0.0 and metrics["reward/std"] > 0, "the rewards must vary within groups"
    unchanged = [name for name, p in ctx.model.named_parameters() if torch.equal(p.detach(), before[name])]
    assert not unchanged, f"parameters a GRPO step left unchanged: {unchanged}"
    assert ctx.engine.model is ctx.model


RUN_DIR_METRICS = ["step", "reward/mean", "reward/std", "clip_frac", "entropy", "loss", "grad_norm",
                  "response_len/mean", "truncated_frac", "zero_adv_frac", "tokens_per_s",
                  "time/generate", "time/score", "time/logprobs", "time/update", "time/sync"]


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_step_logs_the_design_metrics(tiny_lm_sft, compose_train, beta):
    cfg = compose_train(STEP_OVERRIDES + [f"algo.beta={beta}", "algo.mu=2"])
    env = ArithmeticEnv(digits=1, ops=["+"])
    ctx = _context(cfg, env, tiny_lm_sft, lr=1e-3)
    torch.manual_seed(0)
    metrics, samples = grpo_step(ctx, step=3)

    missing = [k for k in RUN_DIR_METRICS if k not in metrics]
    assert not missing, f"metrics lack {missing}; have {sorted(metrics)}"
    assert metrics["step"] == 3
    assert ("kl" in metrics) == bool(beta)
    for component in env.verifier_names:  # per-verifier rewards: reward/exact, reward/format
        assert 0.0 <= metrics[f"reward/{component}"] <= 1.0
    statuses = {k: v for k, v in metrics.items() if k.startswith("status/")}
    assert statuses and math.isclose(sum(statuses.values()), 1.0)
    assert set(k.removeprefix("status/") for k in statuses) <= {s.value for s in Status}
    assert 0 <= metrics["truncated_frac"] <= 1 and 0 <= metrics["zero_adv_frac"] <= 1
    assert 1 <= metrics["response_len/mean"] <= MAX_NEW_TOKENS
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()), metrics
    json.dumps(metrics)

    assert len(samples) == min(cfg.train.logged_prompts_per_step, 2)
    assert len(samples[0]["completions"]) == 4
    assert {"text", "reward", "status", "details"} <= samples[0]["completions"][0].keys()
