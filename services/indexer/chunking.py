"""Structure-aware splitting of Markdown or plain text into overlapping chunks.

Each chunk ends at the most meaningful boundary in a window around the target
size, preferring (best first): before a heading line, at a paragraph start
(after a blank line), at a code-fence/table boundary, at a sentence end, at a
line break, at a word boundary, and only then a hard cut. The window is
``[start + min_chars, start + max_chars]``; within the best tier the candidate
closest to ``start + target_chars`` wins, so sizes stay near the target.

Invariants (property-tested): no chunk is longer than ``max_chars``; every
non-whitespace character of the input lies in some chunk; consecutive chunks
overlap by at most ``overlap_chars``; a fenced code block or a table that fits
in ``max_chars`` is never cut (larger ones are split at line breaks); spans are
exact slices of the input, so ``text == source[start:end]``.

Decisions worth knowing:
- Only ATX headings (``# Title``) are recognised; ``#`` lines inside code
  fences are code. Setext headings (underlined) are treated as paragraphs.
- No overlap is carried across a heading: a chunk that reaches a heading is
  followed by one that starts at it. Overlap is shortened (or dropped) when a
  fitting block begins just after the cut, so the next chunk can hold the
  block whole instead of stopping short before it.
- Short tail: if what would remain after a cut is shorter than
  ``min_tail_chars`` and the whole rest fits in ``max_chars``, the rest is
  merged into the current chunk (unless the cut is before a heading: a short
  final section keeps its own chunk and heading path). A rest no longer than
  ``target_chars`` always becomes a single chunk.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from services.common.errors import ConfigError


@dataclass(frozen=True)
class ChunkingParams:
    target_chars: int = 800
    overlap_chars: int = 200
    max_slack_chars: int = 200
    version: str = "struct-v1"

    def __post_init__(self) -> None:
        if self.target_chars < 100:
            raise ConfigError(f"chunking target_chars={self.target_chars} must be >= 100")
        if not 0 <= self.overlap_chars < self.target_chars / 2:
            raise ConfigError(
                f"chunking overlap_chars={self.overlap_chars} must be >= 0 and < "
                f"target_chars/2 ({self.target_chars / 2:g})"
            )
        if self.max_slack_chars < 0:
            raise ConfigError(f"chunking max_slack_chars={self.max_slack_chars} must be >= 0")

    @property
    def max_chars(self) -> int:
        """The hard maximum no chunk ever exceeds."""
        return self.target_chars + self.max_slack_chars

    @property
    def min_chars(self) -> int:
        # Above overlap_chars (validated), so every cut moves past the previous one.
        return self.target_chars // 2

    @property
    def min_tail_chars(self) -> int:
        return self.target_chars // 4

    def as_dict(self) -> dict[str, int | str]:
        return {**asdict(self), "max_chars": self.max_chars}


@dataclass(frozen=True)
class TextSpan:
    text: str
    heading_path: str
    start: int
    end: int


@dataclass(frozen=True)
class Heading:
    offset: int  # start of the heading line
    level: int
    title: str


_ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*\r?$")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?$")
# A sentence ends at ./!/? (plus closing quotes/brackets) followed by space and
# something that is not a lower-case letter ("e.g. the" is not an end), or at
# CJK full stops, which need no space. The regex finds candidates cheaply;
# `_is_sentence_end` applies the context rule.
_SENTENCE_PUNCT = re.compile(r"""[.!?…。！？]["'”’)\]」』]*""")
_CJK_STOPS = "。！？"
_WHITESPACE = re.compile(r"\s+")
_NON_SPACE = re.compile(r"\S")


@dataclass(frozen=True)
class _Block:
    """A fenced code block or a table: `[start, end)` covers whole lines."""

    start: int
    end: int


class _Layout:
    """The line structure of one text: headings, paragraphs, fences, tables."""

    def __init__(self, text: str, max_chars: int) -> None:
        self.text = text
        self.line_starts: list[int] = []
        self.headings: list[Heading] = []
        self.paragraph_starts: list[int] = []
        self.blocks: list[_Block] = []
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
        self.content_end = len(text.rstrip())

    def _scan(self) -> None:
        offset, table_start, after_blank = 0, -1, False
        fence: tuple[str, int] | None = None  # (opening marker, block start)
        for line in self.text.split("\n"):
            start, offset = offset, offset + len(line) + 1
            self.line_starts.append(start)
            if fence is not None:
                if _closes_fence(fence[0], line):
                    self.blocks.append(_Block(fence[1], min(offset, len(self.text))))
                    fence = None
                continue
            is_row = line.lstrip().startswith("|")
            if table_start >= 0 and not is_row:
                self.blocks.append(_Block(table_start, start))
                table_start = -1
            if not line.strip():
                after_blank = True
                continue
            if after_blank:
                self.paragraph_starts.append(start)
            after_blank = False
            if opening := _FENCE_OPEN.match(line):
                fence = (opening.group(1), start)
            elif is_row:
                table_start = start if table_start < 0 else table_start
            elif heading := _ATX_HEADING.match(line):
                title = (heading.group(2) or "").strip()
                self.headings.append(Heading(start, len(heading.group(1)), title))
        # An unclosed fence runs to the end of the text, as in CommonMark.
        last_open = fence[1] if fence is not None else table_start
        if last_open >= 0:
            self.blocks.append(_Block(last_open, len(self.text)))

    def heading_path_at(self, pos: int) -> str:
        index = bisect_right(self.heading_starts, pos) - 1
        return self.heading_paths[index] if index >= 0 else ""

    def inside_fitting_block(self, pos: int) -> bool:
        index = bisect_right(self.fit_starts, pos) - 1
        return index >= 0 and self.fit_starts[index] < pos < self.fit_ends[index]

    def inside_any_block(self, pos: int) -> bool:
        index = bisect_right(self._block_starts, pos) - 1
        return index >= 0 and self._block_starts[index] < pos < self.blocks[index].end

    def fitting_block_containing(self, pos: int) -> int:
        """Start of the fitting block strictly containing `pos` (caller checked)."""
        return self.fit_starts[bisect_right(self.fit_starts, pos) - 1]

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


