"""Section titles written over more than one line, by the syntax of the body.

The chunker reads ATX headings (`## Title`) in every body; HTML reaches it as
Markdown that uses them. Real documentation also underlines its titles, and a
title read as a paragraph gives its chunks no heading path and lets a cut
ignore where a section starts:

- Markdown's setext headings (CommonMark): a one-line paragraph over a line of
  `=` (level 1) or of `-` (level 2).
- reStructuredText and AsciiDoc sources, which packages ship as text (Debian's
  python3-doc `_sources/*.rst.txt`, git-doc's `*.txt`): a title over a line
  of one punctuation character (in reST also under one: an overline), that
  line at least as wide as the title (AsciiDoc allows two columns less). reST
  has no fixed levels: each style (character, overlined or not) takes the
  next level the first time it appears. AsciiDoc's one-line titles
  (`== Title`) take the level of their `=` count.

On the corpus suite's pages (tests/indexer/corpus) that is 3,510 underlined
titles in git-doc's 247 text pages and 3,511 in python3-doc's 497 reST
sources, none of which the chunker saw before struct-v3.

A title is only taken where a block starts (the text's first line, after a
blank line or after another heading), so a wrapped paragraph's last line over
a rule of dashes stays text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class TextSyntax(StrEnum):
    """How a body marks its titles: Markdown (ATX and setext) or plain text
    (ATX, reST and AsciiDoc titles)."""

    MARKDOWN = "markdown"
    PLAIN = "plain"


@dataclass(frozen=True)
class SpannedTitle:
    level: int
    title: str
    lines: int  # lines the title takes, its own included (1-3)


# Where a title's opening run ends (`#{1,6}` or `={1,6}`, then a space or tab, or
# for ATX the line's end). The rest of the line is read by `_closed_title`, not
# by a pattern: a lazy title before an optional closing run and trailing blanks
# backtracks quadratically over a long run of blanks (a 20 KB line took 11 s,
# holding the interpreter lock, so every service of an embedded stack stalled).
_ATX_OPEN = re.compile(r" {0,3}(#{1,6})(?=[ \t]|\r?$)")
_ASCIIDOC_OPEN = re.compile(r"(={1,6})[ \t]+(?=\S)")
_SETEXT_UNDERLINE = re.compile(r" {0,3}(=+|-{2,})[ \t]*")
# Not a title line in Markdown: a list item, a quote, a table row, a fence, code.
_MARKDOWN_NOT_TITLE = re.compile(
    r" {4}|\t| {0,3}(?:(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)|[>|]|`{3}|~{3})"
)
# One punctuation character repeated: a reST / AsciiDoc adornment line.
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{2,}[ \t]*")
# A reST role (":mod:`difflib`", ":py:func:`x`"): in a title, its text is what
# a reader sees, and what a heading path and a page title should show. Names
# are bounded (real ones are a word or two) so that a failed match is never
# retried along a long `:a:a:a...` chain from each of its colons.
_REST_ROLE = re.compile(r":[A-Za-z][\w.+-]{0,40}(?::[A-Za-z][\w.+-]{0,40}){0,3}:`([^`]+)`")
MAX_LEVEL = 6
# AsciiDoc lets an underline be up to two columns shorter than its title.
UNDERLINE_SLACK = 2
# AsciiDoc also fences blocks with such lines (`----` listings, `====`
# examples): a one-line block between two fences reads as an overlined
# title, and a word over a fence as an underlined one. So a title is at least
# three columns wide, and an overlined one at least five and no wider than
# its lines (reST's own rule): a line fenced by `----` is never a title.
TITLE_LEAST = 3
OVERLINE_LEAST = 5


def atx_heading(line: str) -> tuple[int, str] | None:
    """An ATX heading's level and title (`## Title ##` -> (2, "Title")), or
    None: up to three spaces, one to six `#`, then a blank or the line's end;
    a closing run of `#` after a blank is not part of the title."""
    opened = _ATX_OPEN.match(line)
    if opened is None or "\n" in line[:-1]:  # one line (its own break aside)
        return None
    return len(opened.group(1)), _closed_title(line[opened.end() :].lstrip(" \t"), "#")


def _asciidoc_title(line: str) -> tuple[int, str] | None:
    """An AsciiDoc one-line title (`== Title`, optionally `== Title ==`)."""
    opened = _ASCIIDOC_OPEN.match(line)
    if opened is None or "\n" in line:
        return None
    return len(opened.group(1)), _closed_title(line[opened.end() :], "=")


def _closed_title(rest: str, mark: str) -> str:
    """`rest` (a title line after its opening run and blanks) without its
    trailing blanks and closing run of `mark` (only after a blank, and never
    the whole title: `# #` is titled "#"). Linear in the line's length."""
    end = rest[:-1] if rest.endswith("\n") else rest
    end = (end[:-1] if end.endswith("\r") else end).rstrip(" \t")
    unclosed = end.rstrip(mark)
    if unclosed != end and unclosed[-1:] in (" ", "\t") and unclosed.strip(" \t"):
        return unclosed.rstrip(" \t")
    return end


