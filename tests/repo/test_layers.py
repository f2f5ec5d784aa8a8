"""The import graph of the rlvr packages: no loop between modules, and no import that points up the layers.

    rlvr.errors, rlvr.registry (and the `rlvr` package's own __init__: the version, and `rlvr.train` /
    `rlvr.evaluate` handed out lazily, see LAZY_EXPORTS)
      < rlvr.sandboxes < rlvr.verifiers < rlvr.envs < rlvr.integrations < rlvr.trainer
      < rlvr.cli, rlvr.__main__, rlvr.help < rlvr.api

An import may point down or sideways (within one layer), never up; `rlvr.conf` is data (YAML) and
takes no part; nothing in rlvr imports `rlvr.integrations` (rlvr's rewards for other trainers). Every
module of every package in pyproject's `packages` list is read with `ast`, its folder found through
`package-dir` (a subpackage lies under its parent's folder), nothing imported.

What counts as an import of module M: `import M`, `from M import name` (M itself when `name` is
not a submodule, `M.name` when it is), relative forms resolved against the importing module, at
top level and inside functions alike (a function-level import still runs, just later, and a loop
through one is still a loop). The edge goes to the module named, not to the packages above it:
importing `rlvr.trainer.config` also runs `rlvr/trainer/__init__.py`, but that file's own
imports are edges of its own. Imports under `if TYPE_CHECKING:` count for the layers (a type
from a higher layer is still a dependency pointing up) but not for loops (they never execute, so
they cannot make an import loop).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the toml parser setuptools vendors
    from setuptools._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
LAYERS = [("rlvr", "rlvr.errors", "rlvr.registry"), ("rlvr.sandboxes",), ("rlvr.verifiers",), ("rlvr.envs",),
          ("rlvr.integrations",), ("rlvr.trainer",), ("rlvr.cli", "rlvr.__main__", "rlvr.help"), ("rlvr.api",)]
DATA = ("rlvr.conf",)
# Imports left out of the graph. The `rlvr` package's `__getattr__` (PEP 562) imports rlvr.api when `rlvr.train` or
# `rlvr.evaluate` is first used: by then the package has finished importing, so this edge can close no import loop,
# and it is how the bottom package hands out the top layer's functions without loading them on `import rlvr`.
LAZY_EXPORTS = {("rlvr", "rlvr.api")}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every .py file of every package pyproject lists."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = setuptools["package-dir"]
    modules = {}
    for package in setuptools["packages"]:
        parent = max((p for p in package_dir if package == p or package.startswith(p + ".")), key=len)
        folder = root / package_dir[parent] / Path(*package[len(parent):].split(".")[1:])
        for path in sorted(folder.glob("*.py")):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, modules) -> list[tuple[str, bool]]:
    """(imported rlvr module, whether only under `if TYPE_CHECKING:`) for each import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.stem == "__init__"
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            type_only.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: against this module's package
                package = name.split(".") if is_package else name.split(".")[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules:  # `import rlvr.x.y` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, id(node) in type_only))
    return found


def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(every import edge, the edges that execute), each as module -> the rlvr modules it imports."""
    modules = module_files(root)
    every = {name: set() for name in modules}
    runtime = {name: set() for name in modules}
    for name, path in modules.items():
        for target, type_only in imports_of(name, path, modules):
            if (name, target) in LAZY_EXPORTS:
                continue
            every[name].add(target)
            if not type_only:
                runtime[name].add(target)
    return every, runtime


def layer_of(module: str) -> int | None:
    """The index of `module`'s layer in LAYERS; None for data (rlvr.conf) and for names outside rlvr."""
    if any(module == d or module.startswith(d + ".") for d in DATA):
        return None
    best = None  # the longest prefix names the layer: rlvr.errors is not the `rlvr` package's layer by accident
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def upward_imports(graph: dict[str, set[str]], layer=layer_of) -> list[str]:
    """'a -> b' for each import from a lower layer to a higher one."""
    found = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer(source), layer(target)
            if low is not None and high is not None and high > low:
                found.append(f"{source} -> {target}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One loop per strongly connected component of more than one module (or a module importing
    itself), as the list of modules around it, first module repeated at the end."""
    return [_loop_in(component, graph) for component in loop_components(graph)]


def loop_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components that hold a loop (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # the graphs here are a few hundred modules: recursion depth is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _loop_in(component: set[str], graph) -> list[str]:
    """A shortest loop through the component's first module (breadth-first inside the component)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    return paths[node] + [start]
                if nxt in component and nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no loop through {start} in {sorted(component)}")  # a component always has one


# ---- the checks on synthetic graphs: the detector finds what it must ------------------------------------

def test_detects_a_loop_and_reports_it_in_order():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c", "a"], ["e", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_detects_an_upward_import_and_allows_down_and_sideways():
    graph = {"rlvr.sandboxes.base": {"rlvr.errors"}, "rlvr.envs.x": {"rlvr.trainer.run", "rlvr.envs.y",
                                                                    "rlvr.verifiers.z"},
             "rlvr.errors": {"rlvr.conf"}, "rlvr.cli": {"rlvr.trainer.run"}, "rlvr.trainer.run": {"rlvr.cli"}}
    assert upward_imports(graph) == ["rlvr.envs.x -> rlvr.trainer.run", "rlvr.trainer.run -> rlvr.cli"]
    assert layer_of("rlvr.errors") == layer_of("rlvr") == 0 and layer_of("rlvr.conf.algo") is None


def test_reads_imports_the_way_python_runs_them(tmp_path):
    """Relative, from-a-module, function-level and TYPE_CHECKING imports, on a small package on disk."""
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackages = ["rlvr", "rlvr.trainer", "rlvr.trainer.sub"]\n'
                                             '[tool.setuptools.package-dir]\n"rlvr" = "rlvr"\n"rlvr.trainer" = "trainer"\n')
    for folder in ("rlvr", "trainer", "trainer/sub"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "rlvr" / "errors.py").write_text("")
    (tmp_path / "trainer" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nfrom rlvr.trainer import b\nfrom .sub.c import thing\n"
        "if TYPE_CHECKING:\n    from rlvr.trainer.sub import d\n"
        "def f():\n    import rlvr.errors\n")
    for name in ("b.py", "sub/c.py", "sub/d.py"):
        (tmp_path / "trainer" / name).write_text("")
    (tmp_path / "trainer" / "sub" / "d.py").write_text("from ..a import f\n")
    every, runtime = import_graph(tmp_path)
    assert every["rlvr.trainer.a"] == {"rlvr.trainer.b", "rlvr.trainer.sub.c", "rlvr.trainer.sub.d", "rlvr.errors"}
    assert runtime["rlvr.trainer.a"] == {"rlvr.trainer.b", "rlvr.trainer.sub.c", "rlvr.errors"}
    assert every["rlvr.trainer.sub.d"] == {"rlvr.trainer.a"}
    assert cycles(every) == [["rlvr.trainer.a", "rlvr.trainer.sub.d", "rlvr.trainer.a"]]
    assert cycles(runtime) == []  # the only loop runs through a TYPE_CHECKING import


