"""The tiny model's key follows a parent package's import-time imports only: `rlvr/__init__.py` imports its Python
API lazily inside a function, which the build never runs, so the CLI and what it imports stay out of every key
(trainer/models/tiny_model.py `rlvr_sources`)."""

import sys

from rlvr.trainer.models.tiny_model import rlvr_sources


def test_a_parent_package_is_hashed_but_its_lazy_imports_are_not_followed(tmp_path, monkeypatch):
    package = tmp_path / "rlvr_parent_fixture"
    package.mkdir()
    (package / "__init__.py").write_text("from rlvr_parent_fixture import eager\n\n"
                                         "def __getattr__(name):\n    from rlvr_parent_fixture import lazy\n"
                                         "    return getattr(lazy, name)\n")
    for name in ("eager", "lazy", "lazy_dep"):
        (package / f"{name}.py").write_text("X = 1\n")
    (package / "lazy.py").write_text("import rlvr_parent_fixture.lazy_dep\n")
    (package / "top.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert set(rlvr_sources(["rlvr_parent_fixture.top"])) == {
            "rlvr_parent_fixture", "rlvr_parent_fixture.top", "rlvr_parent_fixture.eager"}
        # imported by name, the package is followed whole, its functions' imports too
        assert set(rlvr_sources(["rlvr_parent_fixture.top", "rlvr_parent_fixture"])) == {
            "rlvr_parent_fixture", "rlvr_parent_fixture.top", "rlvr_parent_fixture.eager", "rlvr_parent_fixture.lazy",
            "rlvr_parent_fixture.lazy_dep"}
    finally:
        sys.modules.pop("rlvr_parent_fixture", None)
