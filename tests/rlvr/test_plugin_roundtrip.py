"""A scaffolded plugin installs, lists, trains and evaluates; every built-in env trains one step and
evaluates the checkpoint from the CLI.

Real subprocesses (`python -m rlvr ...`) on the tiny model; nothing downloads. The plugin is
pip-installed into the current environment and uninstalled afterwards.
"""

import contextlib
import json
import os
import subprocess
import sys

import pytest

TINY = ["rollout=hf",  # tiny_lm has 16-dim heads; vLLM's CPU attention needs >= 32
        "train.prompts_per_step=2", "train.completions_per_prompt=2", "train.eval_prompts=2", "rollout.max_new_tokens=8",
        "threads=1"]


def rlvr(*args, cwd, timeout=600):
    env = {**os.environ, "RLVR_CACHE": str(cwd / "cache"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rlvr", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@contextlib.contextmanager
def installed_plugin(tmp_path, name, *flags):
    """`rlvr envs new NAME FLAGS` into tmp_path/pkg, pip-installed for the block, uninstalled after it."""
    assert rlvr("envs", "new", name, "--dir", str(tmp_path / "pkg"), *flags, cwd=tmp_path).returncode == 0
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(tmp_path / "pkg")],
                   check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run([*pip, "uninstall", "-y", "-q", f"rlvr-env-{name.replace('_', '-')}"], capture_output=True)


@pytest.fixture
def plugin(tmp_path):
    with installed_plugin(tmp_path, "doubling_demo") as name:
        yield name


@pytest.mark.slow
def test_scaffolded_plugin_round_trip(plugin, tmp_path, tiny_lm):
    listing = rlvr("envs", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    line = next(x for x in listing.stdout.splitlines() if x.strip().startswith(plugin))
    assert "plugin rlvr-env-doubling-demo" in line and "exact, format" in line and "procedural" in line

    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "pkg" / "tests")],
                           cwd=tmp_path, capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout[-2000:]

    train = rlvr("train", f"env={plugin}", f"model.name_or_path={tiny_lm.path}", "train.steps=2", *TINY, "output_dir=run",
                 cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in steps if "reward/mean" in m] == [1, 2]

    # the `rlvr eval` contract: model.name_or_path=PATH env=NAME n_samples=k output_dir=DIR -> results.json
    ev = rlvr("eval", f"model.name_or_path={tiny_lm.path}", f"env={plugin}", "n_samples=2", "temperature=1.0",
              "n_prompts=2", "rollout.max_new_tokens=8", "threads=1", "output_dir=ev", cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-3000:]
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert results["envs"][0]["name"] == plugin


@pytest.mark.slow
def test_scaffolded_multi_turn_plugin_round_trip(tmp_path, tiny_lm):
    """`rlvr envs new NAME --multi-turn`: the MultiTurnEnv package installs, lists, passes its own test and trains."""
    with installed_plugin(tmp_path, "running_sum_demo", "--multi-turn") as name:
        listing = rlvr("envs", cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        line = next(x for x in listing.stdout.splitlines() if x.strip().startswith(name))
        assert "plugin rlvr-env-running-sum-demo" in line and "verifiers: exact;" in line

        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                str(tmp_path / "pkg" / "tests")], cwd=tmp_path, capture_output=True, text=True)
        assert tests.returncode == 0, tests.stdout[-2000:]
        assert "2 passed" in tests.stdout

        train = rlvr("train", f"env={name}", f"model.name_or_path={tiny_lm.path}", "train.steps=1", *TINY,
                     "output_dir=run", cwd=tmp_path)
        assert train.returncode == 0, train.stderr[-3000:]
        steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in steps if "turns/mean" in m] == [1]  # trained as multi-turn


def test_broken_plugin_is_reported_by_name_and_the_rest_still_list(monkeypatch, capsys):
    import rlvr.registry as registry_module
    from rlvr.cli import main
    from rlvr.envs.registry import env_registry

    class Dist:
        name = "rlvr-env-broken"

    class Broken:
        name, dist = "broken_env", Dist()

        def load(self):
            raise ImportError("No module named 'broken_pkg'")

    real = registry_module.entry_points
    monkeypatch.setattr(registry_module, "entry_points",
                        lambda group: [*real(group=group), *([Broken()] if group == "rlvr.envs" else [])])
    monkeypatch.setattr(env_registry, "_plugin_factories", {})
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "broken_env" in out and "failed to load: ImportError: No module named 'broken_pkg'" in out
    assert "arithmetic" in out and "reasoning_gym" in out


# the code environments run their completions in the sandbox: their cases join the xdist group of the other
# sandbox tests (tests/conftest.py): containers and the Docker engine are machine-wide
SANDBOXED = pytest.mark.xdist_group("sandbox")
BUILTINS = ["arithmetic", "countdown", "gsm8k", "math", pytest.param("code_stdio", marks=SANDBOXED),
            pytest.param("humaneval", marks=SANDBOXED), "reasoning_gym", "guess_number",
            pytest.param("tool_multiply", marks=SANDBOXED), pytest.param("code_feedback", marks=SANDBOXED), "dataset"]


@pytest.mark.slow
@pytest.mark.parametrize("env", BUILTINS)
def test_every_builtin_env_trains_one_step_from_the_command_line(env, tmp_path, tiny_lm, env_data):
    if env in ("code_stdio", "humaneval", "tool_multiply", "code_feedback") and os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    result = rlvr("train", f"env={env}", *env_data.data_overrides(env, tmp_path), f"model.name_or_path={tiny_lm.path}",
                  "train.steps=1", *TINY, "output_dir=run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.jsonl").read_text().strip()
    # ... and evaluates the checkpoint it wrote
    result = rlvr("eval", f"model.name_or_path={tmp_path / 'run' / 'checkpoints' / 'step_1'}", f"env={env}",
                  *env_data.data_overrides(env, tmp_path), "n_prompts=2", "rollout=hf", "rollout.max_new_tokens=8",
                  "output_dir=ev", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp_path / "ev" / "results.json").read_text())["results"]
    assert len(results) == 1 and results[0]["n_prompts"] == 2 and 0.0 <= results[0]["pass@1"] <= 1.0


def test_a_test_split_smaller_than_the_default_eval_is_used_whole(tmp_path, tiny_lm, env_data):
    """The default train.eval_prompts=200 on a fixed test set of 4 problems (HumanEval has 164): the run
    evaluates on all 4 and says so, instead of refusing the environment's own defaults."""
    result = rlvr("train", "env=gsm8k", *env_data.data_overrides("gsm8k", tmp_path), f"model.name_or_path={tiny_lm.path}",
                  "train.steps=1", *[o for o in TINY if not o.startswith("train.eval_prompts")], "output_dir=run",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train.eval_prompts=200: gsm8k has 4 test problems; the held-out eval uses all 4" in result.stdout
    evals = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["eval/n"] for m in evals if "eval/n" in m] == [4, 4]
