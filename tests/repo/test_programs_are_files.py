"""No Python program hides in a string literal: each program the sandbox runs is a real file of the package, which
linters, coverage and these tests see, shipped into the sandbox as the file's text (as sandboxes/base.py's
agent_source ships the supervisor); the scaffold's files are templates in envs/templates/.

Why it matters: a program held in a string is invisible to every tool that reads the source, and these are the
programs of the security boundary (the candidate's process, the checker, the session's runner and driver)."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = ("rlvr", "trainer", "verifiers", "sandboxes", "envs", "integrations")
LONGEST = 8  # lines a string literal of Python may have (a short snippet in a message or a probe's one-liner)

# module that holds the shipped text -> (its name for it, the files it is built from, in order)
SHIPPED = {
    "rlvr.verifiers.code.harness": {"CANDIDATE": ["verifiers/code/wire.py", "verifiers/code/candidate_program.py"],
                                    "CHECKER": ["verifiers/code/wire.py", "verifiers/code/forecast.py",
                                                "verifiers/code/checker_program.py"]},
    "rlvr.sandboxes.session": {"RUNNER": ["sandboxes/session_runner.py"], "DRIVER": ["sandboxes/session_driver.py"]},
}
PROGRAM_MODULES = ("rlvr.verifiers.code.candidate_program", "rlvr.verifiers.code.checker_program",
                   "rlvr.sandboxes.session_runner", "rlvr.sandboxes.session_driver")


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _is_python(text: str) -> bool:
    if "def " in text:
        return True
    try:
        compile(text, "<literal>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def programs_in_strings(root: Path) -> list[str]:
    """`path:line (N lines)` for every string literal (docstrings aside) of more than LONGEST lines that holds
    Python: it compiles, or it defines a function."""
    found = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                        and node.value.count("\n") > LONGEST and _is_python(node.value)):
                    found.append(f"{rel}:{node.lineno} ({node.value.count(chr(10))} lines)")
    return found


def test_no_python_program_is_held_in_a_string_literal():
    assert programs_in_strings(ROOT) == []


def test_the_scan_finds_a_program_in_a_string(tmp_path):
    """The rule engaged: a program pasted into a string is found, a docstring or long prose is not."""
    (tmp_path / "verifiers").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(10))
    (tmp_path / "verifiers" / "m.py").write_text(
        f'"""A docstring\n{body}"""\nPROSE = """{"a line of prose" + chr(10) * 12}"""\n'
        f'PROGRAM = """\ndef main():\n{body}\nmain()\n"""\n')
    # the docstring is lines 1-12, PROSE 13-25; PROGRAM opens on line 26 and holds 2 + 10 + 2 newlines
    assert programs_in_strings(tmp_path) == ["verifiers/m.py:26 (14 lines)"]


@pytest.mark.parametrize("module, name", [(m, n) for m, names in SHIPPED.items() for n in names])
def test_each_shipped_program_is_its_files_text_and_compiles(module, name):
    """What goes into the sandbox is the files' own text (nothing formatted into it), and it compiles."""
    text = getattr(importlib.import_module(module), name)
    parts = [(ROOT / rel).read_text(encoding="utf-8") for rel in SHIPPED[module][name]]
    position = 0
    for part in parts:  # each file whole, in order (the candidate's monitor constant sits between two of them)
        at = text.find(part, position)
        assert at >= 0, f"{name} does not carry {SHIPPED[module][name][parts.index(part)]} whole"
        position = at + len(part)
    assert text.endswith(parts[-1])
    compile(text, name, "exec")


def test_the_supervisor_is_its_package_files_in_order_and_compiles():
    """base.agent_source() is the agent package's files whole, in the order each needs the ones before it (its
    __init__.py), and nothing else: inside the sandbox a name comes from the text above it, never an import."""
    from rlvr.sandboxes.base import agent_source

    order = ["reset.py", "counters.py", "clock.py", "process.py", "supervisor.py"]
    folder = ROOT / "sandboxes" / "agent"
    assert sorted(order + ["__init__.py"]) == sorted(p.name for p in folder.glob("*.py")), "a file left unshipped"
    text = agent_source()
    assert text == "\n\n".join((folder / name).read_text(encoding="utf-8") for name in order)
    compile(text, "agent_source", "exec")


@pytest.mark.parametrize("module", PROGRAM_MODULES)
def test_each_program_file_imports_on_the_host_without_running(module, monkeypatch):
    """Importing a program runs none of it: no stdin read, no change to sys.path (the checker's _rlvr_site runs only
    as __main__), and the process starts at its `__main__` guard."""
    monkeypatch.setattr(sys, "stdin", None)  # a program that read its input at import would fail here
    path = list(sys.path)
    sys.modules.pop(module, None)
    loaded = importlib.import_module(module)
    assert sys.path == path
    assert any(isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
               for node in ast.parse(Path(loaded.__file__).read_text(encoding="utf-8")).body)


@pytest.mark.parametrize("multi_turn", [False, True])
def test_every_python_scaffold_template_compiles_once_filled_in(tmp_path, multi_turn):
    from rlvr.envs.scaffold import scaffold

    root = scaffold("tally_game", tmp_path / "pkg", multi_turn=multi_turn)
    written = sorted(root.rglob("*.py"))
    assert [p.relative_to(root).as_posix() for p in written] == [
        "rlvr_env_tally_game/__init__.py", "rlvr_env_tally_game/env.py", "tests/test_tally_game.py"]
    for path in written:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
