"""Finding the final answer in a model's text, before anything is parsed.

Extractors are tried in a configurable order; the first that finds something wins. Each returns
the answer as a list of strings: one string normally, several when the model wrote several boxed
answers joined by "or"/"and"/"," (those count as one set, so hedging `\\boxed{3} or \\boxed{4}`
does not earn credit for 3).

Reasoning traces: when the text has `</think>`, only what follows the last `</think>` is searched,
so a candidate answer drafted while thinking never counts (open-r1's accuracy reward does the same).

Long texts: a Minerva closing line after the last box wins over the box (a box drafted earlier is
superseded); a number closing a concluding sentence after the last math span wins over the span
("... $d = \\frac{90}{n}$ ... Therefore, there are 12 such sequences."); an answer that is a
sentence ("The volume of $ABCD$ is 120") is reduced to what follows its last "is"/"=".
Bare answers: `extract_bare` (the `lenient` fallback of verifier.py) takes a short text with no
words as the answer, else the last number of the text, as math-verify's expression fallback does.
Inline math (`$...$`, `\\(...\\)`) does not span lines, as in math-verify.

Hostile text: this runs on the host, before any worker or time limit, on text a policy controls. Only the last
`MAX_REGION_CHARS` characters of the answer region are read, and every pattern is linear in its input: spans
are found by `latex_spans` (the lazy span regex rescanned the text once per unclosed `\\[`: 56 s on 100 kB of
them), the Minerva line by `_minerva_matches` (`\\s*(.+?)\\s*\\.?\\s*I hope` backtracked cubically: more than
120 s on "final answer is 1" and 3,000 spaces), the text between two boxes is read only when short (a name
pattern rescanned `a_a_a_...` once per letter: over 120 s on 100 kB). tests/verifiers/math/test_math_hostile.py holds them.

Sources of the conventions: Minerva's "Final Answer: The final answer is X. I hope it is correct."
(Lewkowycz et al. 2022, also lm-eval's minerva_math); GSM8K's `#### X`; the last-box rule and
its "boxes separated by a separator form one answer" idea come from math-verify's
`extract_boxed_content` (reimplemented here; its 10-character proximity rule is used for gold
answers only, `\\boxed{1} papers and \\boxed{2} bins`, while a model's boxes must be joined by
"or"/"and"/commas or a name such as "and y_2 =").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import pairwise

THINK_CLOSE = "</think>"
MAX_REGION_CHARS = 20_000  # the answer is read from at most the last 20,000 characters (about 5,000 tokens)
_BOX_COMMANDS = ("\\boxed", "\\fbox")
_BOX_JOINER_NOISE = re.compile(
    r"\\(?:text|mbox|textrm)\s*\{|\}|\\q?quad|\$|\\[()\[\]]|\bfor\s+part\s*\(?\w\)?|[a-zA-Z](?:_\{?\w+\}?)?\s*=|[\s.]"
)  # what may stand between boxes that form one answer: "or", "and", commas, and names ("and y_2 = \boxed{..}")
_BOX_JOINERS = {"", ",", ";", "or", "and", "&", ",or", ",and"}
# No `\\s*` beside the lazy body (stripped after): `\\s*(.+?)\\s*\\.?\\s*` backtracked cubically on a run of spaces.
_MINERVA = re.compile(r"final answer is(.+?)I hope it is correct", re.IGNORECASE | re.DOTALL)
_MINERVA_CLOSE = re.compile(r"I hope it is correct", re.IGNORECASE)
_GSM8K = re.compile(r"####\s*([^\n]+)")
_ANSWER_IS = re.compile(
    r"(?:the\s+)?(?:final\s+)?answer\s*(?:is|:|=)\s*:?\s*(.+?)(?:\n|$|(?<=[^\d\s\\])\.(?:\s|$)|\.\s)",
    re.IGNORECASE,
)
# Inline math (`$...$`, `\(...\)`) stays on one line, as math-verify reads it; display math may span lines.
# Used only for `fullmatch` (anchored, linear); every search for spans goes through `latex_spans`, which finds the
# same spans in linear time (this pattern's `finditer` scans to the end once per unclosed `\\[`: 56 s on 100 kB).
_LATEX_SPANS = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$([^\n]+?)(?<!\\)\$|\\\(([^\n]+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# `(?<!\d)\$[ \t]*\n` is what `(?<![\d])[ \t]*\$[ \t]*\n` matched, less the quadratic retries inside a run of spaces
_STRAY_DELIMITER = re.compile(r"\\\(|\\\)|(?<![\d\s])[ \t]*\$[ \t]*(?![\d\s])|(?<!\d)\$[ \t]*\n|\n[ \t]*\$")
# Scientific notation is not read by the fallbacks (`3e5` gives neither 300000 nor 3 nor 5): the number is atomic, so
# a failed `(?![eE][-+]?\d)` never backs off to a shorter one, and one glued to a letter before it never starts.
_NO_EXPONENT = r"(?![eE][-+]?\d)"
_LAST_NUMBER = re.compile(
    r"(?<![\w.])(?<!\d[eE][-+])[-\u2212]?(?>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?)" + _NO_EXPONENT + r"\s*%?"
)


_OPENERS = re.compile(r"\$|\\[(\[]")


def latex_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of each span `_LATEX_SPANS.finditer(text)` finds, found in linear time.

    The regex's lazy bodies scan to the end of the text (or line) once per opener that is never closed, so
    100 kB of `\\[` costs it about 10^9 steps. Here each closer is looked for once per opener *kind*: when
    none follows position q, none follows any later opener either, so that kind is skipped from then on."""
    spans: list[tuple[int, int, str]] = []
    n = len(text)
    no_display_after = no_bracket_after = n + 1  # openers at or past these positions have no closer
    no_inline_before = no_paren_before = -1  # line ends: openers before them on that line have no closer
    pos, line_end = 0, -1
    while True:
        m = _OPENERS.search(text, pos)
        if m is None:
            return spans
        i = m.start()
        if line_end < i:  # the end of the opener's line, looked up once per line (openers only move forward)
            line_end = text.find("\n", i)
            line_end = n if line_end < 0 else line_end
        found = None
        if text.startswith("$$", i) and i < no_display_after:  # `\$\$(.+?)\$\$`
            k = text.find("$$", i + 3)
            if k < 0:
                no_display_after = i
            else:
                found = (k + 2, text[i + 2: k])
        if found is None and text[i] == "$" and (i == 0 or text[i - 1] not in "\\$") and i >= no_inline_before:
            k = text.find("$", i + 2, line_end)  # `(?<![\\$])\$([^\n]+?)(?<!\\)\$`
            while k >= 0 and text[k - 1] == "\\":
                k = text.find("$", k + 1, line_end)
            if k < 0:
                no_inline_before = line_end
            else:
                found = (k + 1, text[i + 1: k])
        if found is None and text.startswith("\\(", i) and i >= no_paren_before:  # `\\\(([^\n]+?)\\\)`
            k = text.find("\\)", i + 3, line_end)
            if k < 0:
                no_paren_before = line_end
            else:
                found = (k + 2, text[i + 2: k])
        if found is None and text.startswith("\\[", i) and i < no_bracket_after:  # `\\\[(.+?)\\\]`
            k = text.find("\\]", i + 3)
            if k < 0:
                no_bracket_after = i
            else:
                found = (k + 2, text[i + 2: k])
        if found is None:
            pos = i + 1
            continue
        spans.append((i, found[0], found[1]))
        pos = found[0]


