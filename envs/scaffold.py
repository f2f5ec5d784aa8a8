"""`rlvr envs new NAME [--dir D] [--multi-turn]`: write a pip-installable environment plugin package.

The package (in D, default `./rlvr-env-NAME`) holds what adding an environment
takes (docs/getting-started/own-environment.md): one Python module (a small procedural task to replace with yours), one YAML with its
parameters, one test, and a pyproject whose entry point in group `rlvr.envs` makes
`rlvr train env=NAME` work once the package is installed (`pip install -e D`). `--multi-turn` writes a
multi-turn environment (a `MultiTurnEnv` game with start/step/close) instead.

The files are templates in envs/templates/ (package data, so the wheel carries them; tests/repo/test_programs_are_files.py
compiles every Python one filled in). The multi-turn example is a small game with state, so every part of the
multi-turn contract (envs/multi_turn.py) has something to do: a running sum. The prompt gives the first number; each
assistant message is the total so far as `<answer>N</answer>`; a right total gets the next number (role "user"), a
wrong one or the last number ends the game. `start` makes the per-trajectory state, `step` plays one turn, `close`
frees the state. The verifiers score the last message against the final total, so only a game played to the end
earns 1.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from importlib.resources import files
from pathlib import Path

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# Each file of the package, from a template in envs/templates/ (package data) filled in with str.format: `{name}`
# the env's name, `{pkg}` its package, `{cls}` its class, `{dist}` its distribution name; `{{`/`}}` are braces.
_ONE_TURN = {"env": "env.py.tmpl", "yaml": "env.yaml.tmpl", "test": "test_env.py.tmpl"}
_MULTI_TURN = {"env": "multi_turn_env.py.tmpl", "yaml": "multi_turn_env.yaml.tmpl", "test": "test_multi_turn_env.py.tmpl"}


def template(name: str) -> str:
    """The text of envs/templates/`name`."""
    return files("rlvr.envs").joinpath("templates").joinpath(name).read_text()


def scaffold(name: str, directory: str | Path | None = None, multi_turn: bool = False) -> Path:
    """Write the package for environment `name` into `directory`; returns it. ValueError on a bad name or a non-empty dir.
    `multi_turn`: the env, its YAML and its test are the multi-turn templates (module docstring)."""
    if not _NAME.match(name) or keyword.iskeyword(name):
        raise ValueError(f"environment name {name!r} must be lower-case letters, digits and _, starting with a letter")
    from rlvr.envs.registry import env_registry

    if name in env_registry.names():
        raise ValueError(f"environment {name!r} already exists ({env_registry.names()[name]}); choose another name")
    root = Path(directory if directory is not None else f"rlvr-env-{name.replace('_', '-')}")
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"{root} exists and is not empty")
    pkg = f"rlvr_env_{name}"
    cls = "".join(part.capitalize() for part in name.split("_")) + "Env"
    fields = {"name": name, "pkg": pkg, "cls": cls, "dist": name.replace("_", "-")}
    kind = _MULTI_TURN if multi_turn else _ONE_TURN
    written = {
        "pyproject.toml": "pyproject.toml.tmpl", "README.md": "README.md.tmpl", f"{pkg}/__init__.py": "__init__.py.tmpl",
        f"{pkg}/env.py": kind["env"], f"{pkg}/{name}.yaml": kind["yaml"], f"tests/test_{name}.py": kind["test"],
    }
    for rel, source in written.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template(source).format(**fields))
    return root


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rlvr envs new", description="scaffold a pip-installable rlvr environment plugin")
    parser.add_argument("name", help="the environment's name, used as env=NAME")
    parser.add_argument("--dir", help="where to write the package (default ./rlvr-env-NAME)")
    parser.add_argument("--multi-turn", action="store_true",
                        help="a multi-turn environment (MultiTurnEnv: start/step/close) instead of a one-turn one")
    options = parser.parse_args(args)
    try:
        root = scaffold(options.name, options.dir, multi_turn=options.multi_turn)
    except ValueError as error:
        print(f"rlvr envs new: {error}", file=sys.stderr)
        return 2
    print(f"wrote {root}/\n  pip install -e '{root}[test]'\n  rlvr envs\n  python -m pytest {root}/tests\n"
          f"  rlvr train env={options.name}")
    return 0
