"""MkDocs hook: read docstrings' plain-text layout as their authors meant it.

The docstrings are prose that puts a list or an equation right under the line that introduces it:

    With log r = log pi_ref(o_t) - log pi_theta(o_t)  (Schulman 2020):
        k1 = -log r                    unbiased, can be negative

Markdown wants a blank line before a list or an indented block, and without one it runs the lines together into
the paragraph above. This adds that blank line before Markdown parses a page or a docstring (mkdocstrings renders
docstrings with the site's Markdown extensions): before a list item, and before a line indented four or more
spaces deeper than the text line above it. Fenced code, tables, headings and `:::` blocks are left as they are.
Placeholders written in angle brackets outside code (`/proc/<pid>/fd`, `"<answer>{answer}</answer>"`) would be
read as HTML tags and vanish; any such tag that is not HTML is shown as written.
"""

from __future__ import annotations

import re

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

HTML_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em", "h1", "h2",
             "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "ol", "p", "pre", "s", "small", "span",
             "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "u", "ul"}
TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)([^<>]*)>")
CODE_SPAN = re.compile(r"(`+).*?\1")
LIST_ITEM = re.compile(r"^\s*(?:[*+-]|\d+[.)])\s+\S")
NOT_PROSE = ("|", "#", ">", ":::", "!!!", "???", "<", "--8<--")


class _BlankLineBeforeBlocks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out, fenced, before, in_list = [], False, "", False
        for line in lines:
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            elif not fenced and line.strip() and not in_list and _opens_a_block(before, line):
                out.append("")
            out.append(line if fenced else _not_html(line))
            before = line
            in_list = bool(line.strip()) and (in_list or bool(LIST_ITEM.match(line)))  # a list runs to a blank line
        return out


def _not_html(line: str) -> str:
    """`line` with each tag that is not HTML escaped, outside code spans (and outside indented code)."""
    if "<" not in line or line.startswith("    ") or line.lstrip().startswith(NOT_PROSE[3:]):
        return line
    out, last = [], 0
    for span in CODE_SPAN.finditer(line):
        out += [_escape_tags(line[last:span.start()]), span[0]]
        last = span.end()
    return "".join(out + [_escape_tags(line[last:])])


def _escape_tags(text: str) -> str:
    return TAG.sub(lambda m: m[0] if m[2].lower() in HTML_TAGS else "&lt;" + m[0][1:-1] + "&gt;", text)


def _opens_a_block(before: str, line: str) -> bool:
    text = before.strip()
    if not text or text.startswith(NOT_PROSE):
        return False
    indent = len(line) - len(line.lstrip())
    return bool(LIST_ITEM.match(line)) or indent >= len(before) - len(before.lstrip()) + 4


class DocstringLayout(Extension):
    def extendMarkdown(self, md):  # Python-Markdown names it so
        md.preprocessors.register(_BlankLineBeforeBlocks(md), "rlvr_docstring_layout", 25)


@event_priority(100)  # before mkdocstrings copies the extension list for rendering docstrings
def on_config(config):
    config.markdown_extensions.append(DocstringLayout())
    return config
