"""`rollout.repetition_penalty`, `rollout.min_p` and `rollout.generation_kwargs`
(trainer/rollout/generation_settings.py): each engages on every engine (HF generate, its producer process, colocated
vLLM, servers), HF and vLLM decode the same greedy tokens under the same penalty, a setting an engine cannot honour
stops at start naming the key and the engine, the run's rollouts and held-out eval and `rlvr eval` get them, and
TRL's GRPOConfig fields map onto them.

The vLLM tests build a head_dim-32 model (vLLM's CPU attention refuses conftest's 16), randomly initialised: its
greedy completion repeats one token, which is what a repetition penalty must change. Each test was seen failing
with its setting switched off in the engine or the config path it covers.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from transformers import RepetitionPenaltyLogitsProcessor

from rlvr.errors import ConfigError
from rlvr.trainer.rollout.generation_settings import check_generation_settings, generation_settings
from rlvr.trainer.rollout.hf import HFEngine, RepetitionPenalty, _warpers
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams

pytestmark = pytest.mark.xdist_group("vllm")  # the vLLM tests' engine takes both cores while it starts

GREEDY = dict(n=1, max_new_tokens=12, greedy=True)


@pytest.fixture
def prompts(tiny_lm, arith_env):
    """Prompts of different lengths, so HF left-pads some rows."""
    prompts = render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 3, seed=0))
    return [prompts[0], prompts[1] + " 1 + 2 = 3, 4 + 5 = 9.", prompts[2]]


def _penalised_greedy(model, ids: list[int], penalty: float, steps: int) -> list[int]:
    """Greedy decoding by hand, one unpadded row at a time: every token seen in the prompt or the completion so far
    has its logit divided by `penalty` when positive, multiplied when not (vLLM's and CTRL's rule)."""
    out = []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([ids + out])).logits[0, -1]  # [V]
            seen = torch.tensor(sorted(set(ids + out)))
            logits[seen] = torch.where(logits[seen] > 0, logits[seen] / penalty, logits[seen] * penalty)
            out.append(int(logits.argmax()))
    return out


# ---------------------------------------------------------------- HF generate


def test_hf_repetition_penalty_moves_greedy_tokens_as_defined(tiny_lm, prompts):
    model, tok = tiny_lm.model().eval(), tiny_lm.tokenizer
    engine = HFEngine(model, tok)
    plain = engine.generate(prompts, SamplingParams(**GREEDY)).completion_ids
    penalised = engine.generate(prompts, SamplingParams(**GREEDY, repetition_penalty=5.0)).completion_ids
    assert all(len(set(row)) == 1 for row in plain)  # the random model repeats one token ...
    assert all(len(set(row)) > 1 for row in penalised)  # ... which the penalty stops
    for prompt, row in zip(prompts, penalised):  # batched and left-padded, as by hand on each row alone
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        assert row == _penalised_greedy(model, ids, 5.0, len(row))


def test_repetition_penalty_ignores_left_padding():
    """Row 0 is padded with token 0 (two columns); token 0 is not among its real tokens, so its score must stay.
    transformers' own processor would count the padding as seen: that is why rlvr has its own."""
    input_ids = torch.tensor([[0, 0, 5, 6], [7, 0, 5, 6]])  # row 1 holds token 0 for real
    scores = torch.tensor([[2.0, 1.0, 1.0, 1.0, 1.0, 4.0, -2.0, 1.0], [2.0, 1.0, 1.0, 1.0, 1.0, 4.0, -2.0, 1.0]])
    out = RepetitionPenalty(2.0, [2, 0])(input_ids, scores.clone())
    assert out[0].tolist() == [2.0, 1.0, 1.0, 1.0, 1.0, 2.0, -4.0, 1.0]  # 5 and 6 penalised, pad 0 not
    assert out[1].tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, -4.0, 0.5]  # 0 (real here), 5, 6 and 7
    assert RepetitionPenaltyLogitsProcessor(2.0)(input_ids, scores.clone())[0, 0] == 1.0  # HF's: pad penalised


def test_hf_min_p_one_samples_the_greedy_tokens(tiny_lm, prompts):
    """min_p=1 keeps only tokens as likely as the top one: sampling is greedy, each token at probability 1."""
    engine = HFEngine(tiny_lm.model(), tiny_lm.tokenizer)
    greedy = engine.generate(prompts, SamplingParams(**GREEDY)).completion_ids
    torch.manual_seed(0)
    sampled = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, min_p=1.0))
    assert sampled.completion_ids == [row for row in greedy for _ in range(3)]
    assert all(torch.equal(lp, torch.zeros_like(lp)) for lp in sampled.logprobs)
    torch.manual_seed(0)
    free = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12)).completion_ids
    assert free != sampled.completion_ids  # the check can fail: without min_p the noise model samples noise


