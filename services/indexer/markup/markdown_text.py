"""Markdown as a reader sees it: the text the Indexer chunks for a Markdown body.

Sites write documentation with markup no reader ever sees: HTML comments
(Node.js's `<!-- YAML changes: ... -->` blocks), link-reference definitions,
HTML tags, badge rows, YAML front matter. Indexed as written, it fills
chunks with words nobody searches for, and a run of definitions at the end
of a page becomes chunks made of nothing else. `clean_markdown` removes that
markup and keeps every character of content:

- YAML front matter at the very start is cut (`front_matter`).
- HTML comments go, single- or multi-line.
- Link-reference definitions and badge lines go; references, inline links
  and images become their text (`markdown_links`, which also says why
  inline links lose their target, and when they keep it).
- HTML tags become their text (`markdown_html`, which also says what counts
  as a tag: `Vec<String>` does not).
- What site generators add to Markdown goes: a heading's `{#anchor}`,
  `::: tip` container fences (their custom title stays), Hugo shortcodes
  (their `text` stays) (`site_syntax`).
- Code is never touched: fenced blocks (also inside list items), indented
  code blocks outside lists and inline code spans stay byte for byte, so a
  comment or a tag inside code survives.
- Blank lines left behind are collapsed (one blank line at most), outside
  code only, and only in a page the cleaning changed: a page without such
  markup keeps its exact body, so its content hash and chunks stay the same.

Two properties hold and are tested: cleaning again changes nothing, and no
character appears that was not in the input (apart from the spaces and line
breaks that stand in for block tags). The first needs a fixpoint: removing
one construct can join text into another (`<<b></b>!-- x -->`), so passes
repeat until one changes nothing, normally after the second pass. They stop
at `MAX_PASSES`: markup nested so that each removal makes the next
(`<!-<!-<!---->-->-->`, `[[[a](u)](u)](u)`) costs a pass a level, and a
24 KB body of it held the Indexer for 9 s (2 MB: hours), past every deadline,
before the cap. What such a body still holds after the last pass is indexed
as text; cleaning it again would remove more, the one case where the first
property does not hold (no real page nests markup sixteen deep).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import chain

from services.indexer.markup.front_matter import front_matter_end
from services.indexer.markup.markdown_html import (
    TAG,
    is_html_tag,
    last_closings,
    reduce_html,
    tag_start,
)
from services.indexer.markup.markdown_links import (
    bracket_starts,
    normalize_label,
    reduce_links,
    take_definitions,
)
from services.indexer.markup.site_syntax import reduce_site_syntax

_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*")
_LIST_ITEM = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
# MkDocs' admonitions (`!!! note "Title"`), collapsible blocks (`??? tip`) and
# content tabs (`=== "pip"`): their body is indented by four spaces and is
# prose (or fenced code), as a list item's continuation is, not indented code.
_INDENTED_CONTAINER = re.compile(r" {0,3}(?:!!!|\?\?\?\+?|===[!+]?)[ \t]+\S")
_BLOCK_COMMENT = re.compile(r" {0,3}<!--")
_COMMENT_OPEN = re.compile(r"(?<!\\)<!--")
_INLINE_START = re.compile(r"<!--|`+")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# Inline code spans and inline comments end within their paragraph; the
# bound also keeps a run of unmatched backticks from costing quadratic time.
_MAX_INLINE_CHARS = 20_000
# Cleaning passes at most (see the module docstring): each is linear in the body.
MAX_PASSES = 16


def clean_markdown(text: str) -> str:
    """The text of a Markdown body as a reader sees it (see the module docstring)."""
    for _ in range(MAX_PASSES):
        cleaned = _clean_once(text)
        if cleaned == text:
            break
        text = cleaned
    return text


@dataclass
class _Segment:
    """Consecutive lines that are all code or all prose."""

    code: bool
    lines: list[str]


def _clean_once(text: str) -> str:
    start = front_matter_end(text)
    segments = _segments(text[start:])
    spans = _CodeSpans(text)
    prose = {i: spans.protect("\n".join(s.lines)) for i, s in enumerate(segments) if not s.code}
    defined: set[str] = set()
    for i, protected in prose.items():  # a definition serves the whole page
        prose[i], labels = take_definitions(protected, spans.label_key)
        defined |= labels
    changed = start > 0
    closed_after = _closed_after(prose)
    for i, protected in prose.items():
        linked = reduce_links(reduce_site_syntax(protected), defined, spans.label_key)
        reduced = reduce_html(linked, closed_after[i])
        cleaned = spans.restore(reduced)
        if cleaned != "\n".join(segments[i].lines):
            segments[i].lines, changed = cleaned.split("\n"), True
    return _joined(segments) if changed else text


def _closed_after(prose: dict[int, str]) -> dict[int, set[str]]:
    """Segment index → the element names closed in the prose segments after it."""
    after: dict[int, set[str]] = {}
    closed: set[str] = set()
    for i in sorted(prose, reverse=True):
        after[i] = set(closed)
        closed |= last_closings(prose[i]).keys()
    return after


def _joined(segments: list[_Segment]) -> str:
    """The segments as one text, prose lines right-trimmed and blank runs collapsed."""
    lines: list[str] = []
    for segment in segments:
        for line in segment.lines:
            if not segment.code:
                line = line.rstrip(" \t")
                if not line and (not lines or not lines[-1]):
                    continue
            lines.append(line)
    return "\n".join(lines)


# ------------------------------------------------------------------ blocks


def _segments(text: str) -> list[_Segment]:
    scanner = _BlockScanner(text)
    segments: list[_Segment] = []
    for line in text.split("\n"):
        code = scanner.is_code(line)
        if segments and segments[-1].code == code:
            segments[-1].lines.append(line)
        else:
            segments.append(_Segment(code, [line]))
    return segments


class _BlockScanner:
    """Tells code lines from prose, line by line, close enough to CommonMark."""

    def __init__(self, text: str) -> None:
        self.last_close = text.rfind("-->")  # a `find` per comment could cost n**2
        self.offset = 0  # of the current line in `text`
        self.fence = ""  # the opening marker while inside a fenced block
        self.in_comment = False  # inside a block-level <!-- ... --> spanning lines
        self.in_list = False
        self.after_blank = True
        self.after_code = False

    def is_code(self, line: str) -> bool:
        offset, self.offset = self.offset, self.offset + len(line) + 1
        if self.fence:
            if _closes_fence(self.fence, line):
                self.fence = ""
            return True
        if self.in_comment:  # fences inside a comment are commented out, not code
            self.in_comment = "-->" not in line
            return False
        blank = not line.strip()
        code = self._indented_code(line, blank) or self._opens_fence(line)
        if not code and not blank:
            self._track_context(line, offset)
        self.after_blank, self.after_code = blank, code
        return code

    def _indented_code(self, line: str, blank: bool) -> bool:
        # Inside a list, indentation means continuation, not code.
        if blank or self.in_list or not (self.after_blank or self.after_code):
            return False
        return _indent(line) >= 4

    def _opens_fence(self, line: str) -> bool:
        opening = _FENCE_OPEN.fullmatch(line)
        if opening is None or (_indent(line) > 3 and not self.in_list):
            return False
        marker, info = opening.groups()
        if marker[0] == "`" and "`" in info:  # ```x``` on one line is inline code
            return False
        self.fence = marker
        return True

    def _track_context(self, line: str, offset: int) -> None:
        if _LIST_ITEM.match(line) or _INDENTED_CONTAINER.match(line):
            self.in_list = True
        elif _indent(line) == 0 and (self.after_blank or _HEADING.match(line)):
            self.in_list = False
        if comment := _BLOCK_COMMENT.match(line):
            # Spans lines only when it is closed at all (else it is literal text).
            opened = offset + comment.end() - 2
            closed_here = "-->" in line[comment.end() - 2 :]
            self.in_comment = not closed_here and self.last_close >= opened


def _indent(line: str) -> int:
    width = 0
    for char in line:
        if char == " ":
            width += 1
        elif char == "\t":
            width += 4 - width % 4
        else:
            break
    return width


def _closes_fence(marker: str, line: str) -> bool:
    closing = _FENCE_CLOSE.fullmatch(line)
    return (
        closing is not None
        and closing.group(1)[0] == marker[0]
        and (len(closing.group(1)) >= len(marker))
    )


# ------------------------------------------------------------------ inline


class _CodeSpans:
    """Inline code spans swapped for placeholders while the prose around them
    is cleaned, and inline comments dropped on the way (a comment and a code
    span are read left to right, so whichever starts first wins, as in
    CommonMark). Placeholders are private-use characters absent from the page."""

    def __init__(self, text: str) -> None:
        candidates = chain(range(0xE000, 0xF900), range(0xF0000, 0xFFFFE))
        free = (chr(c) for c in candidates if chr(c) not in text)
        self._open, self._close = next(free), next(free)
        self._placeholder = re.compile(f"{self._open}(\\d+){self._close}")
        self._spans: list[str] = []
        self._numbers: dict[str, int] = {}

    def protect(self, text: str) -> str:
        out: list[str] = []
        pos, last_close = 0, text.rfind("-->")
        while (token := _INLINE_START.search(text, pos)) is not None:
            start = token.start()
            if _escaped(text, start):  # `\<!--`, `` \` ``: literal
                out.append(text[pos : start + 1])
                pos = start + 1
                continue
            is_comment = token.group() == "<!--"
            if is_comment:
                end = _comment_end(text, start) if last_close > start else -1
            else:
                end = _code_span_end(text, token)
            out.append(text[pos : token.end() if end < 0 else start])
            if end >= 0 and not is_comment:
                out.append(self._hold(text[start:end]))
            pos = token.end() if end < 0 else end
        out.append(text[pos:])
        return "".join(out)

    def restore(self, text: str) -> str:
        text = self._placeholder.sub(lambda m: self._spans[int(m.group(1))], text)
        return text.replace(self._open, "").replace(self._close, "")

    def label_key(self, label: str) -> str:
        """A reference label's key, with its code spans as written."""
        return normalize_label(self.restore(label))

    def _hold(self, span: str) -> str:
        # One placeholder per distinct span text, so `[`a()`]` in a link and
        # in its definition still carry the same label.
        number = self._numbers.setdefault(span, len(self._spans))
        if number == len(self._spans):
            self._spans.append(span)
        return f"{self._open}{number}{self._close}"


