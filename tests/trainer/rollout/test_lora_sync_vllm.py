"""`rollout.vllm.lora_sync=adapter`: vLLM keeps the base weights and loads only the LoRA adapter at each sync.

After a sync vLLM's logprobs (base + adapter, vLLM's LoRA kernels) are the trainer's peft model's, each
sync holds one adapter in the engine and on disk, and a 2-step GRPO run with adapters trains with the
engine/trainer mismatch as small as with merged sync. vLLM's CPU attention needs head_dim >= 32, so
the model is built here as in tests/trainer/rollout/test_rollout_vllm.py.
"""

import copy
from pathlib import Path

import pytest
import torch

from rlvr.errors import ConfigError
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams
from tests.vllm_model import VLLM_ARCH, max_logprob_diff, two_synced_steps

peft = pytest.importorskip("peft")  # the lora extra, installed by `make test`
pytestmark = pytest.mark.xdist_group("vllm")  # one xdist worker: a starting vLLM engine takes both cores



@pytest.fixture(scope="module")
def policy(tiny_lm):
    """A head_dim-32 model with rank-4 adapters on every linear layer, B random (not a no-op)."""
    from rlvr.trainer.models.tiny_model import build_model

    model = build_model(tiny_lm.tokenizer, **VLLM_ARCH, seed=0).eval()
    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False,
                             task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


@pytest.fixture(scope="module")
def engine(policy, tiny_lm, require_vllm):
    from rlvr.trainer.rollout.factory import build_engine

    engine = build_engine("vllm", policy, tiny_lm.tokenizer, {"seed": 0})
    yield engine
    engine.shutdown()


@pytest.fixture
def prompts(tiny_lm, arith_env):
    return render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 3, seed=0))


def _perturb_adapters(model, scale: float, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.add_(scale * torch.randn(p.shape, generator=generator))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_adapter_logprobs_equal_trainer_logprobs(engine, policy, tiny_lm, prompts, temperature):
    """The tolerance of the full-weight sync test (tests/trainer/rollout/test_rollout_vllm.py); the base model's logprobs
    of the same tokens are far off, so the adapter is applied."""
    params = SamplingParams(n=4, max_new_tokens=16, temperature=temperature)
    rollout = engine.generate(prompts, params)
    assert max_logprob_diff(policy, rollout, tiny_lm.tokenizer, temperature) <= 1e-3
    with policy.disable_adapter():
        assert max_logprob_diff(policy, rollout, tiny_lm.tokenizer, temperature) > 0.1


def test_adapter_sync_follows_the_policy_and_holds_one_adapter(engine, policy, tiny_lm, prompts):
    changed = copy.deepcopy(policy)
    _perturb_adapters(changed, 0.3, seed=1)
    greedy = SamplingParams(n=1, max_new_tokens=12, greedy=True)
    before = engine.generate(prompts, greedy)
    first = engine._lora
    try:
        engine.sync_weights(changed)
        rollout = engine.generate(prompts, SamplingParams(n=4, max_new_tokens=16))
        assert max_logprob_diff(changed, rollout, tiny_lm.tokenizer, 1.0) <= 1e-3
        assert engine.generate(prompts, greedy).completion_ids != before.completion_ids
        assert engine.llm.llm_engine.list_loras() == {engine._lora.lora_int_id} != {first.lora_int_id}
        adapters = sorted(p.name for p in Path(engine._model_dir).glob("adapter-v*"))
        assert adapters == [f"adapter-v{engine._lora.lora_int_id}"], "old versions are removed from disk"
        full = sum(t.numel() * t.element_size() for t in changed.get_base_model().state_dict().values())
        assert 0 < engine.last_sync_bytes < full / 10, "the adapter alone is pushed"
    finally:
        engine.sync_weights(policy)
    assert engine.generate(prompts, greedy).completion_ids == before.completion_ids


def test_adapter_engine_refuses_merged_weights(engine, policy):
    """Merged weights over the base plus the adapter again would count B A twice."""
    from rlvr.trainer.models.lora import merged_copy

    with pytest.raises(ValueError, match="sync it the peft model"):
        engine.sync_weights(merged_copy(policy))


def test_vllm_lora_rank_is_the_smallest_vllm_accepts(require_vllm):
    from rlvr.trainer.rollout.vllm import _vllm_lora_rank

    assert [_vllm_lora_rank(r) for r in (1, 4, 8, 16, 17, 512)] == [1, 8, 8, 16, 32, 512]
    with pytest.raises(ConfigError, match=r"model.lora.r=600: vLLM serves adapters of rank <= 512"):
        _vllm_lora_rank(600)


def test_lora_sync_config_errors(compose_train):
    from rlvr.trainer.validate import validate_train_config

    cases = [(["rollout.vllm.lora_sync=full"], r"rollout.vllm.lora_sync='full'; choose one of merged, adapter"),
             (["rollout=vllm", "rollout.vllm.lora_sync=adapter"], r"needs LoRA adapters to sync: set model.lora.r > 0"),
             (["rollout=hf", "model.lora.r=4", "rollout.vllm.lora_sync=adapter"],
              r"runs with rollout=vllm; rollout=hf samples from the adapter model itself"),
             (["rollout=server", "model.lora.r=4", "rollout.vllm.lora_sync=adapter"],
              r"rollout=server pushes merged weights only"),
             (["rollout=vllm", "model.lora.r=4", "rollout.vllm.lora_sync=adapter", "rollout.max_staleness=1"],
              r"rollout.vllm.lora_sync=adapter runs with the synchronous loop")]
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message):
            validate_train_config(compose_train(overrides))
    validate_train_config(compose_train(["rollout=vllm", "model.lora.r=4", "rollout.vllm.lora_sync=adapter"]))


@pytest.mark.slow
@pytest.mark.parametrize("lora_sync", ["merged", "adapter"])
def test_grpo_with_lora_on_vllm_trains_with_either_sync(tmp_path, require_vllm, compose_train, lora_sync):
    """2 GRPO steps with model.lora.r=4 on vLLM: step 2 samples from the adapters step 1 trained (B != 0
    after one update), so its engine/trainer logprob mismatch checks the sync."""
    from safetensors.torch import load_file

    lines = two_synced_steps(compose_train, tmp_path, f"rollout.vllm.lora_sync={lora_sync}", "model.lora.r=4")
    adapter = load_file(tmp_path / "checkpoints" / "step_2" / "adapter" / "adapter_model.safetensors")
    assert max(t.abs().max().item() for name, t in adapter.items() if "lora_B" in name) > 0, lines
