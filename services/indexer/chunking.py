"""Structure-aware splitting of Markdown or plain text into overlapping chunks.

Each chunk ends at the most meaningful boundary in a window around the target
size, preferring (best first): before a heading line, at a paragraph start
(after a blank line), at a code-fence/table boundary, at a sentence end, at a
line break, at a word boundary, and only then a hard cut. The window is
``[start + min_chars, start + max_chars]``; within the best tier the candidate
closest to ``start + target_chars`` wins, so sizes stay near the target.

Guarantees (property-tested on generated Markdown, and checked on real
third-party documentation by tests/indexer/corpus):
- progress: each chunk ends after it starts and after the previous chunk's
  end, and starts after the previous chunk's start, so no chunk is contained
  in the one before it and the loop ends after at most one step per chunk;
- no chunk is longer than ``max_chars``; every non-whitespace character of
  the input lies in some chunk;
- no chunk is only headings: a cut never falls between a heading and the
  first line of its content (unless the headings alone exceed the window, or
  the text ends with headings that do not fit beside the chunk before them);
- a fenced code block or a table that fits in ``max_chars`` is never cut
  (larger ones are split at line breaks), and a chunk that starts inside a
  split table begins with the table's header rows again (when they are at
  most a quarter of ``max_chars``);
- a chunk's text is ``header + source[start:end]`` (``header`` empty except
  for a repeated table header), without surrounding whitespace.

Decisions worth knowing:
- Headings are ATX (``# Title``) in every body, and titles written over two
  or three lines by the body's syntax (`heading_syntax`): Markdown's setext
  headings; reST and AsciiDoc titles in plain text. ``#`` lines inside code
  fences are code.
- No overlap is carried across a heading: a chunk that reaches a heading is
  followed by one that starts at it. Overlap is shortened (or dropped) when a
  fitting block begins just after the cut, so the next chunk can hold the
  block whole instead of stopping short before it.
- Short tail: if what would remain after a cut is shorter than
  ``min_tail_chars`` (or only headings) and the whole rest fits in
  ``max_chars``, the rest is merged into the current chunk (unless the cut is
  before a heading with content: a short final section keeps its own chunk
  and heading path). A rest no longer than ``target_chars`` is one chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from services.core.errors import ConfigError
from services.indexer.chunk_layout import Heading, Layout, in_range
from services.indexer.heading_syntax import TextSyntax
from services.indexer.work_budget import WorkMeter

__all__ = ["Chunker", "ChunkingParams", "Heading", "TextSpan", "TextSyntax", "iter_headings"]

# struct-v2: ends always move forward (struct-v1 could loop forever on a text
# ending with a block between target and maximum), headings travel with their
# content, a split table repeats its header.
# struct-v3: underlined titles are headings (setext in Markdown; reST and
# AsciiDoc in plain text). The version is part of every document's content
# hash, so the next run re-plans each document; only chunks whose text or
# heading path changed are embedded again.
# struct-v4: a chunk that opens with its own heading is embedded under its
# parents' titles (services.core.embedded_text); its chunk hash says so
# (identity.chunk_hash), so the re-plan embeds exactly those chunks again.
CHUNKER_VERSION = "struct-v4"


@dataclass(frozen=True)
class ChunkingParams:
    target_chars: int = 800
    overlap_chars: int = 200
    max_slack_chars: int = 200
    version: str = CHUNKER_VERSION

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
        return self.target_chars // 2

    @property
    def min_tail_chars(self) -> int:
        return self.target_chars // 4

    @property
    def max_header_chars(self) -> int:
        """The longest table header repeated in a chunk that starts mid-table."""
        return self.max_chars // 4

    def as_dict(self) -> dict[str, int | str]:
        return {**asdict(self), "max_chars": self.max_chars}


@dataclass(frozen=True)
class TextSpan:
    """One chunk: `text` is `header + source[start:end]`, stripped."""

    text: str
    heading_path: str
    start: int
    end: int
    header: str = ""  # a split table's header rows, repeated; else ""


def iter_headings(text: str, syntax: TextSyntax = TextSyntax.MARKDOWN) -> Iterator[Heading]:
    """The headings of a text as `syntax` writes them, skipping `#` lines
    inside code fences."""
    yield from Layout(text, len(text), syntax).headings


class Chunker:
    """Splits Markdown or plain text into `TextSpan`s (see the module docstring)."""

    def __init__(self, params: ChunkingParams = ChunkingParams()) -> None:
        self._params = params

    @property
    def params(self) -> ChunkingParams:
        return self._params

    def split(
        self, text: str, meter: WorkMeter | None = None, syntax: TextSyntax = TextSyntax.MARKDOWN
    ) -> list[TextSpan]:
        """The chunks of `text`, its titles read as `syntax` writes them;
        `meter` is ticked once per cut (see work_budget)."""
        layout = Layout(text, self._params.max_chars, syntax)
        meter = meter if meter is not None else WorkMeter()
        spans: list[TextSpan] = []
        start, prev_end = 0, 0
        while start < layout.content_end:
            meter.tick()
            header = self._repeated_header(layout, start)
            end = self._choose_end(layout, start, prev_end, len(header))
            span = _stripped_span(layout, start, end, header)
            # A chunk whose new part is only whitespace adds nothing.
            if span is not None and (not spans or span.end > spans[-1].end):
                spans.append(span)
            if end >= layout.content_end:
                break
            start, prev_end = self._choose_next_start(layout, start, end), end
        return spans

    def _repeated_header(self, layout: Layout, start: int) -> str:
        header = layout.table_header_before(start)
        return header if len(header) <= self._params.max_header_chars else ""

    def _choose_end(self, layout: Layout, start: int, prev_end: int, header_len: int) -> int:
        """An end in (prev_end, start + room], room = max_chars - header_len."""
        p, limit = self._params, layout.content_end
        room = p.max_chars - header_len
        if limit - start <= p.target_chars - header_len:
            return limit
        hi = min(start + room, limit)
        # Past the first character of content after prev_end, so the chunk
        # adds text the previous one did not have.
        lo = max(start + p.min_chars - header_len, min(layout.next_content(prev_end) + 1, hi))
        target = start + p.target_chars - header_len
        end = _best_end(layout, lo, hi, target)
        if end is None:
            end = self._end_before_block(layout, start, prev_end, hi)
        if end is None:
            end = _forced_end(layout, lo, hi, target)
        return self._with_short_tail(layout, start, end, room)

    def _end_before_block(self, layout: Layout, start: int, prev_end: int, hi: int) -> int | None:
        """Cut before the fitting block that `hi` falls in (before its headings,
        if it has any), if that still moves on."""
        if not layout.inside_fitting_block(hi):
            return None
        cut = layout.fitting_block_containing(hi)
        if layout.cuts_off_a_heading(cut):
            cut = layout.heading_run_start(cut)
        moves_on = cut > max(prev_end, start) and layout.has_content(prev_end, cut)
        return cut if moves_on else None

    def _with_short_tail(self, layout: Layout, start: int, end: int, room: int) -> int:
        p, limit = self._params, layout.content_end
        if end >= limit or limit - start > room:
            return end
        short = limit - end < p.min_tail_chars and not in_range(layout.heading_starts, end, end)
        return limit if short or layout.only_headings_from(end) else end

    def _choose_next_start(self, layout: Layout, start: int, end: int) -> int:
        """Where the next chunk begins: up to overlap_chars before `end`, at a
        boundary, after the previous start's first character of content."""
        must_hold = self._block_to_hold(layout, end)
        lo = max(
            end - self._params.overlap_chars,
            layout.next_content(start) + 1,
            must_hold - self._params.max_chars,
        )
        headings_before = in_range(layout.heading_starts, lo, end)
        if headings_before:  # never carry text from the previous section
            lo = headings_before[-1]
        for candidates in _start_tiers(layout, lo, end):
            allowed = [
                c
                for c in candidates
                if lo <= c < end
                and not layout.inside_fitting_block(c)
                and must_hold - c + len(self._repeated_header(layout, c)) <= self._params.max_chars
            ]
            if allowed:
                return min(allowed)
        # No overlap: past the whitespace after `end`, so the window starts
        # at the next content (a block there gets all of max_chars).
        return layout.next_content(end)

    def _block_to_hold(self, layout: Layout, end: int) -> int:
        """The end of the farthest fitting block starting just after `end`
        (0 if none): the next chunk must start late enough to hold it whole.

        Without this the next chunk could be forced to stop right before that
        block and consist of little more than the overlap.
        """
        first = layout.fit_starts_from(end)
        ends = layout.fit_ends_between(first, end + self._params.min_chars)
        return max(ends) if ends else 0