def _is_sentence_end(text: str, punct: re.Match[str]) -> bool:
    if text[punct.start()] in _CJK_STOPS:
        return True
    after = punct.end()
    if after >= len(text) or not text[after].isspace():
        return False
    following = _NON_SPACE.search(text, after)
    return following is not None and not "a" <= following.group() <= "z"


def _in_range(sorted_positions: list[int], lo: int, hi: int) -> list[int]:
    """Positions p with lo <= p <= hi."""
    return sorted_positions[bisect_left(sorted_positions, lo) : bisect_right(sorted_positions, hi)]


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
        paths.append(" > ".join(h.title for h in stack if h.title))
    return paths


def iter_headings(text: str) -> Iterator[Heading]:
    """The ATX headings of a Markdown text, skipping `#` lines inside code fences."""
    yield from _Layout(text, max_chars=len(text)).headings


class Chunker:
    """Splits Markdown or plain text into `TextSpan`s (see the module docstring)."""

    def __init__(self, params: ChunkingParams = ChunkingParams()) -> None:
        self._params = params

    @property
    def params(self) -> ChunkingParams:
        return self._params

    def split(self, text: str) -> list[TextSpan]:
        layout = _Layout(text, self._params.max_chars)
        spans: list[TextSpan] = []
        start = 0
        while start < layout.content_end:
            end = self._choose_end(layout, start)
            span = _stripped_span(layout, start, end)
            if span is not None:
                spans.append(span)
            if end >= layout.content_end:
                break
            start = self._choose_next_start(layout, start, end)
        return spans

    def _choose_end(self, layout: _Layout, start: int) -> int:
        p, limit = self._params, layout.content_end
        if limit - start <= p.target_chars:
            return limit
        lo, hi = start + p.min_chars, min(start + p.max_chars, limit)
        end = _best_end(layout, lo, hi, start + p.target_chars)
        if end is None:  # the hard cut would land inside a block that fits: cut before it
            end = hi if not layout.inside_fitting_block(hi) else layout.fitting_block_containing(hi)
        short_tail = limit - end < p.min_tail_chars and limit - start <= p.max_chars
        if short_tail and not _in_range(layout.heading_starts, end, end):
            return limit
        return end

    def _choose_next_start(self, layout: _Layout, start: int, end: int) -> int:
        """Where the next chunk begins: up to overlap_chars before `end`, at a boundary."""
        lo = max(end - self._params.overlap_chars, start + 1, self._fit_guard(layout, end))
        headings_before = _in_range(layout.heading_starts, lo, end)
        if headings_before:  # never carry text from the previous section
            lo = headings_before[-1]
        for candidates in _start_tiers(layout, lo, end):
            allowed = [
                c for c in candidates if lo <= c < end and not layout.inside_fitting_block(c)
            ]
            if allowed:
                return min(allowed)
        return end

    def _fit_guard(self, layout: _Layout, end: int) -> int:
        """Lowest next start that still lets a fitting block just after `end` fit whole.

        Without it the next chunk could be forced to stop right before that block
        and consist of little more than the overlap.
        """
        first = bisect_left(layout.fit_starts, end)
        last = bisect_right(layout.fit_starts, end + self._params.min_chars)
        ends = layout.fit_ends[first:last]
        return max(ends) - self._params.max_chars if ends else 0


def _best_end(layout: _Layout, lo: int, hi: int, target: int) -> int | None:
    """The best cut in [lo, hi]: highest tier first, then closest to the target."""
    tiers: tuple[Callable[[], list[int]], ...] = (
        lambda: _in_range(layout.heading_starts, lo, hi),
        lambda: _in_range(layout.paragraph_starts, lo, hi),
        lambda: _in_range(layout.block_bounds, lo, hi),
        lambda: layout.sentence_ends(lo, hi),
        lambda: _in_range(layout.line_starts, lo, hi),
        lambda: layout.word_bounds(lo, hi, at_word_start=False),
        lambda: [hi],
    )
    for tier in tiers:
        allowed = [c for c in tier() if not layout.inside_fitting_block(c)]
        if allowed:
            return min(allowed, key=lambda c: (abs(c - target), -c))
    return None


def _start_tiers(layout: _Layout, lo: int, end: int) -> Iterator[list[int]]:
    """Candidate starts for an overlapping chunk, best kind first."""
    yield _in_range(layout.structural, lo, end)
    yield layout.sentence_ends(lo, end)
    yield _in_range(layout.line_starts, lo, end)
    yield layout.word_bounds(lo, end, at_word_start=True)


def _stripped_span(layout: _Layout, start: int, end: int) -> TextSpan | None:
    """The span [start, end) without surrounding whitespace, or None if blank."""
    text = layout.text
    first = _NON_SPACE.search(text, start, end)
    if first is None:
        return None
    stop = end
    while text[stop - 1].isspace():
        stop -= 1
    begin = first.start()
    return TextSpan(text[begin:stop], layout.heading_path_at(begin), begin, stop)