# ---- the checks on rlvr itself ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graphs():
    return import_graph()


def test_the_walk_sees_every_package(graphs):
    every, _ = graphs
    assert {"rlvr.cli", "rlvr.errors", "rlvr.sandboxes.base", "rlvr.verifiers.registry", "rlvr.envs.base",
            "rlvr.trainer.run"} <= set(every)
    assert {"rlvr.registry", "rlvr.verifiers.math.verifier", "rlvr.verifiers.code.verifier",
            "rlvr.verifiers.vf.verifier", "rlvr.verifiers.python.verifier",
            "rlvr.integrations.reward_functions"} <= set(every), "a subpackage is walked"
    assert "rlvr.errors" in every["rlvr.trainer.validate"], "an import inside the package is seen"


def test_no_import_loop_between_modules(graphs):
    _, runtime = graphs
    report = [" -> ".join(_loop_in(component, runtime)) + f"  (modules that import each other: {sorted(component)})"
              for component in loop_components(runtime)]
    assert not report, "import loops:\n" + "\n".join(report)


def test_no_import_points_up_the_layers(graphs):
    every, _ = graphs
    upward = upward_imports(every)
    assert not upward, "imports pointing up the layers (errors < sandboxes < verifiers < envs < integrations < " \
                       "trainer < cli < api):\n" + "\n".join(upward)


