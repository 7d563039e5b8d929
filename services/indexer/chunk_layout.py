"""The line structure of one text, as the chunker needs it: headings, paragraph
starts, fenced code blocks and tables, and where a cut may not fall.

Kept apart from `chunking` so that the cutting rules there read as rules; all
lookups here are bisections over sorted offsets (no scan per candidate).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from services.core.embedded_text import HEADING_PATH_SEPARATOR
from services.indexer.heading_syntax import SpannedTitles, TextSyntax, atx_heading


@dataclass(frozen=True)
class Heading:
    offset: int  # start of the heading line
    level: int
    title: str


@dataclass(frozen=True)
class Block:
    """A fenced code block or a table: `[start, end)` from its first line's
    text (after its indentation) to its last line's content (without that
    line's break)."""

    start: int
    end: int
    header_end: int = -1  # tables: end of the header row (and its delimiter row)


_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?$")
# A table's delimiter row (`| --- | :-: |`) is read cell by cell, not by one
# pattern: blanks on either side of optional pipes backtrack quadratically
# (a 20 KB row took 7 s, holding the interpreter lock).
_DELIMITER_CELL = re.compile(r":?-+:?")
# A sentence ends at ./!/? (plus closing quotes/brackets) followed by space and
# something that is not a lower-case letter ("e.g. the" is not an end), or at
# CJK full stops, which need no space. The regex finds candidates cheaply;
# `_is_sentence_end` applies the context rule.
_SENTENCE_PUNCT = re.compile(r"""[.!?…。！？]["'”’)\]」』]*""")
_CJK_STOPS = "。！？"
_WHITESPACE = re.compile(r"\s+")
_NON_SPACE = re.compile(r"\S")


