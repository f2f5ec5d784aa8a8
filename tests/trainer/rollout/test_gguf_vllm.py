"""vLLM on a GGUF-imported model (trainer/models/gguf_import.py): the converted checkpoint is what vLLM serves in
rollout=vllm, so its sampled tokens' logprobs must be the trainer's, and its greedy completions HF generate's.
The model is tests/gguf_files.py's random Llama at head_dim 32 (vLLM's CPU attention refuses 16)."""

import pytest
import torch

from rlvr.envs import load_env
from rlvr.trainer.models.gguf_import import resolve_gguf
from rlvr.trainer.models.model import load_policy, load_tokenizer
from rlvr.trainer.rollout.factory import build_engine
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams
from tests.gguf_files import write_tiny_llama_gguf
from tests.vllm_model import max_logprob_diff

pytestmark = pytest.mark.xdist_group("vllm")  # one xdist worker: a starting vLLM engine takes both cores


def _first_divergence_gap(model, prompt_ids, ours, theirs) -> float:
    """Where two greedy completions first differ: the gap between the model's top two logits there (a tie that
    kernels may break either way is a gap near 0)."""
    at = next(i for i, (a, b) in enumerate(zip(ours + [-1], theirs + [-2])) if a != b)
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + ours[:at]])).logits[0, -1]
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def test_vllm_serves_the_imported_checkpoint_as_the_trainer_sees_it(tmp_path, monkeypatch, require_vllm):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    path, _, _ = write_tiny_llama_gguf(tmp_path, heads=2, kv_heads=1)
    directory = resolve_gguf(str(path), log=lambda _: None)
    tokenizer, model = load_tokenizer(directory, chat=True), load_policy(directory).eval()
    env = load_env("arithmetic", prompt="instruct")
    prompts = render_prompts(tokenizer, env, env.rows("train", 3, seed=0))
    engine = build_engine("vllm", model, tokenizer, {"seed": 0, "max_sequences": 12, "max_row_tokens": 80})
    try:
        sampled = engine.generate(prompts, SamplingParams(n=4, max_new_tokens=16, temperature=0.7))
        assert max_logprob_diff(model, sampled, tokenizer, 0.7) <= 1e-3
        greedy = SamplingParams(n=1, max_new_tokens=12, greedy=True)
        vllm_greedy = engine.generate(prompts, greedy)
    finally:
        engine.shutdown()
    hf_greedy = HFEngine(model, tokenizer).generate(prompts, greedy)
    for prompt_ids, ours, theirs in zip(hf_greedy.prompt_ids, vllm_greedy.completion_ids, hf_greedy.completion_ids):
        if list(ours) != list(theirs):  # only a near-tie may split them
            assert _first_divergence_gap(model, list(prompt_ids), list(ours), list(theirs)) < 1e-3
    assert sum(list(a) == list(b) for a, b in zip(vllm_greedy.completion_ids, hf_greedy.completion_ids)) >= 2
