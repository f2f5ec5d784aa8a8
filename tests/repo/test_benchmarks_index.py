"""BENCHMARKS.md (read in a clone or on a code host) and the site's docs/benchmarks/index.md give the same figures.

Both hold the table of today's figures, each row with its command and date. The two files' links are written for
where each is read (BENCHMARKS.md from the repository root, index.md from docs/benchmarks/), so a row's last
column is compared by the file its link reaches, every other column as written: a figure edited on one page and
not the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADER = "| what | figure | command | date | page |"
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def figures(page: Path) -> list[tuple[str, ...]]:
    """The rows of `page`'s table of today's figures, the page column as (label, resolved file, anchor)."""
    lines = page.read_text().splitlines()
    assert HEADER in lines, f"{page.relative_to(ROOT)} has no table of today's figures"
    rows = []
    for line in lines[lines.index(HEADER) + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert LINK.fullmatch(cells[-1]), f"{page.relative_to(ROOT)}: a row's page column is not one link: {cells[-1]}"
        rows.append(tuple(LINK.sub(lambda link: _reached(page, link), cell) for cell in cells))
    return rows


def _reached(page: Path, link: re.Match) -> str:
    """A link as the file it reaches from `page` (and its anchor), the same whichever folder the page is in."""
    if link[2].startswith(("http://", "https://")):
        return link[0]
    target = (page.parent / link[2]).resolve().relative_to(ROOT)
    return f"[{link[1]}]({target}{link[3] or ''})"


def test_the_root_index_and_the_site_index_give_the_same_figures():
    root, site = figures(ROOT / "BENCHMARKS.md"), figures(ROOT / "docs" / "benchmarks" / "index.md")
    assert len(site) > 20
    assert root == site


def test_every_figure_names_its_command_and_date():
    for row in figures(ROOT / "docs" / "benchmarks" / "index.md"):
        what, figure, command, date = row[:4]
        assert "`" in command, f"{what}: no command"
        assert re.match(r"2026-\d\d", date), f"{what}: no date"