def _best_end(layout: Layout, lo: int, hi: int, target: int) -> int | None:
    """The best cut in [lo, hi]: highest tier first, then closest to the target;
    never inside a block that fits, never between a heading and its content."""
    tiers: tuple[Callable[[], list[int]], ...] = (
        lambda: in_range(layout.heading_starts, lo, hi),
        lambda: in_range(layout.paragraph_starts, lo, hi),
        lambda: in_range(layout.block_bounds, lo, hi),
        lambda: layout.sentence_ends(lo, hi),
        lambda: in_range(layout.line_starts, lo, hi),
        lambda: layout.word_bounds(lo, hi, at_word_start=False),
        lambda: [hi],
    )
    for tier in tiers:
        allowed = [
            c
            for c in tier()
            if not layout.inside_fitting_block(c) and not layout.cuts_off_a_heading(c)
        ]
        if allowed:
            return _closest(allowed, target)
    return None


def _forced_end(layout: Layout, lo: int, hi: int, target: int) -> int:
    """A cut that splits a block rather than stall: at a line break, a word
    boundary or `hi`, keeping headings with their content if at all possible."""
    tiers = (
        in_range(layout.line_starts, lo, hi),
        layout.word_bounds(lo, hi, at_word_start=False),
    )
    for candidates in tiers:
        allowed = [c for c in candidates if not layout.cuts_off_a_heading(c)]
        if allowed:
            return _closest(allowed, target)
    return hi


def _closest(candidates: list[int], target: int) -> int:
    return min(candidates, key=lambda c: (abs(c - target), -c))


def _start_tiers(layout: Layout, lo: int, end: int) -> Iterator[list[int]]:
    """Candidate starts for an overlapping chunk, best kind first."""
    yield in_range(layout.structural, lo, end)
    yield layout.sentence_ends(lo, end)
    yield in_range(layout.line_starts, lo, end)
    yield layout.word_bounds(lo, end, at_word_start=True)


def _stripped_span(layout: Layout, start: int, end: int, header: str) -> TextSpan | None:
    """The span [start, end) without surrounding whitespace, or None if blank."""
    begin = layout.next_content(start)
    if begin >= end:
        return None
    stop = end
    while layout.text[stop - 1].isspace():
        stop -= 1
    body = layout.text[begin:stop]
    return TextSpan(header + body, layout.heading_path_at(begin), begin, stop, header)
