"""The wheel carries every subpackage, the Hydra YAML and the console script; a bare folder name with no
package of that name installed refuses to import (tests/repo/test_bare_names.py: with one installed). The wheel is built from a copy of the source tree, so the checkout is untouched."""

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# one worker runs this file: its module-scoped fixture is built once, not once per xdist worker
pytestmark = pytest.mark.xdist_group("packaging")


ROOT = Path(__file__).resolve().parents[2]
SOURCE = ["pyproject.toml", "README.md", "LICENSE", "rlvr", "envs", "verifiers", "sandboxes", "integrations", "trainer",
          "conf"]
EXPECTED = [
    "rlvr/conf/train.yaml", "rlvr/conf/algo/grpo.yaml", "rlvr/conf/env/arithmetic.yaml", "rlvr/conf/model/tiny.yaml",
    "rlvr/conf/rollout/hf.yaml", "rlvr/conf/__init__.py", "rlvr/__init__.py", "rlvr/__main__.py", "rlvr/cli.py",
    "rlvr/envs/__init__.py", "rlvr/envs/arithmetic.py", "rlvr/trainer/algos/grpo.py", "rlvr/trainer/run.py",
    "rlvr/verifiers/format.py", "rlvr/verifiers/math/verifier.py", "rlvr/verifiers/code/wire.py",
    "rlvr/sandboxes/__init__.py", "rlvr/integrations/reward_functions.py",
    # attack programs, read as text by sandboxes/probes.py and verifiers/code/cheats.py
    "rlvr/sandboxes/probe_programs/aftermath.py", "rlvr/verifiers/code/cheat_programs/hunt.py",
    # the supervisor, shipped into the sandbox as the text of these files (sandboxes/base.py: agent_source)
    "rlvr/sandboxes/agent/__init__.py", "rlvr/sandboxes/agent/reset.py", "rlvr/sandboxes/agent/counters.py",
    "rlvr/sandboxes/agent/clock.py", "rlvr/sandboxes/agent/process.py", "rlvr/sandboxes/agent/supervisor.py",
    # what `rlvr envs new` writes (envs/scaffold.py)
    "rlvr/envs/templates/README.md.tmpl", "rlvr/envs/templates/__init__.py.tmpl", "rlvr/envs/templates/env.py.tmpl",
    "rlvr/envs/templates/env.yaml.tmpl", "rlvr/envs/templates/multi_turn_env.py.tmpl",
    "rlvr/envs/templates/multi_turn_env.yaml.tmpl", "rlvr/envs/templates/pyproject.toml.tmpl",
    "rlvr/envs/templates/test_env.py.tmpl", "rlvr/envs/templates/test_multi_turn_env.py.tmpl",
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCE:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif path.exists():
            shutil.copy2(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)]
    result = subprocess.run(command, cwd=src, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = dist.glob("rlvr-*.whl")
    with zipfile.ZipFile(path) as zf:
        zf.build_output = result.stdout + result.stderr  # what `make demo`'s install prints
        yield zf


@pytest.mark.slow
def test_build_prints_no_package_would_be_ignored_warnings(wheel):
    """`make demo` opened with about 175 lines of setuptools warnings about the conf groups."""
    assert "absent from the `packages` configuration" not in wheel.build_output, wheel.build_output[-3000:]


@pytest.mark.slow
def test_wheel_contents(wheel):
    names = set(wheel.namelist())
    missing = [name for name in EXPECTED if name not in names]
    assert not missing, f"wheel lacks {missing}"
    for folder in ("envs", "verifiers", "trainer", "sandboxes", "integrations", "conf"):  # only under rlvr/, never bare
        assert not any(name.startswith(f"{folder}/") for name in names)
    assert all(name.startswith(("rlvr/", "rlvr-")) for name in names), sorted(names)


@pytest.mark.slow
def test_wheel_entry_point(wheel):
    (entry_points,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "rlvr = rlvr.cli:main" in text


@pytest.mark.slow
def test_wheel_every_conf_yaml(wheel):
    shipped = {name.removeprefix("rlvr/conf/") for name in wheel.namelist()
               if name.startswith("rlvr/conf/") and name.endswith(".yaml")}
    in_tree = {str(p.relative_to(ROOT / "conf")) for p in (ROOT / "conf").rglob("*.yaml")}
    assert shipped == in_tree


@pytest.mark.parametrize("folder", ["envs", "verifiers", "trainer", "sandboxes", "integrations", "conf"])
def test_bare_folder_import_fails(folder, tmp_path):
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {folder}"
    # -S: without site-packages, where the test extras install PyPI's `verifiers` (a bare import hands over to it)
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and f"rlvr.{folder}" in result.stderr
