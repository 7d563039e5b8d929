"""Unit and property tests for the structure-aware chunker."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from services.core.errors import ConfigError
from services.indexer.chunking import Chunker, ChunkingParams, iter_headings
from services.indexer.work_budget import WorkBudgetExceeded, WorkMeter
from tests.support.chunk_invariants import assert_chunk_invariants, step_bound

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
# tables or headings (ATX or setext), so the generator knows exactly where
# those are.
_free_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="`~|#=-"),
    max_size=400,
)
_long_token = st.text(alphabet="abcdefXYZ0123456789", min_size=1, max_size=3000)


@st.composite
def _blocks(draw: st.DrawFn) -> tuple[str, str, int]:
    """One Markdown block as (kind, text, heading level or 0)."""
    kind = draw(st.sampled_from(["heading", "para", "para", "fence", "table", "long", "free"]))
    if kind == "heading":
        title = " ".join(draw(st.lists(_word, min_size=1, max_size=4)))
        if draw(st.booleans()):  # setext: a title over a line of = (level 1) or - (level 2)
            level = draw(st.integers(1, 2))
            underline = ("=" if level == 1 else "-") * draw(st.integers(2, 12))
            return kind, title + "\n" + underline, level
        level = draw(st.integers(1, 6))
        return kind, "#" * level + " " + title, level
    if kind == "fence":
        marker = draw(st.sampled_from(["```", "~~~", "````"]))
        lines = draw(st.lists(_code_line, max_size=40))
        return kind, "\n".join([marker + draw(st.sampled_from(["", "python"])), *lines, marker]), 0
    if kind == "table":
        rows = draw(st.lists(st.lists(_word, min_size=1, max_size=4), min_size=1, max_size=30))
        indent = draw(st.sampled_from(["", "", "   "]))  # rST-style tables are indented
        return kind, "\n".join(indent + "| " + " | ".join(row) + " |" for row in rows), 0
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
    heading_ends: set[int] = field(default_factory=set)  # where each heading's lines end


def _sized_block(kind: str, size: int) -> str:
    """A fence, table, long line or paragraph of exactly `size` characters."""
    if kind == "fence":
        body = _filled(size - 8, "x = call(1)  # code line")
        return "```\n" + body + "\n```"
    if kind == "table":
        head = "| name | value |\n|---|---|\n"
        return head + _filled(size - len(head), "| key_1 | val |", sep="\n")
    if kind == "long":
        return ("identifier-" * (size // 11 + 1))[:size]
    return _filled(size, "Words of prose end here.", sep=" ")


def _filled(size: int, unit: str, sep: str = "\n") -> str:
    text = sep.join([unit] * (size // (len(unit) + 1) + 1))
    return text[:size].rstrip() or unit[: max(size, 1)]


@st.composite
def _edge_blocks(draw: st.DrawFn) -> tuple[str, str, int]:
    """A block sized at an edge of the window: around min, target, max, 2*max."""
    params = ChunkingParams()
    edge = draw(st.sampled_from([params.min_chars, params.target_chars, params.max_chars]))
    size = draw(st.integers(-3, 3)) + edge * draw(st.sampled_from([1, 1, 2]))
    kind = draw(st.sampled_from(["fence", "table", "long", "para"]))
    return kind, _sized_block(kind, max(size, 10)), 0


@st.composite
def markdown_docs(draw: st.DrawFn) -> _Doc:
    doc = _Doc()
    parts: list[str] = []
    offset = 0
    blocks = draw(st.lists(st.one_of(_blocks(), _edge_blocks()), max_size=14))
    for kind, text, level in blocks:
        if kind in ("fence", "table"):
            doc.atomic.append((offset, offset + len(text)))
        if kind == "heading":
            doc.headings.append((offset, level, text.split("\n")[0].lstrip("#").strip()))
            doc.heading_ends.add(offset + len(text))
        parts.append(text)
        offset += len(text) + 2
    doc.text = "\n\n".join(parts) + draw(st.sampled_from(["", "\n", "\n\n", "  \n"]))
    return doc


# ---------------------------------------------------------------- helpers


def _after_heading(doc: _Doc, start: int, end: int, params: ChunkingParams) -> bool:
    """A block right after a run of headings that does not fit beside it whole
    may be cut: the headings travel with its first lines instead. The run is
    every heading separated from the next only by blank lines, as the chunker
    keeps a heading with the heading that follows it."""
    if len(doc.text[:start].rstrip()) not in doc.heading_ends:
        return False
    run_start = start
    for offset, _, _ in reversed([h for h in doc.headings if h[0] < start]):
        heading_end = min(end for end in doc.heading_ends if end > offset)
        if doc.text[heading_end:run_start].strip():
            break
        run_start = offset
    return end - run_start > params.max_chars


def _expected_heading_path(doc: _Doc, pos: int) -> str:
    stack: list[tuple[int, str]] = []
    for offset, level, title in doc.headings:
        if offset > pos:
            break
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
    return " > ".join(t for _, t in stack)


# ---------------------------------------------------------------- properties

_SMALL_WINDOW = ChunkingParams(target_chars=100, overlap_chars=30, max_slack_chars=20)
_RUN_TEXT = (
    "```\n" + "x = call(1)  # code line\n" * 15 + "x = call(1)  # co\n```\n\n"
    "###### 0\n\n###### 000000 0000000 00000000\n\n"
    "```python\n" + "# NOTAHEADING comment\n" * 3 + "```"
)
# Found by CI: two sibling headings before a fence; the run with the fence
# exceeds the window, so the fence may be cut (the headings stay together).
_HEADING_RUN_BEFORE_FENCE = _Doc(
    text=_RUN_TEXT,
    atomic=[(0, 400), (444, 523)],
    headings=[(402, 6, "0"), (412, 6, "000000 0000000 00000000")],
    heading_ends={410, 442},
)


# Found by a random run: an indented table whose text is just under the
# maximum, last in the page. The block was measured with its indentation and
# its last line break (121 > 120), so it did not fit and was cut.
_INDENTED_TABLE_TEXT = (
    "# 0\n\n   | 0 |\n   | 0 | 000 |\n   | 0 | 000000000000 |\n   | 000000 |\n"
    "   | 000000000000 |\n   | 00 | 00 | 0000000 | 000000000000 |\n\n# 0"
)
_INDENTED_TABLE_AT_MAX = _Doc(
    text=_INDENTED_TABLE_TEXT,
    atomic=[(5, 5 + _INDENTED_TABLE_TEXT[5:].index("\n\n"))],
    headings=[(0, 1, "0"), (len(_INDENTED_TABLE_TEXT) - 3, 1, "0")],
    heading_ends={3, len(_INDENTED_TABLE_TEXT)},
)


@settings(max_examples=200, deadline=None)
@given(doc=markdown_docs(), params=st.sampled_from(PARAM_SETS))
@example(doc=_HEADING_RUN_BEFORE_FENCE, params=_SMALL_WINDOW)
@example(doc=_INDENTED_TABLE_AT_MAX, params=_SMALL_WINDOW)
def test_generated_markdown_keeps_every_invariant(doc: _Doc, params: ChunkingParams) -> None:
    meter = WorkMeter()
    spans = Chunker(params).split(doc.text, meter)
    assert_chunk_invariants(doc.text, spans, params)
    assert meter.steps <= step_bound(doc.text, params)
    assert Chunker(params).split(doc.text) == spans  # deterministic
    for block_start, end in doc.atomic:
        start = (
            block_start + len(doc.text[block_start:end]) - len(doc.text[block_start:end].lstrip())
        )
        if end - start < params.max_chars and not _after_heading(doc, start, end, params):
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
    meter = WorkMeter()
    assert_chunk_invariants(text, Chunker(params).split(text, meter), params)
    assert meter.steps <= step_bound(text, params)


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
        "version": "struct-v4",
        "max_chars": 550,
    }


# ---------------------------------------------------------------- progress


def _fenced_example(lines: int) -> str:
    body = "\n".join(f"console.log('line {i:03d} of the example');" for i in range(lines))
    return "```js\n" + body + "\n```\n"


@pytest.mark.parametrize("lines", [16, 18, 20, 22, 23, 24])
@pytest.mark.parametrize("trailer", ["", "\n", "\n\n"])
def test_text_ending_with_a_block_near_the_maximum_finishes(lines: int, trailer: str) -> None:
    # struct-v1 looped forever on a final fence of 801-1000 characters, and cut
    # shorter ones into slivers that were suffixes of the first chunk.
    text = "# Example\n\n" + "A sentence of prose here. " * 30 + "\n\n" + _fenced_example(lines)
    text = text.rstrip("\n") + trailer
    meter = WorkMeter()
    spans = Chunker().split(text, meter)
    assert_chunk_invariants(text, spans, ChunkingParams())
    assert len(spans) == 2 and meter.steps == 2
    fence_start = text.index("```js")
    assert spans[1].start <= fence_start and spans[1].end == len(text.rstrip())


def test_table_at_the_end_between_target_and_maximum_finishes() -> None:
    rows = "\n".join(f"| option_{i:02d} | default value {i:03d} |" for i in range(28))
    table = "| option | default |\n|---|---|\n" + rows + "\n"
    assert 800 < len(table) <= 1000
    text = "Intro sentence of the page. " * 25 + "\n\n" + table
    spans = Chunker().split(text)
    assert_chunk_invariants(text, spans, ChunkingParams())
    assert spans[-1].text.endswith(table.strip()[-40:])
    assert table.strip() in spans[-1].text  # kept whole


def test_a_heading_travels_with_the_table_after_it() -> None:
    # The quick start's corpus had a chunk that was only "## Steps and their
    # defaults", its table split off into the next chunk.
    rows = "\n".join(f"| step {i} | {i * 10} ms |" for i in range(30))
    table = "| step | default |\n|---|---|\n" + rows
    text = "Prose before the section. " * 26 + "\n\n## Steps and their defaults\n\n" + table
    spans = Chunker().split(text)
    assert_chunk_invariants(text, spans, ChunkingParams())
    assert not any(s.text.strip() == "## Steps and their defaults" for s in spans)
    holder = next(s for s in spans if "## Steps" in s.text)
    assert "| step | default |" in holder.text


def test_headings_with_nothing_after_them_join_the_chunk_before() -> None:
    text = "Some closing words of the page. " * 20 + "\n\n## See also\n\n### More\n"
    (span,) = Chunker().split(text)
    assert span.text.endswith("### More")


def test_a_split_table_repeats_its_header_rows() -> None:
    header = "| parameter | meaning | default |\n|:---|---|--:|"
    rows = "\n".join(f"| param_{i:03d} | what it means {i} | {i} |" for i in range(120))
    text = "## Reference\n\n" + header + "\n" + rows + "\n\nAfter the table."
    spans = Chunker().split(text)
    assert_chunk_invariants(text, spans, ChunkingParams())
    inside = [s for s in spans if text.index(header) + len(header) < s.start < text.index("After")]
    assert len(inside) >= 3
    for span in inside:
        assert span.header == header + "\n" and span.text.startswith(header + "\n| param_")


def test_an_indented_table_repeats_its_header_without_the_indent() -> None:
    # reStructuredText-style indentation, as in Python's own documentation sources.
    rows = "".join(f"   | ``'{i:02d}'`` | General format number {i}. |\n" for i in range(40))
    text = "Intro paragraph.\n\n   | Type | Meaning |\n" + rows
    spans = Chunker().split(text)
    assert_chunk_invariants(text, spans, ChunkingParams())
    assert any(s.header == "| Type | Meaning |\n" for s in spans)


def test_a_huge_table_header_is_not_repeated() -> None:
    header = "| " + " | ".join(f"column_{i}" for i in range(40)) + " |"
    rows = "\n".join("| " + " | ".join(str(i) for _ in range(40)) + " |" for i in range(40))
    text = header + "\n" + rows
    assert len(header) > ChunkingParams().max_header_chars
    spans = Chunker().split(text)
    assert_chunk_invariants(text, spans, ChunkingParams())
    assert all(s.header == "" for s in spans)


# ---------------------------------------------------------------- work


def test_steps_are_one_per_cut_and_linear_in_the_text() -> None:
    text = _sentences(2000)
    meter = WorkMeter()
    spans = Chunker().split(text, meter)
    assert meter.steps == len(spans) <= step_bound(text, ChunkingParams())


def test_a_document_over_its_work_budget_is_rejected_by_name() -> None:
    meter = WorkMeter(limit=5, what="doc_id 'big-page' (locale 'en')")
    with pytest.raises(WorkBudgetExceeded, match=re.escape("doc_id 'big-page' (locale 'en')")):
        Chunker().split(_sentences(600), meter)
    assert meter.steps == 6


def test_the_meter_checks_the_run_every_few_steps() -> None:
    calls: list[int] = []

    def check() -> None:
        calls.append(meter.steps)
        if len(calls) == 2:
            raise TimeoutError("deadline")  # stands in for RunControl's DeadlineExceeded

    meter = WorkMeter(check=check, check_every=4)
    with pytest.raises(TimeoutError):
        Chunker().split(_sentences(600), meter)
    assert calls == [4, 8]