def test_nothing_imports_the_integrations(graphs):
    every, _ = graphs
    found = [f"{source} -> {target}" for source, targets in sorted(every.items()) for target in sorted(targets)
             if target.startswith("rlvr.integrations") and not source.startswith("rlvr.integrations")]
    assert not found, "rlvr.integrations is for other trainers, not imported inside rlvr:\n" + "\n".join(found)


# ---- inside rlvr.trainer: the rooms point one way too ------------------------------------------------------------
# (room, the modules it never imports, the modules under those it may): the engines (rollout/) import nothing else of
# the trainer; a step's experience (experience/) never reaches an algorithm or the loop; an algorithm (algos/) is
# `update(ctx, batch)`, so it neither samples (no engine, no collection) nor reaches the loop; models/ and the held-out
# evaluation (evaluation/) sit below the algorithms and the loop.
LOOP = ("rlvr.trainer.run", "rlvr.trainer.setup", "rlvr.trainer.step")
TRAINER_ROOMS = [
    ("rlvr.trainer.rollout", ("rlvr.trainer",), ("rlvr.trainer.rollout",)),
    ("rlvr.trainer.experience", ("rlvr.trainer.algos", "rlvr.trainer.evaluation", *LOOP), ()),
    ("rlvr.trainer.algos", ("rlvr.trainer.rollout", "rlvr.trainer.experience", "rlvr.trainer.evaluation", *LOOP),
     ("rlvr.trainer.rollout.types", "rlvr.trainer.rollout.prompts", "rlvr.trainer.experience.batch",
      "rlvr.trainer.experience.metrics")),
    ("rlvr.trainer.models", ("rlvr.trainer.experience", "rlvr.trainer.algos", *LOOP), ()),
    ("rlvr.trainer.evaluation", ("rlvr.trainer.algos", *LOOP), ()),
]


def _under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def trainer_room_breaches(graph: dict[str, set[str]], rooms=TRAINER_ROOMS) -> list[str]:
    """'a -> b' for each import of a room's module into what that room must not import."""
    found = []
    for room, forbidden, allowed in rooms:
        for source in sorted(m for m in graph if _under(m, (room,))):
            found += [f"{source} -> {target}" for target in sorted(graph[source])
                      if _under(target, forbidden) and not _under(target, allowed)]
    return found


def test_detects_a_room_importing_upward():
    graph = {"rlvr.trainer.rollout.hf": {"rlvr.trainer.rollout.types", "rlvr.trainer.experience.batch"},
             "rlvr.trainer.algos.grpo": {"rlvr.trainer.experience.batch", "rlvr.trainer.experience.collect",
                                         "rlvr.trainer.models.logprobs"},
             "rlvr.trainer.experience.collect": {"rlvr.trainer.rollout.types", "rlvr.trainer.step"}}
    assert trainer_room_breaches(graph) == ["rlvr.trainer.rollout.hf -> rlvr.trainer.experience.batch",
                                            "rlvr.trainer.experience.collect -> rlvr.trainer.step",
                                            "rlvr.trainer.algos.grpo -> rlvr.trainer.experience.collect"]


def test_trainer_rooms_import_one_way(graphs):
    every, _ = graphs
    assert {"rlvr.trainer.experience.collect", "rlvr.trainer.step", "rlvr.trainer.setup"} <= set(every)
    breaches = trainer_room_breaches(every)
    assert not breaches, "imports against the trainer's rooms (engines < experience < algorithms < the loop):\n" \
                         + "\n".join(breaches)
