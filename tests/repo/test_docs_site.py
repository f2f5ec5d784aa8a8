"""The documentation site (mkdocs.yml, docs/) builds in strict mode, offline, and says what the code says.

The build is the one `make docs` runs: a broken link or anchor, a page missing from the navigation, or a `:::`
reference to a module or function that does not exist fails it. What is checked on the built pages: the
configuration reference lists every key `rlvr train|eval|verify --help all` prints (under every algorithm and
environment preset too), the API reference has a page for every module of the installed package tree, and no
page asks the network for anything (fonts, scripts, styles). What is checked on the sources: the README is a
front page (at most 150 lines, the two commands first) whose relative links reach files of the repository and
headings that exist, and every file a page names by its path exists, so a moved module cannot leave the docs
pointing at nothing. The commands in the docs are composed by tests/repo/test_doc_commands.py.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from rlvr.cli import main

pytestmark = pytest.mark.xdist_group("docs")  # one worker builds the site once for the whole module

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    problems = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0, "\n".join(problems) or done.stderr[-4000:]
    print(f"mkdocs build --strict: {time.monotonic() - start:.1f} s")
    return out


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def help_keys(command: str, *args: str, capsys) -> list[str]:
    """The keys `rlvr COMMAND --help all ARGS` lists, as the user reads them (`  key=default   meaning`)."""
    assert main([command, "--help", "all", *args]) == 0
    out = capsys.readouterr().out
    return [m[1] for m in re.finditer(r"^  ([a-z_][\w.]*)=", out, re.M)]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))


def test_the_site_builds_in_strict_mode_with_every_page(site):
    for page in ["index.html", "reference/configuration/index.html", "reference/api/rlvr/index.html",
                 "benchmarks/index.html", "security/index.html"]:
        assert (site / page).is_file(), page
    home = text_of(site / "index.html")
    assert "make demo" in home and "held-out greedy accuracy" in home  # the README, as the site's front page


def test_the_configuration_reference_lists_every_key_of_help_all(site, capsys):
    page = text_of(site / "reference" / "configuration" / "index.html")
    missing = {}
    for command, args in [("train", []), ("eval", []), ("verify", []),
                          *[("train", [f"algo={a}"]) for a in options("algo")],
                          *[("train", [f"env={e}"]) for e in options("env")],
                          *[("eval", [f"env={e}"]) for e in options("env")]]:
        keys = help_keys(command, *args, capsys=capsys)
        assert keys, (command, args)
        absent = [k for k in keys if k not in page]
        if absent:
            missing[" ".join([command, *args])] = absent
    assert not missing, f"keys of --help all missing from the configuration reference: {missing}"


def test_the_configuration_reference_gives_each_key_its_schema_docstring(site):
    from dataclasses import fields

    from rlvr.help import field_docs
    from rlvr.trainer.config import RunConfig

    def plain(text: str) -> str:  # as Markdown renders it: no backticks or emphasis marks, one space
        return " ".join(re.sub(r"[`*]", "", text).split())

    page = plain(text_of(site / "reference" / "configuration" / "index.html"))
    train_docs = field_docs(next(f for f in fields(RunConfig) if f.name == "train").default_factory)
    assert train_docs
    assert [key for key, doc in train_docs.items() if plain(doc) not in page] == []


def test_the_api_reference_has_a_page_for_every_module_of_the_package_tree(site):
    layout = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    expected = []
    for package, folder in layout.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if any(p.startswith("_") and p != "__init__" or p == "__main__" for p in parts):
                continue
            if not all((ROOT / folder).joinpath(*parts[:i], "__init__.py").exists() for i in range(len(parts))):
                continue  # a folder of data or templates, not a package
            name = [*package.split("."), *(parts[:-1] if parts[-1] == "__init__" else parts)]
            expected.append(site.joinpath("reference", "api", *name, "index.html"))
    assert len(expected) > 50
    assert not [str(p.relative_to(site)) for p in expected if not p.is_file()]


def test_no_page_fetches_anything_from_the_network(site):
    remote = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//""", re.I)
    offenders = [str(p.relative_to(site)) for p in site.rglob("*.html") if remote.search(p.read_text())]
    assert not offenders
    css = "".join(p.read_text() for p in site.rglob("*.css"))
    assert "fonts.googleapis" not in css and "@import url(http" not in css


def test_the_readme_is_a_front_page_with_the_two_commands_first():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    first = FENCE.search(text)[0].splitlines()
    assert text.startswith("# rlvr\n\n```bash\n")
    assert [line.split("#")[0].strip() for line in first[1:-1]] == ["make demo", "make test"]


@pytest.mark.parametrize("name", ["README.md", "BENCHMARKS.md"])
def test_the_front_pages_links_reach_files_and_headings(name):
    """README.md and BENCHMARKS.md are read outside the site (a clone, a code host): their links are checked here."""
    from markdown.extensions.toc import slugify

    broken, source = [], ROOT / name
    for label, target in re.findall(r"\[([^\]]+)\]\(([^)\s]+)\)", FENCE.sub("", source.read_text())):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (ROOT / path) if path else source
        if not file.exists():
            broken.append(target)
        elif anchor:
            headings = re.findall(r"^#+ (.*)$", FENCE.sub("", file.read_text()), re.M)
            if anchor not in [slugify(h, "-") for h in headings]:
                broken.append(target)
    assert not broken


# a path of the repository as a page names it: a top-level folder, then a file with its extension
REPO_PATH = re.compile(r"(?<![\w./-])((?:rlvr|envs|verifiers|sandboxes|integrations|trainer|conf|tests|bench|docs)"
                       r"/[\w./-]*?\.(?:py|yaml|md|sh|png|toml))(?![\w/])")


def test_every_file_a_page_names_exists():
    stale = []
    for doc in [README, *PAGES]:
        for path in REPO_PATH.findall(doc.read_text()):
            if re.search(r"[A-Z]{3,}|\*|<", path) or path.startswith("bench/results/"):
                continue  # a placeholder (conf/env/NAME.yaml), a glob, or a benchmark's output
            if not (ROOT / path).exists():
                stale.append(f"{doc.relative_to(ROOT)}: {path}")
    assert not stale, "\n".join(stale)
