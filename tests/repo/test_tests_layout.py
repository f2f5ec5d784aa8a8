"""The tests mirror the packages: a test file lives in tests/<the package folder it checks>/, so a reader finds
a module's tests by its path (issue 53). tests/repo/ holds the checks of the repository as a whole."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGES = ("rlvr", "trainer", "verifiers", "sandboxes", "envs", "integrations")  # the folders pyproject maps


def misplaced(tests: Path, root: Path) -> list[str]:
    """Test files not in a folder that mirrors a package folder of `root` (or in tests/repo/)."""
    bad = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests)
        if folder.parts[:1] == ("repo",) and len(folder.parts) == 1:
            continue
        mirrored = folder.parts and folder.parts[0] in PACKAGES and (root / folder).is_dir()
        if not mirrored:
            bad.append(str(path.relative_to(tests)))
    return bad


def test_every_test_file_lives_in_the_folder_of_the_package_it_checks():
    assert not misplaced(TESTS, ROOT)


def test_a_test_file_at_the_top_or_in_a_made_up_folder_is_found(tmp_path):
    (tmp_path / "trainer" / "algos").mkdir(parents=True)
    tests = tmp_path / "tests"
    for name in ("test_top.py", "trainer/algos/test_ok.py", "trainer/nope/test_bad.py", "repo/test_repo.py"):
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    assert misplaced(tests, tmp_path) == ["test_top.py", "trainer/nope/test_bad.py"]