class Layout:
    """Headings, paragraphs, fences and tables of one text, with the lookups
    the chunker's rules ask for."""

    def __init__(self, text: str, max_chars: int, syntax: TextSyntax = TextSyntax.MARKDOWN) -> None:
        self.text = text
        self._titles = SpannedTitles(syntax)
        self.content_end = len(text.rstrip())
        self.line_starts: list[int] = []
        self.headings: list[Heading] = []
        # Where every line of a heading starts (an underlined title has two or three).
        self.heading_lines: set[int] = set()
        self.paragraph_starts: list[int] = []
        self.blocks: list[Block] = []
        # For each heading: where the first line after it that is not a
        # heading begins (its section's content), or content_end if none.
        self.heading_content: list[int] = []
        self.last_content_end = 0  # end of the last line that is neither heading nor blank
        self._scan()
        self.heading_starts = [h.offset for h in self.headings]
        self.heading_paths = _heading_paths(self.headings)
        self.block_bounds = sorted({b.start for b in self.blocks} | {b.end for b in self.blocks})
        self.structural = sorted(
            set(self.heading_starts) | set(self.paragraph_starts) | set(self.block_bounds)
        )
        fitting = [b for b in self.blocks if b.end - b.start <= max_chars]
        self.fit_starts = [b.start for b in fitting]
        self.fit_ends = [b.end for b in fitting]
        self._block_starts = [b.start for b in self.blocks]

    # ------------------------------------------------------------ scanning

    def _scan(self) -> None:
        offset, table_start, after_blank = 0, -1, False
        fence: tuple[str, int] | None = None  # (opening marker, block start)
        pending_headings = 0  # headings still waiting for their content
        title_lines_left = 0  # lines of an underlined title still to pass
        lines = self.text.split("\n")
        for index, line in enumerate(lines):
            start, offset = offset, offset + len(line) + 1
            self.line_starts.append(start)
            if title_lines_left:
                title_lines_left -= 1
                self.heading_lines.add(start)
                continue
            if fence is not None:
                if line.strip():
                    self.last_content_end = start + len(line.rstrip())
                if _closes_fence(fence[0], line):
                    self._add_block(fence[1], offset)
                    fence = None
                continue
            is_row = line.lstrip().startswith("|")
            if table_start >= 0 and not is_row:
                self._add_table(table_start, start)
                table_start = -1
            if not line.strip():
                after_blank = True
                continue
            if after_blank:
                self.paragraph_starts.append(start)
            starts_block = after_blank or index == 0 or pending_headings > 0
            after_blank = False
            heading = None if is_row else self._heading_at(lines, index, start, starts_block)
            if heading is not None:
                self.headings.append(heading[0])
                self.heading_lines.add(start)
                title_lines_left = heading[1] - 1
                pending_headings += 1
                continue
            # Content (and a block) starts at its first line's text:
            # indentation is not part of a block's size (an indented table
            # of max_chars fits), and a cut inside it still cuts a heading off.
            indent = len(line) - len(line.lstrip(" \t"))
            self.heading_content.extend([start + indent] * pending_headings)
            pending_headings = 0
            self.last_content_end = start + len(line.rstrip())
            if opening := _FENCE_OPEN.match(line):
                fence = (opening.group(1), start + indent)
            elif is_row:
                table_start = start + indent if table_start < 0 else table_start
        self.heading_content.extend([self.content_end] * pending_headings)
        # An unclosed fence runs to the end of the text, as in CommonMark.
        if fence is not None:
            self._add_block(fence[1], len(self.text))
        elif table_start >= 0:
            self._add_table(table_start, len(self.text))

    def _heading_at(
        self, lines: list[str], index: int, start: int, may_span: bool
    ) -> tuple[Heading, int] | None:
        """The heading starting at line `index` and how many lines it takes:
        an ATX heading anywhere outside code (the caller skips table rows);
        an underlined title (`heading_syntax`) only where a block starts
        (`may_span`)."""
        line = lines[index]
        if _FENCE_OPEN.match(line):
            return None
        spanned = self._titles.at(lines, index) if may_span else None
        if spanned is not None:
            return Heading(start, spanned.level, spanned.title), spanned.lines
        atx = atx_heading(line)
        if atx is None:
            return None
        return Heading(start, atx[0], atx[1].strip()), 1

    def _add_block(self, start: int, end: int) -> None:
        self.blocks.append(Block(start, self._content_end_in(start, end)))

    def _content_end_in(self, start: int, end: int) -> int:
        """Where the block's content ends: before its last line's break and
        trailing blanks, so that its size is its text's (a table of exactly
        `max_chars` fits) and a block at the very end of the text stops where
        the text's content does (the chunker never cuts past content_end, so
        a block reaching beyond it would look as if every cut split it)."""
        end = min(end, self.content_end)
        while end > start and self.text[end - 1] in " \t\n":
            end -= 1
        return end

    def _add_table(self, start: int, end: int) -> None:
        first_end = self.text.find("\n", start, end)
        header_end = end if first_end < 0 else first_end + 1
        second_end = self.text.find("\n", header_end, end)
        second = self.text[header_end : end if second_end < 0 else second_end]
        if header_end < end and is_table_delimiter(second):
            header_end = end if second_end < 0 else second_end + 1
        content_end = self._content_end_in(start, end)
        self.blocks.append(Block(start, content_end, min(header_end, content_end)))

    # ------------------------------------------------------------ lookups

    def heading_path_at(self, pos: int) -> str:
        index = bisect_right(self.heading_starts, pos) - 1
        return self.heading_paths[index] if index >= 0 else ""

    def inside_fitting_block(self, pos: int) -> bool:
        index = bisect_right(self.fit_starts, pos) - 1
        return index >= 0 and self.fit_starts[index] < pos < self.fit_ends[index]

    def inside_any_block(self, pos: int) -> bool:
        return self._block_at(pos) is not None

    def fitting_block_containing(self, pos: int) -> int:
        """Start of the fitting block strictly containing `pos` (caller checked)."""
        return self.fit_starts[bisect_right(self.fit_starts, pos) - 1]

    def cuts_off_a_heading(self, pos: int) -> bool:
        """Whether a chunk ending at `pos` would end with headings whose
        content lies after `pos`: a heading travels with the block after it."""
        index = bisect_left(self.heading_starts, pos) - 1
        return index >= 0 and pos <= self.heading_content[index] and pos < self.content_end

    def heading_run_start(self, pos: int) -> int:
        """Where the headings that `pos` would cut off begin (caller checked
        `cuts_off_a_heading(pos)`): a cut there keeps them with their content."""
        index = bisect_left(self.heading_starts, pos) - 1
        content = self.heading_content[index]
        while index > 0 and self.heading_content[index - 1] == content:
            index -= 1
        return self.heading_starts[index]

    def only_headings_from(self, pos: int) -> bool:
        """Whether nothing but headings and blank lines lies in [pos, content_end)."""
        return self.last_content_end <= pos

    def table_header_before(self, pos: int) -> str:
        """The header rows of the table that `pos` lies strictly inside, when
        a chunk starting at `pos` would lose them; "" otherwise."""
        block = self._block_at(pos)
        if block is None or block.header_end < 0:
            return ""
        # Stripped: a chunk's text never starts with whitespace (an indented
        # table's rows start with spaces).
        header = self.text[block.start : min(pos, block.header_end)].strip()
        return header + "\n" if header else ""

    def sentence_ends(self, lo: int, hi: int) -> list[int]:
        """Sentence-end offsets in [lo, hi] outside code fences and tables."""
        found = _SENTENCE_PUNCT.finditer(self.text, max(lo - 4, 0), hi)
        return [
            m.end()
            for m in found
            if lo <= m.end()
            and _is_sentence_end(self.text, m)
            and not self.inside_any_block(m.end())
        ]

    def word_bounds(self, lo: int, hi: int, *, at_word_start: bool) -> list[int]:
        found = _WHITESPACE.finditer(self.text, lo, hi)
        return [m.end() if at_word_start else m.start() for m in found]

    def next_content(self, pos: int) -> int:
        """The first non-whitespace offset at or after `pos` (content_end if none)."""
        found = _NON_SPACE.search(self.text, pos, self.content_end)
        return found.start() if found else self.content_end

    def has_content(self, lo: int, hi: int) -> bool:
        return _NON_SPACE.search(self.text, lo, hi) is not None

    def fit_starts_from(self, pos: int) -> int:
        """Index of the first fitting block starting at or after `pos`."""
        return bisect_left(self.fit_starts, pos)

    def fit_ends_between(self, first: int, last_start: int) -> list[int]:
        """Ends of the fitting blocks from index `first` that start by `last_start`."""
        return self.fit_ends[first : bisect_right(self.fit_starts, last_start)]

    def _block_at(self, pos: int) -> Block | None:
        index = bisect_right(self._block_starts, pos) - 1
        if index >= 0 and self._block_starts[index] < pos < self.blocks[index].end:
            return self.blocks[index]
        return None


