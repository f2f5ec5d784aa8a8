"""model.lora (trainer/models/lora.py): a GRPO update moves the adapters only; the reference (adapters
disabled) gives the base model's logprobs; the checkpoint is the merged model in HF format, and a
resumed run gets the adapters back."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

pytest.importorskip("peft")  # the lora extra, installed by `make test` (rlvr[test] includes it)


def _lora_cfg(r=4):
    return OmegaConf.create({"lora": {"r": r, "alpha": 8.0, "dropout": 0.0, "target_modules": ["all-linear"]},
                             "gradient_checkpointing": False, "autocast": "none"})


def _batch(tokenizer):
    from rlvr.trainer.models.logprobs import pack

    prompts = [tokenizer("3+4=", add_special_tokens=False)["input_ids"]] * 2 + \
              [tokenizer("5+1=", add_special_tokens=False)["input_ids"]] * 2
    completions = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in ("7", "8", "6", "61")]
    return pack(prompts, completions, tokenizer.pad_token_id)


def _grpo_update(policy, batch, steps=3):
    from rlvr.trainer.algos.grpo import accumulate_gradients

    algo = OmegaConf.create({"beta": 0.0, "kl_estimator": "k3", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
                             "aggregation": "token_mean", "importance_level": "token"})
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2, weight_decay=0.1)  # decay would move frozen weights
    for _ in range(steps):
        accumulate_gradients(policy, batch, torch.tensor([1.0, -1.0, 1.0, -1.0]), None, None, algo,
                             micro_batch_size=2, temperature=1.0, max_tokens=4)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return optimizer


@pytest.fixture
def trained(tiny_lm_sft):
    from rlvr.trainer.models.model import build_policy

    policy = build_policy(_lora_cfg(), str(tiny_lm_sft.path), seed=0)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    batch = _batch(tiny_lm_sft.tokenizer)
    optimizer = _grpo_update(policy, batch)
    return policy, before, batch, optimizer


def test_only_adapter_parameters_change(trained):
    policy, before, _, _ = trained
    adapters = [n for n in before if "lora_" in n]
    assert adapters
    for name, p in policy.named_parameters():
        if "lora_" in name:
            assert p.requires_grad and not torch.equal(p, before[name]), name
        else:
            assert not p.requires_grad and torch.equal(p, before[name]), name


def test_reference_logprobs_equal_the_base_model(trained, tiny_lm_sft):
    from rlvr.trainer.models.logprobs import token_logprobs
    from rlvr.trainer.models.model import build_reference, load_reference

    policy, _, batch, _ = trained
    mask = batch.completion_mask.bool()
    with torch.no_grad():
        base = token_logprobs(load_reference(str(tiny_lm_sft.path)), batch)[0][mask]
        reference = token_logprobs(build_reference(policy, str(tiny_lm_sft.path)), batch)[0][mask]
        trained_logprobs = token_logprobs(policy, batch)[0][mask]
    assert (trained_logprobs - base).abs().max() > 1e-2  # the adapters did move the policy
    torch.testing.assert_close(reference, base, rtol=1e-6, atol=1e-6)  # float32 rounding of logprobs near -7
    assert sum(p.numel() for p in build_reference(policy, "").parameters()) == 0  # no second copy


def test_checkpoint_is_the_merged_model_and_resume_gets_the_adapters(trained, tiny_lm_sft, tmp_path):
    from transformers import AutoModelForCausalLM

    from rlvr.trainer.checkpoint import save_checkpoint
    from rlvr.trainer.models.logprobs import token_logprobs
    from rlvr.trainer.models.model import build_policy

    policy, _, batch, optimizer = trained
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    path = save_checkpoint(tmp_path, 1, policy, tiny_lm_sft.tokenizer, optimizer, scheduler, {})
    merged = AutoModelForCausalLM.from_pretrained(path)
    assert json.loads((path / "config.json").read_text())["architectures"] == ["Qwen2ForCausalLM"]
    assert not any("lora" in name for name in merged.state_dict())
    resumed = build_policy(_lora_cfg(), str(tiny_lm_sft.path), checkpoint=path)
    mask = batch.completion_mask.bool()
    with torch.no_grad():
        expected = token_logprobs(policy, batch)[0][mask]
        torch.testing.assert_close(token_logprobs(merged, batch)[0][mask], expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(token_logprobs(resumed, batch)[0][mask], expected, rtol=0, atol=1e-6)
    assert all(p.requires_grad == ("lora_" in n) for n, p in resumed.named_parameters())


def test_an_engine_that_copies_weights_gets_the_merged_model(trained):
    """trainer/rollout/weights.py's one path: vLLM (copies_weights) is handed W + (alpha / r) B A on a copy,
    HF generate the adapter model itself."""
    from rlvr.trainer.models.logprobs import token_logprobs
    from rlvr.trainer.models.lora import for_engine, is_lora

    policy, _, batch, _ = trained
    assert for_engine(policy, copies_weights=False) is policy
    merged = for_engine(policy, copies_weights=True)
    assert not is_lora(merged) and is_lora(policy)  # merged on a copy: the policy keeps its adapters
    mask = batch.completion_mask.bool()
    with torch.no_grad():
        torch.testing.assert_close(token_logprobs(merged, batch)[0][mask], token_logprobs(policy, batch)[0][mask],
                                   rtol=0, atol=1e-5)


def test_lora_config_errors(compose_train):
    from rlvr.trainer.validate import validate_train_config
    from rlvr.errors import ConfigError

    with pytest.raises(ConfigError, match=r"model.lora: r=4 .* dropout=1.5"):
        validate_train_config(compose_train(["model.lora.r=4", "model.lora.dropout=1.5"]))
    with pytest.raises(ConfigError, match=r"model.lora.r > 0 runs with trainer.strategy=none or ddp, not fsdp2"):
        validate_train_config(compose_train(["model.lora.r=4", "trainer.strategy=fsdp2"]))


def test_train_with_lora_and_kl_end_to_end(tiny_lm_sft, compose_train, tmp_path):
    """`rlvr train model.lora.r=4 algo.beta=0.04`: the KL is 0 at step 1 (reference = adapters off = the
    starting policy, since B = 0), positive once the adapters moved; the final checkpoint loads with from_pretrained."""
    from transformers import AutoModelForCausalLM

    from rlvr.trainer.run import train

    cfg = compose_train(["rollout=hf", f"model.name_or_path={tiny_lm_sft.path}", "env.digits=1", "env.ops=[+]",
                         "model.lora.r=4", "algo.beta=0.04", "train.steps=2",
                         "train.prompts_per_step=2", "train.completions_per_prompt=4", "train.eval_prompts=4",
                         "optim.lr=1e-2", f"output_dir={tmp_path}", "threads=1"])
    train(cfg, log=lambda *a, **k: None)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2]
    assert lines[1]["kl"] == pytest.approx(0.0, abs=1e-7) and lines[2]["kl"] > 1e-6
    AutoModelForCausalLM.from_pretrained(tmp_path / "checkpoints" / "step_2")
    assert (tmp_path / "checkpoints" / "step_2" / "adapter" / "adapter_config.json").exists()


def test_resume_refuses_a_different_lora_layout(compose_train):
    """A LoRA run's optimizer holds moments for its adapters only: resuming it without them (or with another
    rank) would fail deep inside torch, so the check names the keys instead."""
    from rlvr.trainer.checkpoint import resume_conflicts

    lora = compose_train(["model.lora.r=8"])
    assert resume_conflicts(lora, compose_train(["model.lora.r=8", "optim.lr=1e-3"])) == []  # other keys may change
    assert resume_conflicts(lora, compose_train([])) == ["model.lora.r: 8 in the run, 0 now",
                                                        "model.lora.target_modules: ['all-linear'] in the run, None now"]


@pytest.mark.parametrize("critic", ["head", "model"])
def test_ppo_with_lora_trains_adapters_and_critic(tiny_lm_sft, compose_train, critic):
    """PPO on a LoRA policy: the policy's base weights stay frozen, its adapters and the critic train."""
    from rlvr.trainer.models.model import build_policy
    from rlvr.trainer.models.critic import build_critic
    from rlvr.trainer.rollout.types import SamplingParams
    from rlvr.trainer.rollout.hf import HFEngine
    from rlvr.trainer.algos.table import ALGORITHMS
    from rlvr.trainer.step import train_step
    from rlvr.trainer.context import RunContext
    from tests.trainer.test_trainer_step import STEP_OVERRIDES, AlternatingRewardEnv

    cfg = compose_train(STEP_OVERRIDES + ["algo=ppo", f"algo.critic={critic}", "model.lora.r=4"])
    policy = build_policy(cfg.model, str(tiny_lm_sft.path), seed=0)
    critic_module = build_critic(policy, critic)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    critic_before = {n: p.detach().clone() for n, p in critic_module.named_parameters() if p.requires_grad}
    optimizer = torch.optim.AdamW(list(policy.parameters()) + list(critic_module.parameters()), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    ctx = RunContext(cfg, AlternatingRewardEnv(digits=1, ops=["+"]), tiny_lm_sft.tokenizer, policy, None,
                     HFEngine(policy, tiny_lm_sft.tokenizer), SamplingParams(n=4, max_new_tokens=8), optimizer,
                     scheduler, critic_module)
    torch.manual_seed(0)
    metrics, _ = train_step(ctx, 1, ALGORITHMS["ppo"])
    for _ in range(2):  # the zero-initialised value head passes no gradient below it on the first step
        metrics, _ = train_step(ctx, 2, ALGORITHMS["ppo"])
    for name, p in policy.named_parameters():
        assert torch.equal(p, before[name]) != ("lora_" in name), name  # adapters moved, base weights did not
    moved = [n for n, p in critic_module.named_parameters() if p.requires_grad and not torch.equal(p, critic_before[n])]
    assert critic_before and len(moved) == len(critic_before), sorted(set(critic_before) - set(moved))
    assert metrics["vf_loss"] > 0
