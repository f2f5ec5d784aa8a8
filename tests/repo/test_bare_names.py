"""A package installed under one of the repository's folder names (PyPI's `verifiers`, PrimeIntellect's
environments library, is the one users have) is what a bare import gets, however rlvr is run: from the
repository root with `python -m`, a script or pytest (the root on sys.path ahead of site-packages), or
the console script; and `rlvr.verifiers` is still rlvr's, in either import order (rlvr/bare_names.py).

The installed package is a stand-in written here (a `verifiers` with a `v1` subpackage, as verifiers 0.4
has), so the test needs no network; what it checks is where each name resolves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path):
    """A directory holding a package `verifiers` (and `verifiers.v1`), as pip would install it."""
    package = tmp_path / "site" / "verifiers"
    (package / "v1").mkdir(parents=True)
    (package / "__init__.py").write_text("ORIGIN = 'pypi'\n")
    (package / "v1" / "__init__.py").write_text("class Env:\n    pass\n")
    return tmp_path / "site"


def run(args, site, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


BOTH = """
import verifiers, verifiers.v1
import rlvr.verifiers
from rlvr.verifiers import build_verifier
assert verifiers.ORIGIN == "pypi" and verifiers.v1.Env, verifiers.__file__
assert rlvr.verifiers.__name__ == "rlvr.verifiers" and build_verifier("exact").__class__.__name__
assert not hasattr(verifiers, "build_reward") and hasattr(rlvr.verifiers, "build_reward")
print("ok", verifiers.__file__)
"""


@pytest.mark.parametrize("order", ["pypi_first", "rlvr_first"])
def test_python_from_the_repository_root_gets_both(site, order):
    code = BOTH if order == "pypi_first" else "import rlvr.verifiers\n" + BOTH
    proc = run([sys.executable, "-c", code], site)  # -c: the current directory (the root) is sys.path[0]
    assert proc.returncode == 0, proc.stderr
    assert f"ok {site / 'verifiers' / '__init__.py'}" in proc.stdout


def test_python_m_rlvr_and_pytest_from_the_root(site, tmp_path):
    proc = run([sys.executable, "-m", "rlvr", "envs"], site)
    assert proc.returncode == 0 and "arithmetic" in proc.stdout, proc.stderr
    test_file = tmp_path / "test_uses_pypi_verifiers.py"
    test_file.write_text("def test_both():\n" + textwrap.indent(BOTH.strip(), "    ") + "\n")
    proc = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(test_file)],
               site)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_console_script(site):
    rlvr = shutil.which("rlvr", path=str(Path(sys.executable).parent))
    proc = run([rlvr, "envs"], site)
    assert proc.returncode == 0 and "arithmetic" in proc.stdout, proc.stderr


def test_without_the_package_a_bare_import_says_what_to_import(tmp_path):
    # -S: no site-packages, where the test extras install the real `verifiers`; the root (cwd) still holds rlvr/
    proc = run([sys.executable, "-S", "-c", "import verifiers"], tmp_path / "empty")
    assert proc.returncode != 0
    assert "no package 'verifiers' is installed" in proc.stderr and "import rlvr.verifiers" in proc.stderr
