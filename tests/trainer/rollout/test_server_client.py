"""rollout/server.py's client logic against small stdlib HTTP stand-ins for vLLM's server (fast, no vLLM): requests
spread over servers, a failing or hanging server's prompts resent to the others with each prompt answered once,
a hang cut at request_timeout_s, a refused request (4xx) stopping the call, weights versions tracked per server,
and a server that comes back getting the newest weights before requests. The real `vllm serve` is exercised in
tests/trainer/evaluation/test_eval_endpoint.py and tests/trainer/rollout/test_server_rollout.py."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlvr.trainer.rollout import server as server_module
from rlvr.trainer.rollout.server import ServerEngine, ServerError
from rlvr.trainer.rollout.types import SamplingParams


class StandIn:
    """An OpenAI-style server on 127.0.0.1: `/v1/completions` answers each prompt [a, b, ...] with n completions
    [a + 1, a + 2, EOS-free] of logprob -0.5 each; `mode` "ok", "fail" (HTTP 500), "hang" (never answers),
    "refuse" (HTTP 400). Records the prompts it answered and the weights it was told to load."""

    def __init__(self, mode: str = "ok"):
        self.mode, self.answered, self.loaded = mode, [], []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, code: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                if stand_in.mode == "fail":
                    return self._reply(500, {"error": "down"})
                self._reply(200, {"data": [{"id": "stand-in"}]} if self.path == "/v1/models" else {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if stand_in.mode == "hang":
                    time.sleep(30)
                    return
                if stand_in.mode == "fail":
                    return self._reply(500, {"error": "engine dead"})
                if stand_in.mode == "refuse":
                    return self._reply(400, {"error": "prompt too long"})
                if self.path == "/collective_rpc":
                    stand_in.loaded.append(body["kwargs"]["weights_path"])
                    return self._reply(200, {"results": [None]})
                if self.path == "/reset_prefix_cache":
                    return self._reply(200, {})
                prompt = body["prompt"]
                stand_in.answered.append(prompt)
                choices = [{"index": j, "token_ids": [prompt[0] + 1 + j, prompt[0] + 2 + j], "finish_reason": "length",
                            "logprobs": {"token_logprobs": [-0.5, -0.5]}} for j in range(body["n"])]
                self._reply(200, {"choices": choices})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stand_ins():
    made = []

    def make(*modes):
        made.extend(StandIn(mode) for mode in modes)
        return made[-len(modes):]

    yield make
    for stand_in in made:
        stand_in.close()


class Tok:
    eos_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


PROMPTS = [[10 * i + 1, 7] for i in range(6)]
PARAMS = SamplingParams(n=2, max_new_tokens=2)


def _engine(stand_ins, timeout_s=10.0):
    return ServerEngine([s.url for s in stand_ins], Tok(), model_name="stand-in", request_timeout_s=timeout_s,
                        log=lambda *_: None)


def _check_rollout(rollout):
    """Prompt-major, n per prompt, each prompt's own completions: every prompt answered exactly once."""
    assert rollout.prompt_ids == [p for p in PROMPTS for _ in range(PARAMS.n)]
    assert rollout.completion_ids == [[p[0] + 1 + j, p[0] + 2 + j] for p in PROMPTS for j in range(PARAMS.n)]
    assert [lp.tolist() for lp in rollout.logprobs] == [[-0.5, -0.5]] * len(PROMPTS) * PARAMS.n
    assert rollout.truncated == [True] * len(PROMPTS) * PARAMS.n


def test_prompts_are_spread_over_the_servers(stand_ins):
    a, b = stand_ins("ok", "ok")
    _check_rollout(_engine([a, b]).generate_ids(PROMPTS, PARAMS))
    assert len(a.answered) == len(b.answered) == 3  # round-robin
    assert sorted(a.answered + b.answered) == sorted(PROMPTS)