def test_min_p_comes_before_top_p_as_in_vllm():
    """p = [0.5, 0.3, 0.2]. vLLM's order: min-p 0.5 drops 0.2 (< 0.25), then top-p 0.6 over [0.625, 0.375] keeps the
    top token alone. transformers' order (top-p first) would keep two tokens (0.5 and 0.3)."""
    scores = torch.tensor([[0.5, 0.3, 0.2]]).log()
    for warper in _warpers(SamplingParams(min_p=0.5, top_p=0.6)):
        scores = warper(torch.zeros(1, 1, dtype=torch.long), scores)
    assert torch.isfinite(scores).tolist() == [[True, False, False]]


def test_generation_kwargs_reach_hf_generate(tiny_lm, prompts):
    """no_repeat_ngram_size=1 (a GenerationConfig key) bans every token already in the row."""
    engine = HFEngine(tiny_lm.model(), tiny_lm.tokenizer)
    plain = engine.generate(prompts, SamplingParams(**GREEDY)).completion_ids
    banned = engine.generate(prompts, SamplingParams(**GREEDY, generation_kwargs={"no_repeat_ngram_size": 1}))
    assert any(len(set(row)) < len(row) for row in plain)
    assert all(len(set(row)) == len(row) for row in banned.completion_ids)


@pytest.mark.slow  # a spawned child importing torch and transformers
def test_settings_cross_to_the_producer_process(tiny_lm, prompts):
    from rlvr.trainer.rollout.hf_process import HFProcessEngine

    params = SamplingParams(**GREEDY, repetition_penalty=1.5, generation_kwargs={"no_repeat_ngram_size": 2})
    here = HFEngine(tiny_lm.model(), tiny_lm.tokenizer).generate(prompts, params).completion_ids
    child = HFProcessEngine(tiny_lm.model(), tiny_lm.tokenizer, seed=0, threads=1, timeout_s=300)
    try:
        there = child.generate(prompts, params).completion_ids
        unset = child.generate(prompts, SamplingParams(**GREEDY)).completion_ids
    finally:
        child.shutdown()
    assert there == here and unset != there


# ---------------------------------------------------------------- servers


