"""rollout.vllm.lora_sync=adapter shown engaged (issue 52): an engine that copies weights is handed the adapter model
itself (whose adapter alone it loads), not the merged copy lora_sync=merged hands it. test_lora.py covers the merged
path; tests/mutation_check.py switches the adapter path off and requires this test to fail."""

from omegaconf import OmegaConf


def test_adapter_sync_hands_the_engine_the_adapter_model_not_a_merged_copy(tiny_lm_sft):
    from rlvr.trainer.models.lora import engine_weights, is_lora
    from rlvr.trainer.models.model import build_policy

    cfg = OmegaConf.create({"lora": {"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": ["all-linear"]},
                            "gradient_checkpointing": False, "autocast": "none"})
    policy = build_policy(cfg, str(tiny_lm_sft.path))
    assert is_lora(policy)
    handed = engine_weights(lambda m: m, True, True, policy)  # (unwrap, copies_weights, adapter_sync, policy)
    assert handed is policy and is_lora(handed)
    merged = engine_weights(lambda m: m, True, False, policy)
    assert merged is not policy and not is_lora(merged)