def _without_spans(text: str) -> str:
    """`text` with every math span removed (what `_LATEX_SPANS.sub("", text)` gave)."""
    out, pos = [], 0
    for start, end, _ in latex_spans(text):
        out.append(text[pos:start])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _minerva_matches(text: str) -> list[re.Match]:
    """`_MINERVA.finditer(text)`, in linear time: the text is cut after its last closing line first, so no
    "final answer is" scans to the end of the text for a closing line that never comes."""
    last = None
    for last in _MINERVA_CLOSE.finditer(text):
        pass
    return [] if last is None else list(_MINERVA.finditer(text, 0, last.end()))


def answer_region(text: str) -> str:
    """The part of the completion that may hold the final answer: after the last `</think>`, and of that at most
    the last `MAX_REGION_CHARS` characters (from a line start when one is near), so no completion costs the
    host more than a bounded scan (see "Hostile text" in the module docstring)."""
    end = text.rfind(THINK_CLOSE)
    region = text if end < 0 else text[end + len(THINK_CLOSE):]
    if len(region) <= MAX_REGION_CHARS:
        return region
    region = region[-MAX_REGION_CHARS:]
    line = region.find("\n", 0, 2000)  # inline math never spans lines: cut where no span can be open
    return region[line + 1:] if line >= 0 else region


