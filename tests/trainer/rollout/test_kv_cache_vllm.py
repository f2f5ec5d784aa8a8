"""A vLLM KV cache that holds one row but not the batch (rollout.vllm.kv_cache_bytes below what `auto` gives) neither
hangs nor changes the samples: vLLM's scheduler admits as many rows as have blocks, queues the rest and preempts
a running row when it needs a block none has (recomputed once blocks free up), so a seeded batch comes back the
same as from a cache sized to the run, only later."""

import pytest
from rlvr.trainer.rollout.factory import build_engine
from rlvr.trainer.rollout.types import SamplingParams

from tests.vllm_model import VLLM_ARCH

pytestmark = pytest.mark.xdist_group("vllm")  # one xdist worker: a starting vLLM engine takes both cores


def _sample(model, tokenizer, options):
    engine = build_engine("vllm", model, tokenizer, {"seed": 0, **options})
    try:
        params = SamplingParams(n=4, max_new_tokens=100, seeds=(11, 12, 13))  # 12 rows of up to ~110 tokens
        return engine.kv_cache_bytes_used, engine.generate(["1+2=", "3+4= and 5+6=", "7+8="], params)
    finally:
        engine.shutdown()


def test_a_cache_of_two_rows_runs_a_batch_of_twelve_unchanged(tiny_lm, require_vllm):
    from rlvr.trainer.models.tiny_model import build_model

    model = build_model(tiny_lm.tokenizer, **VLLM_ARCH, seed=0)  # random weights: rows run to max_new_tokens
    # 2 rows of one 128-token block (64 KiB each at 512 bytes a token) + the null block
    small_bytes, small = _sample(model, tiny_lm.tokenizer, {"vllm": {"kv_cache_bytes": 3 * 128 * 512}})
    sized_bytes, sized = _sample(model, tiny_lm.tokenizer, {"max_sequences": 12})
    assert (small_bytes, sized_bytes) == (3 * 128 * 512, 13 * 128 * 512)
    assert len(sized.completion_ids) == 12 and min(len(ids) for ids in sized.completion_ids) > 1
    assert small.completion_ids == sized.completion_ids