def test_a_failing_server_loses_no_prompt_and_is_left_out(stand_ins):
    a, dead = stand_ins("ok", "fail")
    engine = _engine([a, dead])
    _check_rollout(engine.generate_ids(PROMPTS, PARAMS))
    assert sorted(a.answered) == sorted(PROMPTS)  # the survivor answered every prompt, each once
    assert engine.live == [a.url] and "HTTP 500" in engine.errors[dead.url]
    failed = [r for r in engine.requests if not r["ok"]]
    assert len(failed) == 3 and {r["endpoint"] for r in failed} == {dead.url}
    _check_rollout(engine.generate_ids(PROMPTS, PARAMS))  # the next call sends nothing to the dead one
    assert len([r for r in engine.requests if not r["ok"]]) == 3


def test_a_hanging_server_is_cut_at_the_timeout(stand_ins):
    a, hung = stand_ins("ok", "hang")
    engine = _engine([a, hung], timeout_s=1.0)
    start = time.monotonic()
    _check_rollout(engine.generate_ids(PROMPTS, PARAMS))
    waited = time.monotonic() - start
    assert engine.live == [a.url] and "request_timeout_s=1" in engine.errors[hung.url]
    assert max(r["seconds"] for r in engine.requests) < 1.0 + 2 * server_module._POLL_S  # not the 30 s hang
    assert waited < 30


def test_no_server_left_is_an_error_naming_the_servers(stand_ins):
    a, b = stand_ins("fail", "fail")
    with pytest.raises(ServerError, match="no live server left"):
        _engine([a, b]).generate_ids(PROMPTS, PARAMS)


def test_a_refused_request_stops_the_call_without_killing_servers(stand_ins):
    a, b = stand_ins("refuse", "ok")
    engine = _engine([a, b])
    with pytest.raises(ServerError, match="HTTP 400.*the request, not the server"):
        engine.generate_ids(PROMPTS, PARAMS)
    assert engine.live == [a.url, b.url]


def test_weights_reach_every_live_server_and_a_returning_one_first(stand_ins, monkeypatch, tiny_lm):
    a, b = stand_ins("ok", "ok")
    engine = _engine([a, b])
    engine.sync_weights(tiny_lm.model())
    assert engine.version == 1 and engine.versions == {a.url: 1, b.url: 1}
    assert len(a.loaded) == len(b.loaded) == 1 and a.loaded[0].endswith("v1")
    b.mode = "fail"
    engine.generate_ids(PROMPTS, PARAMS)
    assert engine.live == [a.url]
    engine.sync_weights(tiny_lm.model())  # b is dead: not asked, and left at version 1
    assert engine.versions == {a.url: 2, b.url: 1} and len(b.loaded) == 1
    b.mode = "ok"  # b is back: at the next generate (past the retry interval) it gets version 2, then requests
    monkeypatch.setattr(server_module, "_RETRY_DEAD_S", 0.0)
    b.answered.clear()
    _check_rollout(engine.generate_ids(PROMPTS, PARAMS))
    assert engine.versions[b.url] == 2 and b.loaded[-1].endswith("v2") and len(b.answered) == 3
    engine.shutdown()


def test_given_endpoints_get_the_policy_before_the_first_step(stand_ins, tiny_lm):
    """`rollout=server rollout.server.endpoints=[...]`: the servers may serve another checkpoint, so the factory pushes
    the starting policy to each (version 1) and starts nothing; the served model's name comes from GET /models."""
    from rlvr.trainer.rollout.factory import build_engine

    a, b = stand_ins("ok", "ok")
    engine = build_engine("server", tiny_lm.model(), tiny_lm.tokenizer, {"server": {
        "endpoints": [a.url, b.url], "request_timeout_s": 10}})
    try:
        assert engine.processes == [] and engine.model_name == "stand-in"
        assert engine.version == 1 and len(a.loaded) == len(b.loaded) == 1
        assert engine.context_length == tiny_lm.model().config.max_position_embeddings
    finally:
        engine.shutdown()
