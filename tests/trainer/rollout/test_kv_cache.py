"""rollout.vllm.kv_cache_bytes: what `auto` sizes vLLM's KV cache to, and the values refused with the key named
(rollout/kv_cache.py). The engine that gets this size: tests/trainer/rollout/test_rollout_vllm.py; a started `vllm serve`:
tests/trainer/rollout/test_server_rollout.py."""

import pytest
from rlvr.trainer.rollout.kv_cache import (
    check_kv_cache_bytes,
    resolve_kv_cache_bytes,
    run_kv_cache_bytes,
)
from transformers import LlamaConfig, Qwen2Config

from rlvr.errors import ConfigError

# the `make demo` tiny model's shape (conf/model/tiny.yaml): 4 layers, 4 heads of 128 / 4 = 32, 2 KV heads
TINY = Qwen2Config(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   max_position_embeddings=256)


@pytest.fixture(autouse=True)
def _no_legacy_env(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)


def test_auto_is_rows_times_context_in_blocks():
    # a token: 4 layers x 2 KV heads x 32 dims x 2 (K, V) x 4 bytes = 2048 bytes; a 128-token block 256 KiB;
    # 200 rows x ceil(256 / 128) = 400 blocks, + 1 null block = 401 blocks = 105,119,744 bytes (100.25 MiB)
    assert run_kv_cache_bytes(TINY, sequences=200, max_len=256, dtype="float32") == 401 * 128 * 2048
    size = resolve_kv_cache_bytes("auto", TINY, sequences=200, max_len=256, dtype="float32", on_cpu=True)
    assert size == 105_119_744
    # bfloat16 halves it; a context of 200 positions still takes 2 blocks a row
    assert resolve_kv_cache_bytes("auto", TINY, sequences=200, max_len=200, dtype="bfloat16", on_cpu=True) == size // 2


def test_auto_leaves_the_gpu_and_the_legacy_variable_to_vllm(monkeypatch):
    assert resolve_kv_cache_bytes("auto", TINY, sequences=64, max_len=256, dtype="float32", on_cpu=False) is None
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    assert resolve_kv_cache_bytes("auto", TINY, sequences=64, max_len=256, dtype="float32", on_cpu=True) is None


def test_explicit_bytes_and_null_are_taken_as_given():
    given = resolve_kv_cache_bytes(123_456_789, TINY, sequences=64, max_len=256, dtype="float32", on_cpu=True)
    assert given == 123_456_789
    assert resolve_kv_cache_bytes(None, TINY, sequences=64, max_len=256, dtype="float32", on_cpu=True) is None


@pytest.mark.parametrize("bad", ["1GiB", 0, -5, 1.5, True])
def test_bad_values_name_the_key(bad):
    with pytest.raises(ConfigError, match=r"rollout\.vllm\.kv_cache_bytes="):
        resolve_kv_cache_bytes(bad, TINY, sequences=64, max_len=256, dtype="float32", on_cpu=True)


def test_bytes_beside_the_legacy_variable_are_refused(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    with pytest.raises(ConfigError, match="VLLM_CPU_KVCACHE_SPACE=1"):
        resolve_kv_cache_bytes(10**8, TINY, sequences=64, max_len=256, dtype="float32", on_cpu=True)


def test_a_cache_below_one_context_row_is_refused():
    one_row = (2 + 1) * 128 * 2048  # 2 blocks of the 256-position context + the null block
    check_kv_cache_bytes(one_row, TINY, max_len=256, dtype="float32")
    with pytest.raises(ConfigError,
                       match=rf"rollout\.vllm\.kv_cache_bytes={one_row - 1}: vLLM needs at least {one_row}"):
        check_kv_cache_bytes(one_row - 1, TINY, max_len=256, dtype="float32")


# SmolLM2-135M's shape (model=smollm2): 30 layers, 3 KV heads of 576 / 9 = 64, 8,192 positions
SMOLLM2 = LlamaConfig(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                      max_position_embeddings=8192)
SMOLLM2_TOKEN = 30 * 3 * 64 * 2 * 4  # 46,080 bytes a token in float32
ONE_ROW = (8192 // 128 + 1) * 128 * SMOLLM2_TOKEN  # 64 blocks of the context + the null block: 383 MB


def test_auto_sizes_by_the_runs_rows_not_the_context():
    # by the context, 256 rows asked (256 x 64 + 1) x 128 x 46,080 bytes = 90 GiB (what `rollout=vllm` refused with)
    assert run_kv_cache_bytes(SMOLLM2, sequences=256, max_len=8192, dtype="float32") > 90 * 2**30
    # rows of 118 tokens (70 prompt + 48 new): 100 rows x 1 block + 1 = 101 blocks (596 MB, what vLLM reported)
    assert resolve_kv_cache_bytes("auto", SMOLLM2, sequences=100, max_len=8192, dtype="float32", on_cpu=True,
                                  row_tokens=118, cap=2**40) == 101 * 128 * SMOLLM2_TOKEN
    # 32 such rows: 33 blocks, below the one-context-row floor vLLM needs to start
    assert resolve_kv_cache_bytes("auto", SMOLLM2, sequences=32, max_len=8192, dtype="float32", on_cpu=True,
                                  row_tokens=118, cap=2**40) == ONE_ROW
    # 256 rows of 300 tokens: 256 x 3 blocks + 1 = 769 blocks, above the floor
    assert resolve_kv_cache_bytes("auto", SMOLLM2, sequences=256, max_len=8192, dtype="float32", on_cpu=True,
                                  row_tokens=300, cap=2**40) == 769 * 128 * SMOLLM2_TOKEN


def test_auto_never_asks_for_more_than_half_the_available_memory():
    size = resolve_kv_cache_bytes("auto", SMOLLM2, sequences=256, max_len=8192, dtype="float32", on_cpu=True)
    from rlvr.trainer.rollout.kv_cache import memory_cap

    assert ONE_ROW <= size <= memory_cap()
    # a cap between the floor and the need: the cap (vLLM then runs fewer rows at once)
    assert resolve_kv_cache_bytes("auto", SMOLLM2, sequences=256, max_len=8192, dtype="float32", on_cpu=True,
                                  cap=2 * ONE_ROW) == 2 * ONE_ROW
    with pytest.raises(ConfigError, match=r"rollout\.vllm\.kv_cache_bytes=auto: one row of the model's 8192 positions"):
        resolve_kv_cache_bytes("auto", SMOLLM2, sequences=1, max_len=8192, dtype="float32", on_cpu=True,
                               cap=ONE_ROW - 1)