def _escaped(text: str, pos: int) -> bool:
    """Whether the character at `pos` follows an odd run of backslashes."""
    run = 0
    while run < pos and text[pos - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _comment_end(text: str, start: int) -> int:
    """End of the comment opening at `start`, or -1 when it is not closed. A
    comment that opens a line is an HTML block and may span paragraphs; one
    inside a paragraph ends within it."""
    line_start = text.rfind("\n", 0, start) + 1
    opens_line = _BLOCK_COMMENT.fullmatch(text, line_start, start + 4) is not None
    limit = len(text) if opens_line else _paragraph_end(text, start)
    end = text.find("-->", start + 2, limit)  # from +2: `<!-->` is a whole comment
    return end + 3 if end >= 0 else -1


def _code_span_end(text: str, opening: re.Match[str]) -> int:
    """End of the code span `opening` starts: the next backtick run of the same
    length in the paragraph, or -1 (then the backticks are literal)."""
    width = len(opening.group())
    for run in _BACKTICKS.finditer(text, opening.end(), _paragraph_end(text, opening.end())):
        if len(run.group()) == width:
            return run.end()
    return -1


def _paragraph_end(text: str, pos: int) -> int:
    limit = min(len(text), pos + _MAX_INLINE_CHARS)
    blank = _BLANK_LINE.search(text, pos, limit)
    return blank.start() if blank else limit


# ------------------------------------------------------------------ escaping


def escape_markup(text: str) -> str:
    """Literal text that `clean_markdown` would take for markup (a tag, a
    comment, a link or a reference definition), escaped with a backslash as
    Markdown escapes it. For text that is not Markdown but becomes part of
    it, such as the text of an HTML page converted by `html_markdown`: a
    page about HTML may well say "the <details> element" in its prose."""
    closings = last_closings(text)
    starts = {tag_start(m) for m in TAG.finditer(text) if is_html_tag(m, closings)}
    starts |= {m.start() for m in _COMMENT_OPEN.finditer(text)}
    starts |= bracket_starts(text)
    if not starts:
        return text
    pieces, last = [], 0
    for start in sorted(starts):
        pieces += [text[last:start], "\\"]
        last = start
    return "".join([*pieces, text[last:]])
