"""`rlvr envs new NAME [--dir D] [--multi-turn]`: write a pip-installable environment plugin package.

The package (in D, default `./rlvr-env-NAME`) holds what adding an environment
takes (docs/getting-started/own-environment.md): one Python module (a small procedural task to replace with yours), one YAML with its
parameters, one test, and a pyproject whose entry point in group `rlvr.envs` makes
`rlvr train env=NAME` work once the package is installed (`pip install -e D`). `--multi-turn` writes a
multi-turn environment (a `MultiTurnEnv` game with start/step/close) instead; its templates are in
scaffold_multi_turn.py.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from pathlib import Path

from rlvr.envs import scaffold_multi_turn as multi

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

PYPROJECT = '''[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "rlvr-env-{dist}"
version = "0.1.0"
description = "The {name} environment for rlvr."
requires-python = ">=3.10"
dependencies = ["rlvr"]

[project.optional-dependencies]
test = ["pytest"]  # `pip install -e ".[test]"`, then `python -m pytest tests`

# This line is the whole plugin mechanism: `env={name}` resolves to {pkg}:load_env.
[project.entry-points."rlvr.envs"]
{name} = "{pkg}:load_env"

[tool.setuptools]
packages = ["{pkg}"]

[tool.setuptools.package-data]
"{pkg}" = ["*.yaml"]

[tool.pytest.ini_options]
testpaths = ["tests"]  # and this folder is pytest's root, wherever the package sits
'''

INIT = '''"""The {name} environment for rlvr (entry point `{pkg}:load_env`)."""

from {pkg}.env import load_env

__all__ = ["load_env"]
'''

ENV = '''"""{name}: double a number. Replace the task with yours; keep the `Env` contract.

Rows: "id" (stable per problem), "messages" (the prompt), "answer", "reference" (a completion
the verifiers score as correct, used for a supervised warm start). Train and test never share a
problem: `is_test` puts each problem on one side by a stable hash of its key.
"""

from __future__ import annotations

import random
from typing import ClassVar

from rlvr.envs import Env
from rlvr.envs.split import check_fraction, draw_test, draw_train, is_test
from rlvr.errors import ConfigError


class {cls}(Env):
    """`Double N=` for N in [0, max_number]; the answer is 2N in <answer></answer>."""

    name: ClassVar[str] = "{name}"
    # Any registered verifier (`rlvr envs` lists them); `gate` counts a component only when its gate passes.
    default_reward: ClassVar[list[dict]] = [
        {{"verifier": "exact", "weight": 0.9, "gate": "format"}},
        {{"verifier": "format", "weight": 0.1}},
    ]
    # rollout.max_new_tokens's default here: room for "<think>...</think><answer>1998</answer>"
    default_max_new_tokens: ClassVar[int] = 64
    # a completion cut at that length: "zero" (no positive reward) or "keep" (the verifiers' score)
    truncated_reward: ClassVar[str] = "zero"

    def __init__(self, *, max_number: int = 999, test_fraction: float = 0.2,
                 reward: list[dict] | None = None, system_prompt: str | None = None):
        if isinstance(max_number, bool) or not isinstance(max_number, int) or max_number < 10:
            raise ConfigError(f"{name}: 'max_number' must be an int >= 10, got {{max_number!r}}")
        self.max_number = max_number
        self.test_fraction = check_fraction(test_fraction, "{name}")
        super().__init__(reward=reward, system_prompt=system_prompt)

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        draw = draw_train if split == "train" else draw_test
        return [self._row(x) for x in draw(self._draw, str, self.test_fraction, n, seed)]

    def test_size(self) -> int | None:
        """How many distinct test problems exist: rlvr's held-out evals (train.eval_prompts, `rlvr eval`'s
        n_prompts) take at most this many. None where counting would be slow; asking for too many then fails
        with how many the draw found."""
        if self.max_number > 100_000:
            return None
        return sum(is_test(str(x), self.test_fraction) for x in range(self.max_number + 1))

    def _draw(self, rng: random.Random) -> int:
        return rng.randint(0, self.max_number)

    def _row(self, x: int) -> dict:
        return {{
            "id": f"{name}/{{x}}",
            "messages": [{{"role": "user", "content": f"Double {{x}}="}}],
            "answer": str(2 * x),
            "reference": f"<think></think><answer>{{2 * x}}</answer>",
        }}


# The entry point. A class is a factory: rlvr checks `env.KEY=V` overrides against its signature.
load_env = {cls}
'''

YAML = '''# {name}: parameters of {pkg}.env.{cls} with their defaults (override with env.KEY=V).
name: {name}
max_number: 999
test_fraction: 0.2
reward: null         # a list of {{verifier, weight, gate, params}}; null = the env default
system_prompt: null
'''

TEST = '''"""{name}: the env builds from its YAML, its reference solutions score 1, splits are disjoint."""

from pathlib import Path

import yaml

from rlvr.envs import load_env


def make_env():
    config = yaml.safe_load((Path(__import__("{pkg}").__file__).parent / "{name}.yaml").read_text())
    return load_env(config.pop("name"), **config)


def test_reference_scores_one_and_wrong_answer_less():
    env = make_env()
    rows = env.rows("train", 8, seed=0)
    assert [r.reward for r in env.score([r["reference"] for r in rows], rows)] == [1.0] * 8
    wrong = [f"<think></think><answer>{{int(r['answer']) + 1}}</answer>" for r in rows]
    assert all(r.reward < 1.0 for r in env.score(wrong, rows))


def test_train_and_test_never_share_a_problem():
    env = make_env()
    train = {{r["id"] for r in env.rows("train", 500, seed=0)}}
    test = {{r["id"] for r in env.rows("test", 20, seed=0)}}
    assert len(test) == 20 and not train & test
'''

README = '''# rlvr-env-{dist}

The `{name}` environment for [rlvr]. Install it next to rlvr and it is `env={name}`:

    pip install -e ".[test]"       # [test]: pytest, for the package's own test
    rlvr envs                      # lists {name} with source "plugin rlvr-env-{dist}"
    python -m pytest tests         # the python rlvr runs under, with pytest from [test]
    rlvr train env={name} train.steps=100

Edit `{pkg}/env.py` (the task), `{pkg}/{name}.yaml` (its parameters) and `tests/`.
'''


def scaffold(name: str, directory: str | Path | None = None, multi_turn: bool = False) -> Path:
    """Write the package for environment `name` into `directory`; returns it. ValueError on a bad name or a non-empty dir.
    `multi_turn`: the env, its YAML and its test are scaffold_multi_turn.py's."""
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
    env, yaml, test = (multi.ENV, multi.YAML, multi.TEST) if multi_turn else (ENV, YAML, TEST)
    files = {
        "pyproject.toml": PYPROJECT, "README.md": README, f"{pkg}/__init__.py": INIT, f"{pkg}/env.py": env,
        f"{pkg}/{name}.yaml": yaml, f"tests/test_{name}.py": test,
    }
    for rel, template in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields))
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
