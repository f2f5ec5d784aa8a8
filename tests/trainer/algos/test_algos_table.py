"""The algorithm table (trainer/algos/table.py) and who reads it: `rlvr train --help` and the command line's checks
read it without importing torch, every function a row names exists where it says, and nothing outside
trainer/algos/ compares an algorithm's name or family with a string: it asks the row."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.trainer.algos.table import ALGORITHMS, Algorithm, Later

ROOT = Path(__file__).resolve().parents[3]

# `rlvr train [overrides] --help` in a fresh interpreter: its exit status, whether torch was imported, the rlvr
# modules that were (to name the culprit when torch was), and the help it printed
HELP_IN_A_FRESH_PROCESS = """
import contextlib, io, json, sys
from rlvr.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(["train", *sys.argv[1:], "--help"])
print(json.dumps({"rc": rc, "torch": "torch" in sys.modules, "help": out.getvalue(),
                  "rlvr": sorted(m for m in sys.modules if m.startswith("rlvr."))}))
"""


@pytest.mark.parametrize("overrides", [[], ["algo=ppo"], ["algo=dpo"], ["algo=npg"]])
def test_train_help_runs_without_importing_torch(overrides):
    done = subprocess.run([sys.executable, "-c", HELP_IN_A_FRESH_PROCESS, *overrides], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["rc"] == 0 and "algo." in report["help"], report["help"][-2000:]  # the help was printed
    assert not report["torch"], f"`rlvr train {' '.join(overrides)} --help` imported torch; rlvr modules " \
                                f"loaded: {report['rlvr']}"


def test_every_function_a_row_names_exists_in_the_module_it_names():
    named = [(name, field, value) for name, row in ALGORITHMS.items() for field, value in vars(row).items()
             if isinstance(value, Later)]
    assert {field for _, field, _ in named} >= {"update", "build_critic", "offline_data"}
    for name, field, later in named:
        function = later.load()
        assert callable(function) and function.__name__ == later.name, (name, field, later)
        assert function.__module__ == f"rlvr.trainer.{later.module}", (name, field, later)


def test_a_loaded_row_holds_the_functions_themselves():
    """A run's steps call the functions, not `Later`: one more file in every step's path otherwise."""
    loaded = ALGORITHMS["ppo"].loaded()
    assert isinstance(loaded, Algorithm) and loaded.family == "ppo"
    assert not any(isinstance(value, Later) for value in vars(loaded).values())
    assert loaded.update.__name__ == "ppo_update" and loaded.build_critic.__name__ == "build_critic"


def _string_tests_of_algorithms(tree: ast.AST) -> list[str]:
    """Each comparison of `<...>.algo.name`, or of a `family` (attribute or variable), with a string (== / != / in)."""
    def is_name_or_family(node) -> bool:
        return (isinstance(node, ast.Name) and node.id == "family") or isinstance(node, ast.Attribute) and (
            node.attr == "family" or (node.attr == "name" and isinstance(node.value, ast.Attribute)
                                      and node.value.attr == "algo"))

    def has_string(node) -> bool:
        return any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(node))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_name_or_family(s) for s in sides) and any(has_string(s) for s in sides):
                found.append(ast.unparse(node))
    return found


def test_the_scan_finds_a_name_or_family_test():
    tree = ast.parse("a = cfg.algo.name == 'ppo'\nb = row.family in ('dpo', 'ppo')\nc = row.family != x\n"
                     "d = cfg.algo.name in ALGORITHMS\ne = family != 'natural_gradient'\nf = env.name == 'x'\n")
    assert _string_tests_of_algorithms(tree) == ["cfg.algo.name == 'ppo'", "row.family in ('dpo', 'ppo')",
                                                 "family != 'natural_gradient'"]


def test_nothing_outside_the_algorithms_tests_an_algorithm_name_or_family():
    """The loop, validation and checkpoints ask the row (needs_reference, whole_distributions, needs_groups,
    offline_data, check_keys, ...): no module outside trainer/algos/ tests a name or a family, trainer/algo_keys.py
    included (a family there is only the key of its config schema, never compared)."""
    found = []
    for path in sorted((ROOT / "trainer").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("trainer/algos/"):
            continue
        found += [f"{relative}: {test}" for test in _string_tests_of_algorithms(ast.parse(path.read_text()))]
    assert not found, "ask the algorithm's row (trainer/algos/table.py) instead:\n" + "\n".join(found)
