"""What scoring starts stops when a run ends: `Env.shutdown` closes the verifiers' sandboxes and worker processes
(each starts again on its next use), and `rlvr train` calls it, so a run's warm containers do not outlive it
inside a longer-lived Python process (they also go at interpreter exit)."""

import os

import pytest

from rlvr.envs.base import Env
from rlvr.sandboxes.pool import OWNER_LABEL, owner_id
from rlvr.trainer.run import train
from rlvr.verifiers.compose import Component, Composite


class Closable:
    def __init__(self):
        self.closed = 0

    def __call__(self, completion, record):
        raise AssertionError("not scored here")

    def close(self):
        self.closed += 1


def test_a_composite_closes_each_component_that_can_be_closed():
    a, b = Closable(), Closable()
    Composite([Component("a", a), Component("b", b), Component("plain", lambda completion, record: None)]).close()
    assert (a.closed, b.closed) == (1, 1)


@pytest.mark.xdist_group("sandbox")
def test_a_run_on_a_code_env_leaves_no_container_of_its_own(compose_train, tmp_path, monkeypatch):
    """A one-step GRPO run on the canary (code scored in Docker): the run's containers exist when the run ends,
    and none is left once `train` returns."""
    if os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    import docker

    client = docker.from_env()

    def mine():
        return client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner_id()}"})

    seen = []
    shutdown = Env.shutdown

    def counted(self):
        seen.append(len(mine()))
        shutdown(self)

    monkeypatch.setattr(Env, "shutdown", counted)
    cfg = compose_train([
        "env=canary", "rollout=hf", "rollout.max_new_tokens=8", "model.warm_start.max_steps=10",
        "model.warm_start.eval_every=10", "model.warm_start.eval_rows=4", "model.arch.hidden_size=32",
        "model.arch.num_layers=1", "model.arch.num_heads=2", "model.arch.num_kv_heads=1",
        "model.arch.intermediate_size=64", "train.steps=1", "train.save_every=1", "train.eval_every=1",
        "train.eval_prompts=2", "train.prompts_per_step=2", "train.completions_per_prompt=2", "threads=1",
        f"output_dir={tmp_path}"])
    train(cfg, log=lambda *_: None)
    assert seen and seen[0] > 0  # the run's warm containers, still there when it ended
    assert mine() == []
