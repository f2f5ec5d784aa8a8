"""model.lora.peft / rlvr.train(peft_config=...) (trainer/models/lora.py): a peft.LoraConfig passed to peft as it is.
DoRA trains and its checkpoint (merged) reloads to the same logits, and a resume gets the DoRA adapter back;
modules_to_save's module trains and is saved; a field set both ways is refused naming both."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from tests.cli_run import tiny_train
from tests.vllm_model import two_synced_steps
from tests.trainer.models.test_lora import _batch, _grpo_update

peft = pytest.importorskip("peft")


def _lora(peft_fields, **short):
    lora = {"r": 0, "alpha": 32.0, "dropout": 0.0, "target_modules": ["all-linear"], "peft": peft_fields, **short}
    return OmegaConf.create({"lora": lora, "gradient_checkpointing": False, "autocast": "none"})


def _logits(model, batch):
    with torch.no_grad():
        return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits


def test_dora_trains_and_its_checkpoint_reloads_to_the_same_logits(tiny_lm_sft, tmp_path):
    from transformers import AutoModelForCausalLM

    from rlvr.trainer.checkpoint import save_checkpoint
    from rlvr.trainer.models.model import build_policy

    cfg = _lora({"r": 4, "lora_alpha": 8, "use_dora": True, "target_modules": ["q_proj", "v_proj"]})
    policy = build_policy(cfg, str(tiny_lm_sft.path), seed=0)
    assert policy.peft_config["default"].use_dora and policy.peft_config["default"].lora_alpha == 8
    magnitudes = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_magnitude" in n}
    assert magnitudes  # DoRA's magnitude vector, which plain LoRA lacks
    batch = _batch(tiny_lm_sft.tokenizer)
    optimizer = _grpo_update(policy, batch)
    moved = [n for n, p in policy.named_parameters() if n in magnitudes and not torch.equal(p, magnitudes[n])]
    assert moved, "a GRPO update did not move DoRA's magnitudes"

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    checkpoint = save_checkpoint(tmp_path, 1, policy, tiny_lm_sft.tokenizer, optimizer, scheduler, {})
    expected = _logits(policy, batch)
    merged = AutoModelForCausalLM.from_pretrained(checkpoint)  # the merged model, no peft needed
    assert torch.allclose(_logits(merged, batch), expected, atol=1e-4)
    assert json.loads((checkpoint / "adapter" / "adapter_config.json").read_text())["use_dora"] is True

    resumed = build_policy(cfg, str(tiny_lm_sft.path), checkpoint=checkpoint)  # resume: the DoRA adapter again
    assert resumed.peft_config["default"].use_dora
    assert torch.allclose(_logits(resumed, batch), expected, atol=1e-5)


def test_modules_to_save_trains_that_module_and_saves_it(tiny_lm_sft, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from rlvr.trainer.checkpoint import save_checkpoint
    from rlvr.trainer.models.model import build_policy

    cfg = _lora({"modules_to_save": ["model.norm"]}, r=4)  # a short key beside the passthrough fills its field
    policy = build_policy(cfg, str(tiny_lm_sft.path), seed=0)
    assert policy.peft_config["default"].r == 4 and policy.peft_config["default"].lora_alpha == 8  # peft's default
    base_norm = tiny_lm_sft.model().model.norm.weight.detach().clone()
    optimizer = _grpo_update(policy, _batch(tiny_lm_sft.tokenizer))
    trained_norm = policy.base_model.model.model.norm.modules_to_save["default"].weight.detach().clone()
    assert not torch.equal(trained_norm, base_norm), "modules_to_save's copy did not train"

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    checkpoint = save_checkpoint(tmp_path, 1, policy, tiny_lm_sft.tokenizer, optimizer, scheduler, {})
    merged = AutoModelForCausalLM.from_pretrained(checkpoint)
    assert torch.equal(merged.model.norm.weight, trained_norm)  # the trained module, not the base one
    adapter = load_file(checkpoint / "adapter" / "adapter_model.safetensors")
    saved = [v for k, v in adapter.items() if "model.norm" in k]
    assert saved and torch.equal(saved[0], trained_norm)


def test_a_field_set_both_ways_is_refused_naming_both(compose_train):
    from rlvr.errors import ConfigError
    from rlvr.trainer.validate import validate_train_config

    cfg = compose_train(["model.lora.r=16", "model.lora.peft={r:8,use_dora:true}"])
    with pytest.raises(ConfigError, match=r"model\.lora\.r=16 and model\.lora\.peft\.r=8"):
        validate_train_config(cfg)
    cfg = compose_train(["model.lora.peft={use_doraa:true}"])  # a field peft does not know: refused at start
    with pytest.raises(ConfigError, match="model.lora.peft.*use_doraa"):
        validate_train_config(cfg)


def test_train_with_peft_config_end_to_end_and_resume(tiny_lm, tmp_path, monkeypatch):
    """rlvr.train(peft_config=LoraConfig(...)) as TRL's GRPOTrainer takes it: the run trains with that adapter, its
    card and config record it, and a resume continues it."""
    import rlvr

    monkeypatch.chdir(tmp_path)
    args = tiny_train(tiny_lm, "train.steps=1", "output_dir=run")[1:]
    config = peft.LoraConfig(r=4, lora_alpha=16, use_dora=True, target_modules=["q_proj", "v_proj"])
    run = rlvr.train(*args, peft_config=config, log=lambda *a, **k: None)
    adapter = json.loads((run.checkpoint / "adapter" / "adapter_config.json").read_text())
    assert adapter["use_dora"] is True and adapter["r"] == 4 and sorted(adapter["target_modules"]) == ["q_proj",
                                                                                                      "v_proj"]
    saved = OmegaConf.load(run.checkpoint / "rlvr_config.yaml")
    assert OmegaConf.to_container(saved.model.lora.peft) == {"r": 4, "lora_alpha": 16, "use_dora": True,
                                                             "target_modules": ["q_proj", "v_proj"]}
    assert "model.lora.peft" in (run.checkpoint / "README.md").read_text()
    with pytest.raises(rlvr.errors.ConfigError, match="peft_config and model.lora.peft"):
        rlvr.train(*args, "model.lora.peft={use_dora:true}", peft_config=config)
    resumed = rlvr.train("resume=run", "train.steps=2", log=lambda *a, **k: None)
    assert resumed.checkpoint.name == "step_2"
    assert json.loads((resumed.checkpoint / "adapter" / "adapter_config.json").read_text())["use_dora"] is True


def test_adapter_sync_refuses_what_vllm_cannot_load(compose_train):
    from rlvr.errors import ConfigError
    from rlvr.trainer.validate import validate_train_config

    for fields in ("{use_dora:true}", "{modules_to_save:[model.norm]}"):
        cfg = compose_train(["rollout=vllm", "rollout.vllm.lora_sync=adapter", f"model.lora.peft={fields}"])
        with pytest.raises(ConfigError, match="vLLM loads plain LoRA adapters, not model.lora.peft's"):
            validate_train_config(cfg)


@pytest.mark.slow
def test_dora_on_vllm_syncs_merged_weights_the_trainer_agrees_with(tmp_path, require_vllm, compose_train):
    """2 GRPO steps of a DoRA adapter on vLLM (merged sync): step 2 samples from the weights step 1 trained, so the
    engine/trainer logprob mismatch checks that the merged DoRA model is what vLLM was handed."""
    two_synced_steps(compose_train, tmp_path, "model.lora.peft={r:4,lora_alpha:8,use_dora:true}")
    adapter = tmp_path / "checkpoints" / "step_2" / "adapter" / "adapter_config.json"
    assert json.loads(adapter.read_text())["use_dora"]