def _braced(text: str, open_pos: int) -> int | None:
    """Index of the `}` closing the `{` at `open_pos`, or None when it is never closed.

    Escaped braces (`\\{`, `\\}`, set delimiters) are not TeX groups and are skipped."""
    depth = 0
    i = open_pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """Every complete `\\boxed{...}` / `\\fbox{...}` / `\\boxed 5`: (start, end, content), in order."""
    found = []
    pos = 0
    while True:
        starts = [(text.find(cmd, pos), cmd) for cmd in _BOX_COMMANDS]
        starts = [(s, c) for s, c in starts if s >= 0]
        if not starts:
            return found
        start, cmd = min(starts)
        i = start + len(cmd)
        if i < len(text) and text[i] == "{":
            close = _braced(text, i)
            if close is None:
                return found  # an unclosed box (truncated output) ends the search
            found.append((start, close + 1, text[i + 1: close].strip()))
            pos = close + 1
        elif i < len(text) and text[i] == " ":  # `\boxed 5`: one token
            m = _BOX_TOKEN.match(text, i)  # not `text[i:]`: a copy of the rest per box is quadratic
            if m:
                found.append((start, m.end(), m.group(1).strip()))
            pos = i + 1
        else:
            pos = i  # `\boxedx` or a macro definition: not a box
    return found


_BOX_TOKEN = re.compile(r"\s+([^\s$]+)")
_WORDS_THEN_MATH = re.compile(r"[a-zA-Z]{3}")  # searched before the last `$` (`[a-zA-Z]{3,}[^$]*\$` was quadratic)
MAX_JOINER_CHARS = 200  # longer text between two boxes never joins them (and is never scanned)


def _joined(between: str) -> bool:
    """Only joiner noise ("or", "and", ",", names such as "and y_2 =") stands between two boxes or spans."""
    return len(between) <= MAX_JOINER_CHARS and _BOX_JOINER_NOISE.sub("", between).casefold() in _BOX_JOINERS


def extract_boxed(text: str) -> list[str] | None:
    """The last box, plus the boxes just before it when only a joiner ("or", "and", ",") separates them."""
    boxes = _boxes(text)
    if not boxes:
        return None
    group = [boxes[-1]]
    for prev in reversed(boxes[:-1]):
        if not _joined(text[prev[1]: group[0][0]]):
            break
        group.insert(0, prev)
    contents = [c for _, _, c in group]
    return contents if any(contents) else None


def extract_answer_tag(text: str) -> list[str] | None:
    """Content of the last `<answer>...</answer>`, reduced to its box or math span when it has one."""
    end = text.rfind("</answer>")
    if end < 0:
        return None
    start = text.rfind("<answer>", 0, end)
    if start < 0:
        return None
    content = text[start + len("<answer>"): end].strip()
    if not content:
        return None
    return (extract_boxed(content) or _whole_span(content) or extract_answer_is(content)
            or (extract_last_latex(content) if _WORDS_THEN_MATH.search(content, 0, max(content.rfind("$"), 0)) else None)
            or _strip_dollars(content))


def extract_minerva(text: str) -> list[str] | None:
    """Minerva's "Final Answer: The final answer is X. I hope it is correct." (the last such line)."""
    matches = _minerva_matches(text)
    if not matches:
        return None
    answer = matches[-1].group(1).strip()
    answer = answer[:-1].strip() if answer.endswith(".") else answer  # "... is 5. I hope": the sentence's stop
    answer = re.sub(r'^(?:\\?["\'])+|(?:\\?["\'])+$', "", answer).strip()  # quoted answers
    return _strip_dollars(answer) if answer else None


def extract_gsm8k(text: str) -> list[str] | None:
    """GSM8K's `#### X` (the last one)."""
    matches = _GSM8K.findall(text)
    if not matches:
        return None
    answer = matches[-1].strip()
    return _strip_dollars(answer) if answer else None


