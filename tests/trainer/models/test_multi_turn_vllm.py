"""The multi-turn agent loop on the vLLM engine (CPU wheel): the same token-in/token-out checks as on HF
(tests/trainer/rollout/test_multi_turn.py, with the chat template that drops earlier <think> blocks), and vLLM's logprobs of
the sampled tokens equal the trainer's on exactly the masked-in tokens."""

from __future__ import annotations

import copy

import pytest
import torch

from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.rollout.factory import build_engine
from tests.trainer.rollout.test_multi_turn import THINK_DROPPING_TEMPLATE, EchoEnv, RecordingEngine, assert_token_in_token_out
from tests.trainer.rollout.test_rollout_vllm import sft_model  # noqa: F401  (the head_dim-32 fixture vLLM's CPU attention needs)

pytestmark = pytest.mark.xdist_group("vllm")  # one xdist worker: a starting vLLM engine takes both cores


def test_vllm_trajectories_train_on_the_sampled_ids(sft_model, tiny_lm, require_vllm):  # noqa: F811
    tok = copy.deepcopy(tiny_lm.tokenizer)
    tok.chat_template = THINK_DROPPING_TEMPLATE
    engine = build_engine("vllm", sft_model, tok, {"seed": 0})
    try:
        rollout = assert_token_in_token_out(RecordingEngine(engine), EchoEnv(max_turns=3))
    finally:
        engine.shutdown()
    batch = pack(rollout.prompt_ids, rollout.completion_ids, tok.pad_token_id, rollout.loss_mask)
    with torch.no_grad():
        trainer_logprobs, _ = token_logprobs(sft_model, batch, 1.0)  # [N, L-1]
    for i, (prompt, mask) in enumerate(zip(rollout.prompt_ids, rollout.loss_mask)):
        columns = batch.completion_mask[i].bool()
        sampled = torch.tensor(mask, dtype=torch.bool)
        assert int(columns.sum()) == int(sampled.sum())
        assert (trainer_logprobs[i][columns] - rollout.logprobs[i][sampled]).abs().max() <= 1e-3
