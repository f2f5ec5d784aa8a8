"""MkDocs hook: before mkdocstrings starts, lay the packages out as they are installed and point it there.

pyproject.toml's `package-dir` installs `envs/` as `rlvr.envs`, `trainer/` as `rlvr.trainer` and so on, so the
repository is not one tree that mkdocstrings (which reads source, never imports it) could walk. This hook makes a
temporary folder holding `rlvr/` with a link to each file of the repository's `rlvr/` and one link per mapped
subpackage (`rlvr/envs` -> `envs/`), read from pyproject.toml at every build, and gives that folder to
mkdocstrings' Python handler as its search path. docs/hooks/gen_reference.py walks the same folder to write one
API page per module.

A page may show a docstring by a short name, `::: @losses.grpo_loss`: the hook replaces it with the one full
identifier that ends so (`rlvr.trainer.algos.losses.grpo_loss`), and fails the build when none or several do.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
_stages: list[Path] = []


def installed_layout() -> dict[str, Path]:
    """{dotted package: its folder} as pyproject.toml's `package-dir` installs it."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {name: ROOT / folder for name, folder in mapping.items()}


def stage_packages(layout: dict[str, Path]) -> Path:
    stage = Path(tempfile.mkdtemp(prefix="rlvr-docs-src-"))
    _stages.append(stage)
    for name in sorted(layout, key=lambda n: n.count(".")):
        target, folder = stage.joinpath(*name.split(".")), layout[name]
        if "." not in name:
            target.mkdir()
            for entry in folder.iterdir():
                if entry.name != "__pycache__":
                    target.joinpath(entry.name).symlink_to(entry)
            continue
        if target.parent.is_symlink() or not target.parent.is_dir():
            raise SystemExit(f"docs: cannot lay out {name} ({folder}): its parent package is not a plain folder here")
        if target.is_symlink():
            target.unlink()
        target.symlink_to(folder)
    return stage


@event_priority(100)  # before mkdocstrings' own on_config builds its handler
def on_config(config):
    stage = stage_packages(installed_layout())
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(stage)]
    return config


def on_shutdown():
    while _stages:
        shutil.rmtree(_stages.pop(), ignore_errors=True)


# ---------------------------------------------------------------- `::: @NAME` in a page

SHORT_REFERENCE = re.compile(r"^::: @([\w.]+)[ \t]*$", re.M)
_index: dict[str, list[str]] = {}


def _identifiers(stage: Path) -> list[str]:
    """Every module of the staged tree and every function and class at a module's top level, dotted."""
    found = []
    for folder, _, names in os.walk(stage, followlinks=True):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = Path(folder, name)
            parts = path.relative_to(stage).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append(module)
            tree = ast.parse(path.read_text(), str(path))
            found += [f"{module}.{node.name}" for node in tree.body
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return found


def resolve(short: str, stage: Path) -> str:
    """The one identifier that ends with `.SHORT` (`@losses.grpo_loss` -> `rlvr.trainer.algos.losses.grpo_loss`), so a
    page names what it shows without the module path that moves when a folder is reorganised."""
    if str(stage) not in _index:
        _index[str(stage)] = _identifiers(stage)
    hits = [i for i in _index[str(stage)] if i == short or i.endswith("." + short)]
    if len(hits) != 1:
        raise PluginError(f"`::: @{short}` names {'nothing' if not hits else 'several: ' + ', '.join(hits)} "
                          f"in the package tree; write a longer dotted suffix")
    return hits[0]


def on_page_markdown(markdown, page, config, files):
    if "::: @" not in markdown:
        return markdown
    stage = Path(config.plugins["mkdocstrings"].config.handlers["python"]["paths"][0])
    return SHORT_REFERENCE.sub(lambda m: f"::: {resolve(m[1], stage)}", markdown)