def extract_answer_is(text: str) -> list[str] | None:
    """ "The answer is X" / "Answer: X" (the last one); X ends at a line break or a sentence's full stop."""
    matches = list(_ANSWER_IS.finditer(text))
    for m in reversed(matches):
        answer = m.group(1).strip().rstrip(".").strip()
        if answer:
            return _whole_span(answer) or _strip_dollars(answer)
    return None


def extract_last_latex(text: str) -> list[str] | None:
    """The last `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` span."""
    spans = latex_spans(text)
    if not spans:
        return None
    _, last_end, content = spans[-1]
    content = content.strip()
    boundary = _SENTENCE_END.search(text, last_end)  # a number in the span's own sentence is only a remark
    after = last_end if content.endswith(".") else boundary.end() if boundary else None  # `$$...\frac{2}{1}.$$`
    tail = ([m for m in _BARE_NUMBER.finditer(text, after) if not _LATER_NOISE.match(text, m.start())]
            if after is not None else [])
    if tail:  # "... $d = \frac{90}{n}$ ... Therefore, there are 12 distinct sequences.": the closing number answers
        number = tail[-1]
        starts = [m.end() for m in _SENTENCE_END.finditer(text, after, number.start())]
        sentence = text[starts[-1] if starts else after: number.start()]
        if _CONCLUSION.search(sentence) and not _HEDGE.search(sentence):  # "We used 2 methods." is a remark
            return [number.group(0).strip()]
    return [content] if content else None


def extract_last_number(text: str) -> list[str] | None:
    """The last number in the text (`-1,234.5`, `3/4`, `45%`); one in scientific notation (`1.2e5`) is skipped."""
    last = None
    for m in _LAST_NUMBER.finditer(text):
        last = m
    return [last.group(0).strip()] if last else None


