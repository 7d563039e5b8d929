"""The chunker's guarantees as one check, shared by the property tests
(tests/indexer/test_chunking.py) and the real-corpus suite, so both hold the
chunker to exactly the same promises (services/indexer/chunking.py)."""

from __future__ import annotations

import itertools
import math

from services.indexer.chunk_layout import Layout
from services.indexer.chunking import ChunkingParams, TextSpan, TextSyntax


def step_bound(text: str, params: ChunkingParams) -> int:
    """The most cuts a text may take: on average every cut moves the end by
    at least (min_chars - overlap_chars) / 2, so the work is linear in the
    text's length. Strict progress (every end after the previous end) is by
    construction; this tighter average is what the tests hold it to."""
    advance = max(1, (params.min_chars - params.overlap_chars) // 2)
    return 2 + math.ceil(len(text) / advance)


def assert_chunk_invariants(
    text: str,
    spans: list[TextSpan],
    params: ChunkingParams,
    syntax: TextSyntax = TextSyntax.MARKDOWN,
) -> None:
    """Raise AssertionError naming the first broken guarantee (`syntax`: the
    one `spans` were cut with)."""
    layout = Layout(text, params.max_chars, syntax)
    covered = bytearray(len(text))
    for span in spans:
        _assert_span_shape(text, span, params)
        covered[span.start : span.end] = b"\x01" * (span.end - span.start)
        _assert_not_only_headings(layout, span, params)
        _assert_no_heading_left_behind(layout, span, params)
        _assert_table_header_repeated(layout, span, params)
    uncovered = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not uncovered, f"characters outside every chunk at {uncovered[:5]}"
    for prev, nxt in itertools.pairwise(spans):
        assert nxt.start > prev.start, f"chunk at {nxt.start} does not start after {prev.start}"
        assert nxt.end > prev.end, f"chunk [{nxt.start}, {nxt.end}) is inside the one before"
        assert prev.end - nxt.start <= params.overlap_chars, "overlap above overlap_chars"


def _assert_span_shape(text: str, span: TextSpan, params: ChunkingParams) -> None:
    assert span.end > span.start, f"empty chunk at {span.start}"
    assert span.text == span.header + text[span.start : span.end]
    assert span.text and span.text == span.text.strip()
    assert len(span.text) <= params.max_chars, f"chunk of {len(span.text)} chars"


def _assert_not_only_headings(layout: Layout, span: TextSpan, params: ChunkingParams) -> None:
    """A chunk of headings alone is allowed only where nothing but headings
    follows it, or where the headings run longer than the smallest window."""
    if not _only_headings(layout, span):
        return
    if layout.only_headings_from(span.start):
        return
    last = max(i for i, h in enumerate(layout.headings) if h.offset < span.end)
    assert layout.heading_content[last] - span.start >= params.min_chars, (
        f"chunk [{span.start}, {span.end}) is only headings: {span.text[:60]!r}"
    )


def _assert_no_heading_left_behind(layout: Layout, span: TextSpan, params: ChunkingParams) -> None:
    """A chunk does not end with a heading whose content only the next chunk has."""
    if span.end >= layout.content_end or not layout.cuts_off_a_heading(span.end):
        return
    if _only_headings(layout, span):
        return  # judged by _assert_not_only_headings
    run = layout.heading_run_start(span.end)
    content = layout.heading_content[layout.heading_starts.index(run)]
    assert content - run >= params.min_chars, (
        f"chunk [{span.start}, {span.end}) ends with a heading that belongs to the next chunk"
    )


def _assert_table_header_repeated(layout: Layout, span: TextSpan, params: ChunkingParams) -> None:
    """A chunk that starts inside a split table carries its header rows again."""
    header = layout.table_header_before(span.start)
    if header and len(header) <= params.max_header_chars:
        assert span.header == header, f"chunk at {span.start} lost its table's header"


def _only_headings(layout: Layout, span: TextSpan) -> bool:
    heading_lines = layout.heading_lines  # an underlined title's lines all count
    offset = span.start
    for line in layout.text[span.start : span.end].split("\n"):
        line_start = layout.text.rfind("\n", 0, offset + 1) + 1 if offset else 0
        if line.strip() and line_start not in heading_lines:
            return False
        offset += len(line) + 1
    return True
