"""A throwaway package written under a temporary directory and `pip install -e`'d into the test environment for
the tests that need one found the way a user's is (tests/envs/vf/test_vf_env.py, tests/envs/vf/test_vf_multi_turn.py)."""

import contextlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path


@contextlib.contextmanager
def editable_install(root: Path, name: str, packages: list[str]):
    """Write `root`/pyproject.toml for distribution `name` (depending on `verifiers`) holding `packages` (their
    folders already under `root`), install it editable, yield `root`, uninstall it."""
    (root / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [project]
        name = "{name}"
        version = "0.1.0"
        dependencies = ["verifiers"]
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [tool.setuptools]
        packages = {json.dumps(packages)}
        """))
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(root)], check=True,
                   capture_output=True, timeout=300)
    try:
        yield root
    finally:
        subprocess.run([*pip, "uninstall", "-y", "-q", name], capture_output=True, timeout=300)
