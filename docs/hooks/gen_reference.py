"""Writes the generated pages at build time (mkdocs-gen-files runs this; nothing it writes is in git).

- `index.md`, the site's home: the repository's README.md, its links into `docs/` made relative to the site and its
  links to other files of the repository turned into plain names, so the front page has one source.
- `reference/configuration.md`: every key of `rlvr train`, `rlvr eval` and `rlvr verify` with its default and its
  meaning, from the functions `rlvr train --help all` prints with (rlvr/help.py: the meaning is the docstring under
  the key's field in the schema, then its rule from the field's metadata), so the page cannot say other than the
  command does.
- `reference/api/...`: one page per module, found by walking the package tree as it is installed (pyproject.toml's
  `package-dir` maps `rlvr.envs` to `envs/` and so on), so a module added or moved needs no edit here; the pages
  show the modules' docstrings (mkdocstrings reads the source, it imports nothing), from the folder
  docs/hooks/api_sources.py lays out as the installed `rlvr` package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import mkdocs_gen_files

API = Path("reference/api")
SKIPPED_MODULES = {"__main__"}  # `python -m rlvr`: the command line, documented by the CLI pages


ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- the home page

def home_page() -> str:
    def link(match: re.Match) -> str:
        label, target = match[1], match[2]
        if target.startswith(("http://", "https://", "#")):
            return match[0]
        if target.startswith("docs/"):
            return f"[{label}]({target.removeprefix('docs/')})"
        return label if label.startswith("`") else f"`{label}`"

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", link, (ROOT / "README.md").read_text())


# ---------------------------------------------------------------- configuration reference

def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    text = _cell(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _composed(command: str, overrides: list[str]):
    """(rows as `--help all` lists them, {key: full docstring}) for `rlvr COMMAND overrides`."""
    from hydra import compose, initialize_config_module

    from rlvr import help as rlvr_help

    _register_schemas(command)
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        cfg = compose(config_name=command, overrides=overrides, return_hydra_config=True)
        rows = rlvr_help.rows(command, cfg)
        docs = dict(rlvr_help.user_keys(command, cfg))
        if rlvr_help.DYNAMIC in cfg:
            docs.update(rlvr_help.env_keys(cfg, command))
        choices = {group: (cfg.hydra.runtime.choices[group], _options(group))
                   for group in cfg.hydra.runtime.choices
                   if "/" not in group and group not in rlvr_help.INTERNAL_GROUPS
                   and cfg.hydra.runtime.choices[group] is not None}
    return rows, docs, choices


def _options(group: str) -> list[str]:
    from hydra.core.global_hydra import GlobalHydra

    return GlobalHydra.instance().config_loader().get_group_options(group)


def _register_schemas(command: str) -> None:
    if command == "train":
        from rlvr.trainer.config import register_schemas

        register_schemas()
    elif command == "eval":
        from rlvr.trainer.evaluation.eval_config import register_eval_schema

        register_eval_schema()
    else:
        from rlvr.verifiers.batch import register_schema

        register_schema()


def _table(rows, docs, heading: str) -> list[str]:
    out = [heading, "", "| key | default | meaning |", "|---|---|---|"]
    for row in rows:
        meaning = f"{docs.get(row.key) or row.meaning} {row.rule}".strip()  # the field's rule, as --help shows it
        out.append(f"| {_code(row.key)} | {_code(row.default)} | {_cell(meaning)} |")
    return out + [""]


def configuration_page() -> str:
    from rlvr import help as rlvr_help

    out = [
        "# Configuration reference",
        "",
        "Every key of `rlvr train`, `rlvr eval` and `rlvr verify`, with its default and its meaning. This page is",
        "generated when the site is built, by the same functions that print `rlvr train --help all`: each meaning is",
        "the docstring under the key's field in the command's schema (an environment's keys: the comments of its",
        "YAML), followed by the value's rule where its field has one (`(>= 1)`: the check the command makes), so it",
        "says what the installed code says. Defaults are those of the command with no overrides;",
        "`rlvr train --help GROUP=OPTION` prints them under a preset, as the preset tables below do.",
        "",
        "A key is set on the command line as `key=value` (Hydra's syntax: lists as `'key=[a,b]'`); a misspelt key,",
        "a key another algorithm reads or a value of the wrong type stops the command before any work, naming it.",
        "",
    ]
    for command in ("train", "eval", "verify"):
        rows, docs, choices = _composed(command, [])
        out += [f"## `rlvr {command}`", ""]
        if choices:
            out += ["Choices (`group=option`; each option is a preset of the keys below):", "",
                    "| group | default | options |", "|---|---|---|"]
            for group, (chosen, options) in sorted(choices.items(), key=lambda kv: _group_rank(kv[0])):
                out.append(f"| `{group}=` | `{chosen}` | {', '.join(f'`{o}`' for o in options)} |")
            out.append("")
        for title in dict.fromkeys(r.section for r in rows):
            mine = [r for r in rows if r.section == title]
            if command == "train" and title == "Algorithm":
                continue  # one table per preset below
            if rlvr_help.DYNAMIC in choices and all(r.key.startswith("env.") for r in mine):
                continue
            shown = [r for r in mine if not r.key.startswith("env.")]
            out += _table(shown, docs, f"### {title}")
        if command == "train":
            out += ["### Algorithm presets (`algo=NAME`)", "",
                    "The keys each algorithm reads, with its preset's values (`conf/algo/NAME.yaml` quotes the",
                    "paper beside each one).", ""]
            for algo in choices["algo"][1]:
                algo_rows, algo_docs, _ = _composed("train", [f"algo={algo}"])
                out += _table([r for r in algo_rows if r.section == "Algorithm"], algo_docs, f"#### `algo={algo}`")
        if "env" in choices:
            out += [f"### Environments (`env=NAME`) of `rlvr {command}`", "",
                    "Each environment's own keys (`env.KEY=VALUE`), with the comments of its YAML.", ""]
            for env in choices["env"][1]:
                env_rows, env_docs, _ = _composed(command, [f"env={env}"])
                out += _table([r for r in env_rows if r.key.startswith("env.")], env_docs,
                              f"#### `env={env}` ({command})")
    return "\n".join(out) + "\n"


def _group_rank(group: str) -> tuple[int, str]:
    from rlvr import help as rlvr_help

    order = rlvr_help.GROUP_ORDER
    return (order.index(group) if group in order else len(order), group)


# ---------------------------------------------------------------- API reference

def modules(stage: Path) -> list[tuple[str, ...]]:
    """Every module and package under the staged tree, as name parts, packages before their modules."""
    found = []
    paths = [Path(folder, name) for folder, _, names in os.walk(stage, followlinks=True) for name in names]
    for path in sorted(p for p in paths if p.suffix == ".py"):
        parts = path.relative_to(stage).with_suffix("").parts
        if any(part in SKIPPED_MODULES or (part.startswith("_") and part != "__init__") for part in parts):
            continue
        if not all((stage.joinpath(*parts[:i]) / "__init__.py").exists() for i in range(1, len(parts))):
            continue  # a folder that is not a package (templates, data)
        found.append(parts[:-1] if parts[-1] == "__init__" else parts)
    return sorted(set(found))


def api_pages(stage: Path) -> None:
    nav = mkdocs_gen_files.Nav()
    for parts in modules(stage):
        is_package = stage.joinpath(*parts, "__init__.py").exists()
        doc = API.joinpath(*parts, "index.md") if is_package else API.joinpath(*parts).with_suffix(".md")
        nav[parts] = doc.relative_to(API).as_posix()
        identifier = ".".join(parts)
        with mkdocs_gen_files.open(doc, "w") as page:
            page.write(f"# `{identifier}`\n\n::: {identifier}\n    options:\n      show_root_heading: false\n"
                       f"      show_root_toc_entry: false\n      heading_level: 2\n")
    with mkdocs_gen_files.open(API / "SUMMARY.md", "w") as summary:
        summary.writelines(nav.build_literate_nav())


stage = Path(mkdocs_gen_files.config.plugins["mkdocstrings"].config.handlers["python"]["paths"][0])  # hooks/api_sources.py
api_pages(stage)
with mkdocs_gen_files.open("index.md", "w") as page:
    page.write(home_page())
with mkdocs_gen_files.open("reference/configuration.md", "w") as page:
    page.write(configuration_page())
