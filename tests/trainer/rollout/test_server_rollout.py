"""`rollout=server`: training generates on two `vllm serve` processes that rlvr starts on 127.0.0.1; one is
killed (SIGKILL) while the run goes on. The run must finish every step, with every prompt answered and trained
exactly once (its request resent to the survivor), no request waiting past `rollout.server.request_timeout_s`, and
the survivor holding each new version of the weights.

Runs with `rollout.max_staleness=1` (the producer samples step t+1 while step t trains), so the version
tags of the asynchronous loop are checked on the server engine too. Two servers of a head_dim-32 model
(vLLM's CPU attention refuses 16) start in about a minute on 2 shared cores: one run, marked slow."""

import json

import pytest

from rlvr.trainer.rollout.server import ServerEngine
from rlvr.trainer.run import train

pytestmark = pytest.mark.xdist_group("vllm")

TIMEOUT_S = 60.0
STEPS = 4
OVERRIDES = [
    "rollout=server", "rollout.server.num_servers=2", f"rollout.server.request_timeout_s={TIMEOUT_S}",
    "rollout.max_staleness=1", "model.warm_start.max_steps=50", "model.warm_start.eval_every=50",
    "model.warm_start.eval_rows=20", "model.warm_start.lr=1e-2", "model.arch.hidden_size=64",
    "model.arch.num_layers=2", "model.arch.num_heads=2", "model.arch.num_kv_heads=1",
    "model.arch.intermediate_size=128", "env.digits=1", f"train.steps={STEPS}", f"train.save_every={STEPS}",
    "train.eval_every=100", "train.eval_prompts=4", "train.prompts_per_step=4", "train.completions_per_prompt=4",
    "threads=1",
]


@pytest.fixture
def watched(monkeypatch):
    """The run's ServerEngine, every generate call's prompts and rollout, and a kill of server 0 as the third
    generate call begins: the process is dead before the call's requests go out, while the engine still counts it
    live, so requests must fail on it and be resent. (A kill on a timer raced the call: on a loaded machine the
    call could finish first and the next weight push found the dead server, so no request failed.)"""
    log = {"engines": [], "calls": [], "killed": None, "servers": []}
    init, generate_ids = ServerEngine.__init__, ServerEngine.generate_ids

    def init_(self, *args, **kwargs):
        init(self, *args, **kwargs)
        log["engines"].append(self)
        log["servers"] += self.processes  # the engine's shutdown empties its list

    def generate_ids_(self, encoded, params):
        if len(log["calls"]) == 2 and log["killed"] is None:
            victim = self.processes[0]
            log["killed"] = victim.url
            victim.kill()
            victim.process.wait(timeout=30)
        rollout = generate_ids(self, encoded, params)
        log["calls"].append((encoded, params.n, rollout))
        return rollout

    monkeypatch.setattr(ServerEngine, "__init__", init_)
    monkeypatch.setattr(ServerEngine, "generate_ids", generate_ids_)
    return log


@pytest.mark.slow
def test_a_killed_server_loses_no_prompt_and_the_run_finishes(compose_train, tmp_path, watched, require_vllm,
                                                              monkeypatch):
    # what `import trl` does to this process (trl/_compat.py): the servers' log files must still say what they took
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "ERROR")
    cfg = compose_train(OVERRIDES + [f"output_dir={tmp_path}"])
    train(cfg, log=lambda *_: None)

    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "step" in m and "reward/mean" in m] == list(range(1, STEPS + 1))
    assert (tmp_path / "checkpoints" / f"step_{STEPS}" / "model.safetensors").exists()

    (engine,) = watched["engines"]
    requests = list(engine.requests)
    killed = watched["killed"]
    survivor = next(e for e in engine.endpoints if e != killed)
    assert killed is not None and killed not in engine.live and engine.live == [survivor]

    # every prompt of every call is answered exactly once, by one successful request, G completions, in order
    prompts = sum(len(encoded) for encoded, _, _ in watched["calls"])
    successes = [r for r in requests if r["ok"]]
    assert len(successes) == prompts
    for encoded, n, rollout in watched["calls"]:
        assert rollout.prompt_ids == [ids for ids in encoded for _ in range(n)]
        assert len(rollout.completion_ids) == len(rollout.logprobs) == len(encoded) * n
        assert all(len(c) == len(lp) > 0 for c, lp in zip(rollout.completion_ids, rollout.logprobs))
    # the kill cost requests, each resent: only the killed server failed, and after the kill only the survivor served
    failures = [r for r in requests if not r["ok"]]
    assert failures and {r["endpoint"] for r in failures} == {killed}
    last_failure = max(i for i, r in enumerate(requests) if not r["ok"])
    assert all(r["endpoint"] == survivor for r in requests[last_failure + 1:])
    assert any(r["endpoint"] == killed for r in successes)  # both served before the kill: requests were spread
    # bounded waits: no request, failed or answered, was waited on past the configured timeout
    assert max(r["seconds"] for r in requests) <= TIMEOUT_S

    # weights: the producer loads the newest published version between two generate calls (k=1 may skip one);
    # the survivor holds the last version pushed, pushed after the kill too
    assert engine.version >= 2 and engine.versions[survivor] == engine.version > engine.versions[killed]
    staleness = [m["async/staleness_mean"] for m in metrics if "async/staleness_mean" in m]
    assert len(staleness) == STEPS and all(0 <= s <= 1 for s in staleness)

    # each server's log is in the run directory (servers/vllm-serve-PORT.log), one file per server
    servers = watched["servers"]
    assert len(servers) == 2 and sorted(p.name for p in (tmp_path / "servers").iterdir()) == sorted(
        f"vllm-serve-{server.port}.log" for server in servers)
    # rollout.vllm.kv_cache_bytes=auto: each server is given the run-sized cache as bytes (not the legacy GiB variable),
    # and vLLM took it: a token of this model is 2 layers x 1 KV head x 32 dims x 2 (K, V) x 4 bytes = 512 bytes
    for server in servers:
        assert server.log_path.parent == tmp_path / "servers"
        size = int(server.command[server.command.index("--kv-cache-memory-bytes") + 1])
        assert size % (128 * 512) == 0 and "VLLM_CPU_KVCACHE_SPACE" not in server.env
        if server.url == survivor:
            assert f"CPU KV cache size: {size // 512:,} tokens" in server.log_path.read_text()