def in_range(sorted_positions: list[int], lo: int, hi: int) -> list[int]:
    """Positions p with lo <= p <= hi."""
    return sorted_positions[bisect_left(sorted_positions, lo) : bisect_right(sorted_positions, hi)]


def _is_sentence_end(text: str, punct: re.Match[str]) -> bool:
    if text[punct.start()] in _CJK_STOPS:
        return True
    after = punct.end()
    if after >= len(text) or not text[after].isspace():
        return False
    following = _NON_SPACE.search(text, after)
    return following is not None and not "a" <= following.group() <= "z"


def _closes_fence(marker: str, line: str) -> bool:
    closing = _FENCE_CLOSE.match(line)
    if closing is None:
        return False
    return closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker)


def _heading_paths(headings: list[Heading]) -> list[str]:
    paths: list[str] = []
    stack: list[Heading] = []
    for heading in headings:
        stack = [h for h in stack if h.level < heading.level] + [heading]
        paths.append(HEADING_PATH_SEPARATOR.join(h.title for h in stack if h.title))
    return paths


def is_table_delimiter(line: str) -> bool:
    """`line` is a table's delimiter row: cells of `-` (`:` at either end for
    alignment) between pipes, outer pipes optional. Linear in its length."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") else row
    return all(_DELIMITER_CELL.fullmatch(cell.strip()) for cell in row.split("|"))
