"""Unit and property tests for the structure-aware chunker."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.errors import ConfigError
from services.indexer.chunking import Chunker, ChunkingParams, TextSpan, iter_headings

pytestmark = pytest.mark.unit

SMALL = ChunkingParams(target_chars=100, overlap_chars=30, max_slack_chars=20)
PARAM_SETS = [
    ChunkingParams(),
    SMALL,
    ChunkingParams(target_chars=200, overlap_chars=0, max_slack_chars=0),
    ChunkingParams(target_chars=300, overlap_chars=149, max_slack_chars=50),
]

# ---------------------------------------------------------------- generators

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789éüßøñ中文語Ωж"
_word = st.text(alphabet=_LETTERS, min_size=1, max_size=12)
_sentence = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(_word, min_size=1, max_size=25),
    st.sampled_from([".", "!", "?", "", "。", "..."]),
)
_paragraph = st.lists(
    st.lists(_sentence, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=5
).map("\n".join)
_code_line = st.one_of(
    st.just("# NOTAHEADING comment"),
    st.text(alphabet=_LETTERS + " =()[]{}:;.,#\t", max_size=120),
)
# Free text may hold any character except those that would open fences,
# tables or headings, so the generator knows exactly where those are.
_free_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="`~|#"),
    max_size=400,
)
_long_token = st.text(alphabet="abcdefXYZ0123456789", min_size=1, max_size=3000)


@st.composite
def _blocks(draw: st.DrawFn) -> tuple[str, str, int]:
    """One Markdown block as (kind, text, heading level or 0)."""
    kind = draw(st.sampled_from(["heading", "para", "para", "fence", "table", "long", "free"]))
    if kind == "heading":
        level = draw(st.integers(1, 6))
        return (
            kind,
            "#" * level + " " + " ".join(draw(st.lists(_word, min_size=1, max_size=4))),
            level,
        )
    if kind == "fence":
        marker = draw(st.sampled_from(["```", "~~~", "````"]))
        lines = draw(st.lists(_code_line, max_size=40))
        return kind, "\n".join([marker + draw(st.sampled_from(["", "python"])), *lines, marker]), 0
    if kind == "table":
        rows = draw(st.lists(st.lists(_word, min_size=1, max_size=4), min_size=1, max_size=30))
        return kind, "\n".join("| " + " | ".join(row) + " |" for row in rows), 0
    if kind == "long":
        return kind, draw(_long_token), 0
    if kind == "free":
        return kind, draw(_free_text), 0
    return kind, draw(_paragraph), 0


@dataclass
class _Doc:
    text: str = ""
    atomic: list[tuple[int, int]] = field(default_factory=list)  # fences and tables
    headings: list[tuple[int, int, str]] = field(default_factory=list)  # offset, level, title


@st.composite
def markdown_docs(draw: st.DrawFn) -> _Doc:
    doc = _Doc()
    parts: list[str] = []
    offset = 0
    for kind, text, level in draw(st.lists(_blocks(), max_size=14)):
        if kind in ("fence", "table"):
            doc.atomic.append((offset, offset + len(text)))
        if kind == "heading":
            doc.headings.append((offset, level, text.lstrip("#").strip()))
        parts.append(text)
        offset += len(text) + 2
    doc.text = "\n\n".join(parts)
    return doc


# ---------------------------------------------------------------- helpers


def _expected_heading_path(doc: _Doc, pos: int) -> str:
    stack: list[tuple[int, str]] = []
    for offset, level, title in doc.headings:
        if offset > pos:
            break
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
    return " > ".join(t for _, t in stack)


def _assert_invariants(text: str, spans: list[TextSpan], params: ChunkingParams) -> None:
    covered = bytearray(len(text))
    for span in spans:
        assert span.text == text[span.start : span.end]
        assert span.text and span.text == span.text.strip()
        assert len(span.text) <= params.max_chars
        covered[span.start : span.end] = b"\x01" * (span.end - span.start)
    uncovered = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not uncovered, f"characters outside every chunk at {uncovered[:5]}"
    for prev, nxt in itertools.pairwise(spans):
        assert nxt.start > prev.start and nxt.end > prev.end
        assert prev.end - nxt.start <= params.overlap_chars


# ---------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(doc=markdown_docs(), params=st.sampled_from(PARAM_SETS))
def test_generated_markdown_keeps_every_invariant(doc: _Doc, params: ChunkingParams) -> None:
    spans = Chunker(params).split(doc.text)
    _assert_invariants(doc.text, spans, params)
    assert Chunker(params).split(doc.text) == spans  # deterministic
    for start, end in doc.atomic:
        if end - start < params.max_chars:
            assert any(s.start <= start and end <= s.end for s in spans), (
                f"block [{start}, {end}) was split"
            )
    for span in spans:
        assert span.heading_path == _expected_heading_path(doc, span.start)
        assert "NOTAHEADING" not in span.heading_path
    for prev, nxt in itertools.pairwise(spans):  # no overlap across a heading
        assert not any(nxt.start < offset < prev.end for offset, _, _ in doc.headings)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=3000), params=st.sampled_from(PARAM_SETS))
def test_arbitrary_text_keeps_every_invariant(text: str, params: ChunkingParams) -> None:
    _assert_invariants(text, Chunker(params).split(text), params)


# ---------------------------------------------------------------- examples


def _sentences(count: int, word: str = "alpha") -> str:
    return " ".join(f"Sentence {i} has some {word} words in it." for i in range(count))


def test_heading_path_follows_the_hierarchy() -> None:
    text = "\n\n".join(
        [
            "# Guide",
            _sentences(5),
            "## Setup",
            _sentences(5),
            "### Ports",
            _sentences(12),
            "## Other",
            _sentences(5),
        ]
    )
    spans = Chunker(SMALL).split(text)
    paths = {s.heading_path for s in spans}
    assert {"Guide", "Guide > Setup", "Guide > Setup > Ports", "Guide > Other"} <= paths
    ports = text.index("### Ports")
    other = text.index("## Other")
    for span in spans:
        if ports <= span.start < other:
            assert span.heading_path == "Guide > Setup > Ports"


def test_chunk_ends_before_a_heading_in_the_window() -> None:
    text = _sentences(12) + "\n\n## Next\n\n" + _sentences(20)
    spans = Chunker().split(text)
    heading = text.index("## Next")
    assert spans[0].end <= heading
    assert spans[1].start == heading  # no overlap carried into the new section
    assert spans[1].heading_path == "Next"


def test_plain_prose_is_cut_at_sentence_ends_with_overlap() -> None:
    text = _sentences(60)
    spans = Chunker().split(text)
    assert len(spans) > 3
    for span in spans:
        assert span.text.endswith(".") and span.text[0].isupper()
        assert 400 <= len(span.text) <= 1000
    assert all(a.end > b.start for a, b in itertools.pairwise(spans))


def test_fence_that_fits_is_kept_whole_even_across_the_target() -> None:
    fence = (
        "```python\n" + "\n".join(f"value_{i} = compute({i})  # step" for i in range(20)) + "\n```"
    )
    text = _sentences(9) + "\n\n" + fence + "\n\n" + _sentences(10)
    spans = Chunker().split(text)
    start = text.index("```python")
    assert any(s.start <= start and start + len(fence) <= s.end for s in spans)
    assert not any(s.start < start < s.end < start + len(fence) for s in spans)


def test_block_just_after_a_cut_needs_no_sliver_chunk() -> None:
    # The first cut falls at the sentence end near 950; the fence starts beyond
    # the first window. The overlap must shrink so the next chunk can hold the
    # fence whole, instead of a short chunk made mostly of overlap.
    opening = "Opening words make a first sentence here." + " filler" * 40 + "."
    middle = " word" * 130 + "."
    tail = " trailing words without end"
    code = "\n".join(f"step_{i:02d} = run({i})" for i in range(42))
    fence = "```\n" + code + "\n```"
    text = opening + middle + tail + "\n\n" + fence + "\n\nClosing text."
    assert 900 < text.index(middle) + len(middle) < 1000 < text.index("```") < 1050
    assert 750 < len(fence) < 900
    spans = Chunker().split(text)
    start = text.index("```")
    assert any(s.start <= start and start + len(fence) <= s.end for s in spans)
    assert all(len(s.text) >= ChunkingParams().min_chars for s in spans[:-1])


def test_oversized_fence_is_split_at_line_breaks() -> None:
    body = "\n".join(f"line {i} = something()" for i in range(150))
    text = "```\n" + body + "\n```"
    spans = Chunker().split(text)
    assert len(spans) > 2
    for span in spans[:-1]:
        assert span.end == len(text) or text[span.end] == "\n"


def test_table_that_fits_is_kept_whole() -> None:
    table = "\n".join(f"| row {i} | value {i} | note {i} |" for i in range(20))
    text = _sentences(8) + "\n\n" + table + "\n\n" + _sentences(8)
    start = text.index("| row 0")
    spans = Chunker().split(text)
    assert any(s.start <= start and start + len(table) <= s.end for s in spans)


def test_long_line_without_spaces_is_hard_cut_at_the_maximum() -> None:
    text = "x" * 4500
    spans = Chunker().split(text)
    assert [len(s.text) for s in spans[:-1]] == [1000] * (len(spans) - 1)
    assert "".join(s.text for s in spans) == text


def test_short_tail_is_merged_into_the_last_chunk() -> None:
    text = _sentences(22)  # a bit over the target, under the maximum
    assert 800 < len(text) <= 1000
    assert [s.text for s in Chunker().split(text)] == [text]


def test_short_final_section_keeps_its_own_chunk() -> None:
    text = _sentences(22) + "\n\n## Notes\n\nShort."
    spans = Chunker().split(text)
    assert spans[-1].text == "## Notes\n\nShort."
    assert spans[-1].heading_path == "Notes"


def test_hash_lines_inside_fences_are_not_headings() -> None:
    text = "# Real\n\n```sh\n# comment\n```\n\n## Also real\n"
    assert [(h.level, h.title) for h in iter_headings(text)] == [(1, "Real"), (2, "Also real")]


def test_closing_hashes_are_not_part_of_the_title() -> None:
    assert [h.title for h in iter_headings("## Ports ##\n#hashtag\n")] == ["Ports"]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t\n"])
def test_blank_text_gives_no_chunks(text: str) -> None:
    assert Chunker().split(text) == []


def test_spans_strip_whitespace_by_moving_offsets() -> None:
    text = "\n\n   Hello world.   \n\n"
    (span,) = Chunker().split(text)
    assert (span.text, span.start, span.end) == ("Hello world.", 5, 17)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"target_chars": 99}, "target_chars=99"),
        ({"overlap_chars": -1}, "overlap_chars=-1"),
        ({"overlap_chars": 400}, "overlap_chars=400"),
        ({"max_slack_chars": -5}, "max_slack_chars=-5"),
    ],
)
def test_invalid_params_are_rejected_by_name(kwargs: dict[str, int], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ChunkingParams(**kwargs)  # type: ignore[arg-type]


def test_params_describe_themselves() -> None:
    params = ChunkingParams(target_chars=500, overlap_chars=100, max_slack_chars=50)
    assert params.max_chars == 550
    assert params.as_dict() == {
        "target_chars": 500,
        "overlap_chars": 100,
        "max_slack_chars": 50,
        "version": "struct-v1",
        "max_chars": 550,
    }
