"""What `rlvr train` does for a reward with `verifier=judge` before it trains: serve the judge, then audit it.

* Serving: a judge entry of `env.reward` that names a `checkpoint` (a local Hugging Face directory, a packaged model
  such as `smollm2`, a .gguf file) and no `url` gets a `vllm serve` process of that checkpoint on 127.0.0.1, started
  as `rollout=server` starts the policy's (rollout/server_process.py), and its URL filled into the entry's params.
  The server is stopped when the process exits. The verifier itself never starts one (a verifier does not import
  the trainer), so `rlvr verify` and `rlvr eval` take a judge by `url`.
* The gate (verifiers/judge/gate.py): every judge component of the environment's reward is scored on the classes
  of `rlvr audit` that target a judge (GATE_CLASSES, from trainer/audit/probes.py: the master keys bare and in the
  answer format, the injections, hedges, the gold in the reasoning) and a plain wrong answer, built from `gate_rows`
  training rows; a class accepted above `gate_threshold` of its completions stops the run with the table
  (ConfigError). `gate: false` skips it and says so with a WARNING.
"""

from __future__ import annotations

import atexit
from pathlib import Path

from omegaconf import open_dict

from rlvr.errors import ConfigError
from rlvr.trainer.audit.probes import ANSWER_CLASSES, shape_of
from rlvr.verifiers.judge.gate import run_gate
from rlvr.verifiers.judge.verifier import JudgeVerifier

JUDGE_MAX_MODEL_LEN = 4096  # the judge's prompt (question, gold, the response's last 4,000 characters) and verdict
# rlvr audit's classes aimed at a judge; the others (empty, padding, look-alike digits) test a rule's parser
GATE_CLASSES = ("master_keys", "master_keys_in_format", "judge_injection", "hedge_or", "gold_in_reasoning")


def _from_shape(build):
    """A probe of trainer/audit/probes.py (which takes a row's AnswerShape) as a function of the row."""
    def completions(row) -> list[str]:
        shape = shape_of(dict(row))
        return build(shape) if shape is not None else []
    return completions


def gate_classes() -> dict:
    classes = {name: _from_shape(ANSWER_CLASSES[name][2]) for name in GATE_CLASSES}
    classes["wrong_answer"] = _from_shape(lambda shape: [shape.frame(shape.wrong)])  # can the judge say no at all
    return classes


honest_completions = _from_shape(lambda shape: [shape.frame(shape.gold)])


def serve_judges(cfg, run_dir: Path, log=print) -> list:
    """Start a vLLM server for each judge entry that names a `checkpoint` and no `url`; returns the servers."""
    reward = cfg.env.get("reward") if "env" in cfg else None
    if not reward:
        return []
    servers = []
    for i, entry in enumerate(reward):
        params = entry.get("params") if hasattr(entry, "get") else None
        if entry.get("verifier") != "judge" or not params or not params.get("checkpoint") or params.get("url"):
            continue
        from rlvr.trainer.models.gguf_import import resolve_gguf
        from rlvr.trainer.rollout.server_process import start_servers

        model_dir = resolve_gguf(str(params.checkpoint), log=log)
        if not Path(model_dir).is_dir():
            raise ConfigError(f"env.reward[{i}].params.checkpoint={params.checkpoint}: not a local checkpoint "
                              f"directory (a judge is served from local files; a remote judge is given by url)")
        served = str(params.get("model") or "judge")
        started = start_servers(model_dir, 1, start_timeout_s=float(params.get("start_timeout_s", 600.0)), log=log,
                                served_name=served, seed=int(cfg.get("seed", 0)), max_model_len=JUDGE_MAX_MODEL_LEN,
                                threads=int(params.get("threads", 1)), log_dir=run_dir / "judge-server")
        for server in started:
            atexit.register(server.stop)
        servers.extend(started)
        with open_dict(params):
            params.url = started[0].url
            params.model = served
            params.pop("start_timeout_s", None)
            params.pop("threads", None)
        log(f"judge: env.reward[{i}] is served from {model_dir} at {started[0].url}")
    return servers


def gate_judges(cfg, env, log=print) -> None:
    """Run the gate on every judge component of `env`'s reward; ConfigError with the table when one fails."""
    for component in env.verifier.components:
        judge = component.verifier
        if not isinstance(judge, JudgeVerifier):
            continue
        if not judge.gate:
            log(f"WARNING: the judge gate is OFF for reward component {component.name!r} (gate: false): this judge "
                f"was not tested on master keys (':', 'Thought process:') or prompt injections before training, "
                f"and a policy finds what a judge accepts")
            continue
        rows = env.rows("train", judge.gate_rows, seed=int(cfg.get("seed", 0)))
        report = run_gate(env.score, component.name, rows, judge.gate_threshold, gate_classes(),
                          honest_completions)
        if not report.failed:
            log(report.table())
        else:
            names = ", ".join(r.name for r in report.failed)
            raise ConfigError(f"the judge gate stopped the run: the judge accepts {names}\n{report.table()}\n"
                              f"A policy trained on this judge would learn these. Use a stronger judge, a stricter "
                              f"template, mode: hybrid, or set gate: false in its params to train anyway.")