class Recorder:
    """A `/v1/completions` stand-in that records each request's body and answers n two-token completions."""

    def __init__(self):
        self.bodies = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.bodies.append(body)
                choices = [{"index": j, "token_ids": [5, 6], "finish_reason": "length",
                            "logprobs": {"token_logprobs": [-0.5, -0.5]}} for j in range(body["n"])]
                raw = json.dumps({"choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_server_requests_carry_the_settings(tiny_lm):
    from rlvr.trainer.rollout.server import ServerEngine

    recorder = Recorder()
    engine = ServerEngine([recorder.url], tiny_lm.tokenizer, model_name="m", request_timeout_s=30, log=lambda *_: None)
    try:
        engine.generate_ids([[1, 2]], SamplingParams(n=2, min_p=0.1, repetition_penalty=1.3,
                                                     generation_kwargs={"presence_penalty": 0.5}))
        engine.generate_ids([[1, 2]], SamplingParams(n=1, greedy=True, min_p=0.1, repetition_penalty=1.3))
    finally:
        engine.shutdown()
        recorder.httpd.shutdown()
    sampled, greedy = recorder.bodies
    assert (sampled["min_p"], sampled["repetition_penalty"], sampled["presence_penalty"]) == (0.1, 1.3, 0.5)
    assert (greedy["min_p"], greedy["repetition_penalty"], greedy["temperature"]) == (0.0, 1.3, 0.0)


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("kind,rollout,message", [
    ("hf", {"repetition_penalty": 0.0}, r"rollout.repetition_penalty=0.0 must be > 0"),
    ("hf", {"min_p": 1.5}, r"rollout.min_p=1.5 must be in \[0, 1\]"),
    ("hf", {"generation_kwargs": [3]}, r"rollout.generation_kwargs=\[3\] must be a mapping"),
    ("hf", {"generation_kwargs": {"temperature": 0.5}}, r"generation_kwargs.temperature: rlvr sets temperature "
                                                        r"itself; use rollout.temperature"),
    ("server", {"generation_kwargs": {"max_tokens": 9}}, r"generation_kwargs.max_tokens: .* rollout.max_new_tokens"),
    ("hf", {"generation_kwargs": {"presence_penalty": 0.5}}, r"generation_kwargs.presence_penalty: rollout=hf does "
                                                             r"not know 'presence_penalty'"),
    ("hf", {"generation_kwargs": {"no_repeat_ngram": 2}}, r"rollout=hf does not know 'no_repeat_ngram' \(did you "
                                                          r"mean .*no_repeat_ngram_size"),
    ("hf", {"generation_kwargs": {"num_beams": 4}}, r"generation_kwargs.num_beams: rollout=hf cannot take it"),
    ("hf", {"generation_kwargs": {"typical_p": 0.9}}, r"typical_p: rollout=hf cannot take it here: .*recorder"),
    ("vllm", {"generation_kwargs": {"no_repeat_ngram_size": 2}}, r"rollout=vllm does not know 'no_repeat_ngram_size'"),
    ("vllm", {"generation_kwargs": {"prompt_logprobs": 1}}, r"prompt_logprobs: rollout=vllm cannot take it"),
    ("server", {"generation_kwargs": {"use_beam_search": True}}, r"use_beam_search: rollout=server cannot take it"),
])
def test_a_setting_the_engine_cannot_honour_is_refused_by_name(kind, rollout, message):
    with pytest.raises(ConfigError, match=message):
        check_generation_settings(kind, rollout)


def test_what_each_engine_knows_is_accepted():
    check_generation_settings("hf", {"repetition_penalty": 1.2, "min_p": 0.05,
                                     "generation_kwargs": {"no_repeat_ngram_size": 3, "bad_words_ids": [[5]]}})
    check_generation_settings("vllm", {"generation_kwargs": {"presence_penalty": 0.5, "min_tokens": 2}})
    check_generation_settings("server", {"generation_kwargs": {"frequency_penalty": 0.5, "bad_words": ["x"]}})


def test_the_run_config_is_checked_at_start(compose_train, tiny_lm):
    from rlvr.trainer.rollout.factory import build_engine
    from rlvr.trainer.validate import validate_train_config

    for override, message in [("rollout.min_p=-0.1", r"rollout.min_p=-0.1"),
                              ("rollout.repetition_penalty=-1", r"rollout.repetition_penalty=-1"),
                              ("rollout.generation_kwargs={num_beams:2}", r"generation_kwargs.num_beams: rollout=hf"),
                              ("rollout.generation_kwargs={max_new_tokens:2}", r"use rollout.max_new_tokens")]:
        with pytest.raises(ConfigError, match=message):
            validate_train_config(compose_train(["rollout=hf", override]))
    validate_train_config(compose_train(["rollout=hf", "rollout.min_p=0.1", "rollout.repetition_penalty=1.2",
                                         "rollout.generation_kwargs={no_repeat_ngram_size:3}"]))
    # rollout=auto is checked once resolved, where the engine is built
    with pytest.raises(ConfigError, match="rollout=hf does not know 'presence_penalty'"):
        build_engine("hf", tiny_lm.model(), tiny_lm.tokenizer, {"generation_kwargs": {"presence_penalty": 0.5}})


# ---------------------------------------------------------------- the run, its evals and TRL


def test_the_run_samples_and_evaluates_with_the_settings(tmp_path, tiny_lm, monkeypatch):
    """A two-step run: every generate call, the rollouts' and the held-out greedy eval's, carries the settings."""
    from rlvr import api

    seen = []
    generate = HFEngine.generate
    monkeypatch.setattr(HFEngine, "generate", lambda self, p, params: seen.append(params) or generate(self, p, params))
    monkeypatch.chdir(tmp_path)
    api.train("rollout.repetition_penalty=1.3", "rollout.min_p=0.05",
              "rollout.generation_kwargs={no_repeat_ngram_size:4}", "train.steps=1", "train.completions_per_prompt=2",
              "train.prompts_per_step=1", "rollout.max_new_tokens=6", "train.eval_prompts=2",
              model={"name": "hf", "name_or_path": str(tiny_lm.path)}, rollout="hf", log=lambda *a, **k: None)
    assert {p.greedy for p in seen} == {True, False}  # the held-out eval and the rollouts
    assert all((p.repetition_penalty, p.min_p, p.generation_kwargs) == (1.3, 0.05, {"no_repeat_ngram_size": 4})
               for p in seen)


def test_rlvr_eval_and_the_held_out_eval_sample_with_the_settings(arith_env, tiny_lm):
    from rlvr.trainer.evaluation.eval_config import compose_eval_config
    from rlvr.trainer.evaluation.eval_run import sampling_params, settings_of
    from rlvr.trainer.evaluation.evaluate import evaluate_greedy

    cfg = compose_eval_config(["rollout.repetition_penalty=1.3", "rollout.generation_kwargs={no_repeat_ngram_size:2}"])
    params = sampling_params(cfg)
    assert params.repetition_penalty == 1.3 and params.min_p == 0.0
    assert params.generation_kwargs == {"no_repeat_ngram_size": 2}
    settings = settings_of(cfg)  # an eval resumed with other settings is refused (eval_run.py _check_settings)
    assert settings["repetition_penalty"] == 1.3 and "min_p" not in settings

    class Engine:
        tokenizer = tiny_lm.tokenizer

        def generate(self, prompts, params):
            self.params = params
            raise StopIteration

    engine = Engine()
    with pytest.raises(StopIteration):
        evaluate_greedy(engine, arith_env, arith_env.rows("test", 1), 8, settings=generation_settings(cfg.rollout))
    assert engine.params.greedy and engine.params.repetition_penalty == 1.3


def test_trl_generation_fields_map_to_the_rollout_keys(compose_train):
    pytest.importorskip("trl")
    from rlvr.trainer.trl_keys import translate
    from rlvr.trainer.validate import validate_train_config

    overrides = translate({"min_p": 0.1, "repetition_penalty": 1.1,
                           "generation_kwargs": {"no_repeat_ngram_size": 3}}).overrides
    cfg = compose_train(["rollout=hf", *overrides])
    assert generation_settings(cfg.rollout) == {"repetition_penalty": 1.1, "min_p": 0.1,
                                                "generation_kwargs": {"no_repeat_ngram_size": 3}}
    validate_train_config(cfg)
    # TRL lets generation_kwargs override its own sampling keys; rlvr refuses the key and names its own
    clash = compose_train(["rollout=hf", *translate({"generation_kwargs": {"temperature": 0.5}}).overrides])
    with pytest.raises(ConfigError, match="generation_kwargs.temperature: rlvr sets temperature itself; use "
                                          "rollout.temperature"):
        validate_train_config(clash)


# ---------------------------------------------------------------- vLLM


@pytest.fixture(scope="module")
def random_model(tiny_lm):
    from rlvr.trainer.models.tiny_model import build_model
    from tests.vllm_model import VLLM_ARCH

    return build_model(tiny_lm.tokenizer, **VLLM_ARCH, seed=0).eval()


@pytest.fixture(scope="module")
def vllm_engine(random_model, tiny_lm, require_vllm):
    from rlvr.trainer.rollout.factory import build_engine

    engine = build_engine("vllm", random_model, tiny_lm.tokenizer, {"seed": 0})
    yield engine
    engine.shutdown()


def test_hf_and_vllm_decode_the_same_greedy_tokens_under_a_penalty(vllm_engine, random_model, tiny_lm, prompts):
    hf = HFEngine(random_model, tiny_lm.tokenizer)
    penalised = SamplingParams(**GREEDY, repetition_penalty=5.0)
    by_vllm, by_hf = vllm_engine.generate(prompts, penalised), hf.generate(prompts, penalised)
    assert by_vllm.completion_ids == by_hf.completion_ids
    assert by_vllm.completion_ids != vllm_engine.generate(prompts, SamplingParams(**GREEDY)).completion_ids
    for a, b in zip(by_vllm.logprobs, by_hf.logprobs):  # both: log-softmax of the penalised logits
        assert torch.allclose(a, b, atol=1e-4)


def test_vllm_min_p_one_samples_the_greedy_tokens(vllm_engine, prompts):
    greedy = vllm_engine.generate(prompts, SamplingParams(**GREEDY)).completion_ids
    sampled = vllm_engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, min_p=1.0, seeds=(1, 2, 3)))
    assert sampled.completion_ids == [row for row in greedy for _ in range(3)]
    free = vllm_engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, seeds=(1, 2, 3))).completion_ids
    assert free != sampled.completion_ids


def test_generation_kwargs_reach_vllm(vllm_engine, prompts):
    """allowed_token_ids (a vllm.SamplingParams key) confines every sampled token to the set."""
    allowed = [40, 41, 42]
    rollout = vllm_engine.generate(prompts, SamplingParams(n=2, max_new_tokens=8, seeds=(1, 2, 3),
                                                           generation_kwargs={"allowed_token_ids": allowed}))
    assert {t for row in rollout.completion_ids for t in row} <= set(allowed)
    free = vllm_engine.generate(prompts, SamplingParams(n=2, max_new_tokens=8, seeds=(1, 2, 3)))
    assert not {t for row in free.completion_ids for t in row} <= set(allowed)
