"""model.gradient_checkpointing: recomputing activations in backward gives the gradients of a plain backward."""

from __future__ import annotations

import torch
from omegaconf import OmegaConf


def test_gradient_checkpointing_gives_the_same_gradients(tiny_lm_sft):
    from rlvr.trainer.algos.grpo import accumulate_gradients
    from rlvr.trainer.models.logprobs import pack
    from rlvr.trainer.models.model import build_policy

    tok = tiny_lm_sft.tokenizer
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in ("3+4=", "3+4=", "5+1=", "5+1=")]
    completions = [tok(t, add_special_tokens=False)["input_ids"] for t in ("7", "8", "6", "61")]
    batch = pack(prompts, completions, tok.pad_token_id)
    algo = OmegaConf.create({"beta": 0.0, "kl_estimator": "k3", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
                             "aggregation": "seq_mean_token_mean", "importance_level": "token"})
    grads = {}
    for checkpointing in (False, True):
        cfg = OmegaConf.create({"lora": {"r": 0}, "gradient_checkpointing": checkpointing, "autocast": "none"})
        policy = build_policy(cfg, str(tiny_lm_sft.path))
        assert policy.is_gradient_checkpointing == checkpointing
        accumulate_gradients(policy, batch, torch.tensor([1.0, -1.0, 0.5, -0.5]), None, None, algo,
                             micro_batch_size=2, temperature=1.0, max_tokens=4)
        grads[checkpointing] = {n: p.grad.clone() for n, p in policy.named_parameters()}
    assert any(g.abs().max() > 0 for g in grads[False].values())
    for name, grad in grads[False].items():  # the same ops recomputed: equal to float32 rounding
        torch.testing.assert_close(grads[True][name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_bf16_autocast_runs_the_forward_in_bfloat16(tiny_lm_sft):
    """model.autocast=bf16: the weights stay float32, the logits come out of bfloat16 matmuls (close to, not
    equal to, float32's), and a backward reaches the float32 weights."""
    from rlvr.trainer.models.model import build_policy

    ids = tiny_lm_sft.tokenizer("3+4=7", add_special_tokens=False, return_tensors="pt")["input_ids"]
    logits = {}
    for autocast in ("none", "bf16"):
        policy = build_policy(OmegaConf.create({"lora": {"r": 0}, "gradient_checkpointing": False,
                                                "autocast": autocast}), str(tiny_lm_sft.path))
        out = policy(input_ids=ids).logits
        out.float().sum().backward()
        assert all(p.dtype == torch.float32 and p.grad is not None for p in policy.parameters())
        logits[autocast] = out.detach()
    assert logits["bf16"].dtype == torch.bfloat16 and logits["none"].dtype == torch.float32
    difference = (logits["bf16"].float() - logits["none"]).abs().max().item()
    assert 0 < difference < 0.1, difference  # bfloat16 keeps 8 mantissa bits: errors ~1e-2 on logits of size ~10


def test_autocast_paused_computes_as_the_saved_float32_weights(tiny_lm_sft):
    """bench/bench_learning.py evaluates a bf16-trained policy inside `autocast_paused`: its logits must be
    float32's exactly (as `rlvr eval` of the saved checkpoint computes), and the hooks come back after the block."""
    from rlvr.trainer.models.model import autocast_paused, build_policy

    ids = tiny_lm_sft.tokenizer("3+4=7", add_special_tokens=False, return_tensors="pt")["input_ids"]
    config = {"lora": {"r": 0}, "gradient_checkpointing": False}
    plain = build_policy(OmegaConf.create({**config, "autocast": "none"}), str(tiny_lm_sft.path))
    hooked = build_policy(OmegaConf.create({**config, "autocast": "bf16"}), str(tiny_lm_sft.path))
    with torch.no_grad():
        expected = plain(input_ids=ids).logits
        with autocast_paused(hooked):
            paused = hooked(input_ids=ids).logits
        after = hooked(input_ids=ids).logits
    torch.testing.assert_close(paused, expected, rtol=0, atol=0)
    assert after.dtype == torch.bfloat16


def test_the_held_out_eval_of_a_bf16_run_computes_in_float32(tiny_lm_sft, compose_train, tmp_path, monkeypatch):
    """`rlvr train model.autocast=bf16` on rollout=hf: the in-run `eval/accuracy` is the checkpoint's float32 number
    (what `rlvr eval` reads), not the autocast's; the steps around it still run in bfloat16."""
    import rlvr.trainer.run as run

    seen, engines = [], []
    real = run.evaluate_greedy

    def spying(engine, *args, **kwargs):  # every forward the held-out eval makes, by the dtype of its logits
        hf = engine.engine  # inside PolicyEngine: the HF engine, generating with the policy
        hook = hf.model.register_forward_hook(lambda module, inputs, out: seen.append(out.logits.dtype))
        try:
            return real(engine, *args, **kwargs)
        finally:
            hook.remove()
            engines.append(hf)

    monkeypatch.setattr(run, "evaluate_greedy", spying)
    run.train(compose_train([
        f"model.name_or_path={tiny_lm_sft.path}", "model.autocast=bf16", "rollout=hf", "env.digits=1",
        "train.steps=1", "train.eval_every=1", "train.save_every=1", "train.eval_prompts=4",
        "train.prompts_per_step=2", "train.completions_per_prompt=2", "threads=1", f"output_dir={tmp_path}/run"]),
        log=lambda *a, **k: None)
    assert len(engines) == 2 and seen and set(seen) == {torch.float32}  # steps 0 and 1, every decode step
    ids = tiny_lm_sft.tokenizer("3+4=7", add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert engines[-1].model(input_ids=ids).logits.dtype == torch.bfloat16  # the pause ends with the eval