_BARE_NUMBER = re.compile(
    r"(?<![A-Za-z\d.,])(?<!\d[eE][-+])[-\u2212]?(?>\\frac\{\d+\}\{\d+\}|(?:\d{1,3}(?:(?:,\d{3})+| (?=\d{3}(?!\d))\d{3}(?: \d{3})*)|\d+)"
    r"(?:[.,]\d+)?(?:/\d+)?|\.\d+)" + _NO_EXPONENT + r"(?:\s*(?:%|\\%|percent\b|pct\b))?"
)
_CONCLUSION = re.compile(r"\b(?:therefore|thus|hence|so|final|answer|total|altogether|in all)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
_LATER_NOISE = re.compile(r"\d+\s*(?:\)|\]|:)")  # list markers and references ("1)", "[2]", "3:")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")  # a run of 3+ letters that is no LaTeX command


def extract_bare(text: str) -> list[str] | None:
    """The lenient fallback for text with no answer marker and no math span.

    A short text with no words is itself the answer (`-5`, `\\frac{10}{9}`, `28 %`, `1,000.99$`);
    otherwise the last number, fraction or percentage written (`... which is 1,000.99€`), never one
    glued to a word (`AZYUK2A` has none). math-verify falls back the same way to the last
    expression of the text (its `ExprExtractionConfig`)."""
    if _STRAY_DELIMITER.search(text):
        return None  # a math delimiter that opened no valid span is broken math, not a bare answer
    stripped = text.strip().rstrip(".").strip()
    if stripped and len(stripped) <= 100 and not _WORD.search(stripped) and "\n" not in stripped:
        return [stripped]
    last = None
    for m in _BARE_NUMBER.finditer(text):
        last = m
    return [last.group(0).strip()] if last else None


_HEDGE = re.compile(  # words that make a number in a sentence something other than the answer
    r"\b(?:not|no|never|cannot|can't|isn't|aren't|exceeds?|more|less|fewer|least|most|greater|smaller|between"
    r"|about|approximately|roughly|around|nearly|almost|unless|except)\b", re.IGNORECASE)
_JOINER_WORDS = re.compile(r"\b(?:and|or)\b", re.IGNORECASE)
_SENTENCE_VERB = re.compile(r"\s(?:is|are|equals|was|be)\s+(?:\w+\s+)??(?=[-$\\\d(\[.])|\s=\s", re.IGNORECASE)


def _answer_of_sentence(answer: str) -> str:
    """ "The volume of $ABCD$ is 120" -> "120": a sentence's answer follows its last "is"/"=" (when math follows)."""
    if not _WORD.search(_JOINER_WORDS.sub("", _without_spans(answer))):
        return answer  # "3 and 5" is a list, not a sentence
    if _HEDGE.search(answer):
        return answer  # "not 5", "more than 4": left whole, so it never parses as 5 or 4
    last = None
    for m in _SENTENCE_VERB.finditer(answer):
        last = m
    if last:
        return answer[last.end():].strip()
    numbers = [] if latex_spans(answer) else list(_BARE_NUMBER.finditer(answer))
    return numbers[0].group(0).strip() if len(numbers) == 1 else answer  # "Jane started growing Sphere 3 hours ago"


def _strip_dollars(answer: str) -> list[str]:
    answer = _answer_of_sentence(answer.strip())
    whole = _whole_span(answer)
    return whole or [answer.strip().strip("$").strip()]


def _whole_span(content: str) -> list[str] | None:
    """When `content` is exactly one math span (`$...$`, `\\(...\\)`), its inside."""
    m = _LATEX_SPANS.fullmatch(content.strip().rstrip("."))
    if m:
        inner = next(g for g in m.groups() if g is not None).strip()
        if re.search(r"(?<!\\)\$", inner):
            return None  # `$21,16$ or $11$` is two spans, not one
        return [inner] if inner else None
    return None


EXTRACTORS: dict[str, Callable[[str], list[str] | None]] = {
    "answer_tag": extract_answer_tag,
    "boxed": extract_boxed,
    "minerva": extract_minerva,
    "gsm8k": extract_gsm8k,
    "answer_is": extract_answer_is,
    "latex": extract_last_latex,
    "last_number": extract_last_number,
    "bare": extract_bare,
}
DEFAULT_ORDER = ("answer_tag", "boxed", "minerva", "gsm8k", "answer_is", "latex")


def extract(text: str, order: Sequence[str] = DEFAULT_ORDER) -> tuple[list[str], str] | None:
    """(answer strings, extractor name) from the first extractor in `order` that finds one; else None."""
    region = answer_region(text)
    for name in order:
        found = EXTRACTORS[name](region)
        if found and name == "boxed" and "minerva" in order:
            later = _minerva_after_last_box(region)
            if later:  # "... \boxed{255} ... Final Answer: The final answer is $10,455$.": the closing line counts
                return later, "minerva"
        if found:
            return found, name
    return None


def _minerva_after_last_box(text: str) -> list[str] | None:
    boxes = _boxes(text)
    matches = _minerva_matches(text)
    if boxes and matches and matches[-1].start() > boxes[-1][1]:
        return extract_minerva(text[boxes[-1][1]:])
    return None


def extract_gold(gold: str) -> str:
    """A gold answer as datasets store it: bare, `$...$`, `\\boxed{...}`, or a GSM8K solution's `#### X`."""
    gold = gold.strip()
    if "\\boxed" in gold or "\\fbox" in gold:
        boxes = _boxes(gold)
        near = len(boxes) > 1 and all(len(gold[a[1]: b[0]].strip()) <= 12 for a, b in pairwise(boxes))
        if near:  # `\boxed{1} papers and \boxed{2} bins`: boxes a few characters apart form one gold (math-verify's
            return ", ".join(dict.fromkeys(c for _, _, c in boxes if c))  # proximity rule, for gold answers only)
        found = extract_boxed(gold)
        if found:
            return ", ".join(found)
    if "####" in gold:
        found = extract_gsm8k(gold)
        if found:
            return found[0]
    whole = _whole_span(gold)
    if whole:
        return whole[0]
    spans = latex_spans(gold)
    if len(spans) > 1 and all(_joined(gold[a[1]: b[0]]) for a, b in pairwise(spans)) and not gold[: spans[0][0]].strip():
        return ", ".join(content.strip() for _, _, content in spans)  # `$21,16$ or $11$`
    if len(gold) > 80 and _WORD.search(gold):  # a worked solution stored as the gold: its stated final answer
        found = extract(gold, ("minerva", "answer_is"))
        if found:
            return ", ".join(found[0])
    return gold
