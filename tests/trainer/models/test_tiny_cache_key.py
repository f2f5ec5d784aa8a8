"""The tiny model's cache key changes with everything that shapes the model, so a stale build is never reused.

A cached model built by other code or other library versions made the learning tests pass only on the
machine where they were tuned (the key used to hash the config and a hand-kept version number).
"""

import sys
import textwrap

import pytest

from rlvr.envs import load_env
from rlvr.trainer.models import tiny_model
from rlvr.trainer.models.tiny_model import build_fingerprint, rlvr_sources, tiny_model_path

ARCH = dict(vocab_size=512, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
            max_positions=128)
WARM = dict(target_accuracy=[0.3, 0.6], max_steps=10, batch_size=8, lr=1e-3, eval_every=5, eval_rows=10,
            max_new_tokens=8)


def _path(env, seed=0):
    return tiny_model_path(env, {"name": "arithmetic", "digits": 1}, ARCH, WARM, seed)


def test_fingerprint_covers_the_build_code_the_env_and_its_verifiers():
    sources = build_fingerprint(load_env("arithmetic", digits=1))["sources"]
    for module in ["rlvr.trainer.models.tiny_model", "rlvr.trainer.warm_start", "rlvr.trainer.evaluation.evaluate",
                   "rlvr.trainer.models.logprobs", "rlvr.trainer.rollout.prompts", "rlvr.trainer.rollout.hf",
                   "rlvr.envs.arithmetic", "rlvr.envs.base", "rlvr.verifiers.exact", "rlvr.verifiers.format"]:
        assert module in sources, module
    assert "rlvr.sandboxes.docker_backend" not in sources  # only what the build runs


def test_static_import_walk_follows_imports_inside_functions(tmp_path, monkeypatch):
    package = tmp_path / "rlvr_fixture_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "top.py").write_text("def f():\n    from rlvr_fixture_pkg.inner import g\n    return g()\n")
    (package / "inner.py").write_text("def g():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = rlvr_sources(["rlvr_fixture_pkg.top"])
    assert set(before) == {"rlvr_fixture_pkg", "rlvr_fixture_pkg.top", "rlvr_fixture_pkg.inner"}
    (package / "inner.py").write_text(textwrap.dedent("def g():\n    return 2\n"))
    after = rlvr_sources(["rlvr_fixture_pkg.top"])
    assert after["rlvr_fixture_pkg.inner"] != before["rlvr_fixture_pkg.inner"]
    assert after["rlvr_fixture_pkg.top"] == before["rlvr_fixture_pkg.top"]
    sys.modules.pop("rlvr_fixture_pkg", None)


@pytest.mark.parametrize("library", ["torch", "transformers", "tokenizers"])
def test_key_changes_with_a_library_version(monkeypatch, library):
    env = load_env("arithmetic", digits=1)
    before = _path(env)
    module = getattr(tiny_model, library)
    monkeypatch.setattr(module, "__version__", module.__version__ + ".other")
    assert _path(env) != before


def test_key_changes_with_the_cpu_kernel_level(monkeypatch):
    env = load_env("arithmetic", digits=1)
    before = _path(env)
    level = tiny_model.torch.backends.cpu.get_cpu_capability()
    monkeypatch.setattr(tiny_model.torch.backends.cpu, "get_cpu_capability", lambda: level + "_OTHER")
    assert _path(env) != before


def test_key_changes_with_the_code_that_builds_and_scores(monkeypatch):
    env = load_env("arithmetic", digits=1)
    before = _path(env)
    real = tiny_model.rlvr_sources

    def edited(roots):
        sources = real(roots)
        sources["rlvr.trainer.warm_start"] = "0" * 64  # as if warm_start.py had been edited
        return sources

    monkeypatch.setattr(tiny_model, "rlvr_sources", edited)
    assert _path(env) != before


def test_key_is_stable_and_keyed_on_config_and_seed():
    env = load_env("arithmetic", digits=1)
    assert _path(env) == _path(load_env("arithmetic", digits=1))
    assert _path(env, seed=1) != _path(env)


def test_processes_asking_at_once_build_the_model_once(tmp_path):
    """Two processes that want the same uncached model (parallel test workers, two runs started together):
    one builds it, the other waits on the lock and loads that build."""
    import fcntl
    import json
    import os
    import subprocess

    cache = tmp_path / "cache"
    env_config = {"name": "arithmetic", "digits": 1}
    child = textwrap.dedent(f"""
        from rlvr.envs import load_env
        from rlvr.trainer.models.tiny_model import build_tiny
        print(build_tiny(load_env("arithmetic", digits=1), {env_config!r}, {ARCH!r}, {WARM!r}, 0,
                         log=lambda line: print(line, flush=True)), flush=True)
    """)
    env = {**os.environ, "RLVR_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    key = tiny_model_path(load_env("arithmetic", digits=1), env_config, ARCH, WARM, 0).name
    path = cache / "tiny" / key  # where the children, whose RLVR_CACHE is `cache`, build it
    path.parent.mkdir(parents=True)
    with open(path.with_name(path.name + ".lock"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a build in progress elsewhere: both children must wait for it
        children = [subprocess.Popen([sys.executable, "-c", child], env=env, stdout=subprocess.PIPE, text=True)
                    for _ in range(2)]
        for proc in children:
            assert "waiting" in proc.stdout.readline()
    outputs = []
    for proc in children:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        outputs.append(out)
    assert sum("tiny model: building" in out for out in outputs) == 1, outputs
    assert all(out.strip().splitlines()[-1] == str(path) for out in outputs)
    assert json.loads((path / "build.json").read_text()) == build_fingerprint(load_env("arithmetic", digits=1))