class SpannedTitles:
    """Finds titles of one text that span lines (see the module docstring).
    Holds the order in which reST styles first appeared: one per text."""

    def __init__(self, syntax: TextSyntax) -> None:
        self.syntax = syntax
        self._levels: dict[tuple[str, bool], int] = {}

    def at(self, lines: Sequence[str], index: int) -> SpannedTitle | None:
        """The title starting at `lines[index]` (a line that starts a block,
        outside code), or None. Checked before ATX: in plain text `#####`
        over a title is a reST overline; in Markdown an ATX line is never a
        setext title."""
        if self.syntax is TextSyntax.MARKDOWN:
            return _setext(lines, index)
        return self._plain(lines, index)

    def _plain(self, lines: Sequence[str], index: int) -> SpannedTitle | None:
        line = lines[index]
        one_line = _asciidoc_title(line)
        if one_line is not None:
            return SpannedTitle(one_line[0], one_line[1].strip(), 1)
        over = _ADORNMENT.fullmatch(line)
        if over is not None:  # reST: overline, title, underline of the same character
            title, under = _line(lines, index + 1), _line(lines, index + 2)
            same = under.rstrip() == line.rstrip() and not _ADORNMENT.fullmatch(title)
            if same and _adorns(line, title.strip(), slack=0, least=OVERLINE_LEAST):
                return self._styled(over.group(1), True, title.strip(), 3)
            return None
        underline = _ADORNMENT.fullmatch(_line(lines, index + 1))
        if underline is None or line[:1].isspace() or not _adorns(lines[index + 1], line):
            return None
        return self._styled(underline.group(1), False, line.strip(), 2)

    def _styled(self, char: str, overlined: bool, title: str, lines: int) -> SpannedTitle:
        level = self._levels.setdefault((char, overlined), len(self._levels) + 1)
        return SpannedTitle(min(level, MAX_LEVEL), _REST_ROLE.sub(r"\1", title), lines)


def _setext(lines: Sequence[str], index: int) -> SpannedTitle | None:
    line, under = lines[index], _SETEXT_UNDERLINE.fullmatch(_line(lines, index + 1))
    if under is None or _MARKDOWN_NOT_TITLE.match(line) or _SETEXT_UNDERLINE.fullmatch(line):
        return None
    if atx_heading(line) is not None:  # "# Title" over "===" is an ATX heading and a paragraph
        return None
    return SpannedTitle(1 if under.group(1)[0] == "=" else 2, line.strip(), 2)


def _adorns(
    adornment: str, title: str, slack: int = UNDERLINE_SLACK, least: int = TITLE_LEAST
) -> bool:
    """`adornment` (one character repeated) is about as wide as `title`, a
    title of at least `least` columns."""
    width = _width(title.rstrip())
    return width >= least and len(adornment.rstrip()) >= width - slack


def _width(text: str) -> int:
    """Columns `text` takes: wide (CJK) characters count two, as reST counts them."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _line(lines: Sequence[str], index: int) -> str:
    return lines[index] if index < len(lines) else ""
