"""Highlight spans carried from a hit's Markdown onto its plain-text snippet."""

from __future__ import annotations

import re

import pytest

from gateway.snippets import (
    ELLIPSIS,
    MAX_SPANS,
    Snippet,
    Span,
    highlighted_snippet,
    plain_text,
    snippet,
    valid_spans,
)

pytestmark = pytest.mark.unit

SENTINEL = "\U00100000"  # what the mapping uses for the first span's start


def spans_of(text: str, *words: str, identifier: bool = False) -> list[Span]:
    """Every occurrence of each word in `text`, as spans (code points)."""
    pattern = "|".join(re.escape(w) for w in words)
    return [Span(m.start(), m.end(), identifier) for m in re.finditer(pattern, text)]


def marked(result: Snippet) -> list[str]:
    return [result.text[s.start : s.end] for s in result.spans]


def test_spans_survive_headings_links_emphasis_and_collapsed_whitespace() -> None:
    text = (
        "# Rate limits\n\n## Status 429\n\nA client   sending **too many**\n\n"
        "requests gets `429` and a [Retry-After header](https://x.example/Retry-After).\n"
    )
    result = highlighted_snippet(text, spans_of(text, "429", "many", "Retry-After", "header"))
    assert result.text == snippet(text)
    assert result.text == "A client sending too many requests gets 429 and a Retry-After header."
    # The heading's 429 and the link target's Retry-After went with their markup.
    assert marked(result) == ["many", "429", "Retry-After", "header"]


def test_a_span_across_removed_markup_keeps_its_visible_ends() -> None:
    text = "Use **exactly** `this flag` now."
    result = highlighted_snippet(text, [Span(4, 26)])  # "**exactly** `this flag"
    assert marked(result) == ["exactly this flag"]


@pytest.mark.parametrize(
    ("text", "span", "shown"),
    [
        ("one ** two", (4, 10), "two"),  # the start is left alone between spaces
        ("one ** two", (0, 6), "one"),  # the end is
        ("** one", (0, 6), "one"),  # at the very start
        ("one **", (0, 6), "one"),  # at the very end
        ("one ` ` two", (4, 7), None),  # nothing visible inside: dropped
    ],
)
def test_a_boundary_left_alone_by_removed_markup_joins_its_word(
    text: str, span: tuple[int, int], shown: str | None
) -> None:
    result = highlighted_snippet(text, [Span(*span)])
    assert result.text == snippet(text)
    assert marked(result) == ([shown] if shown else [])


def test_a_span_whose_end_is_in_a_link_target_is_dropped() -> None:
    text = "See [the guide](https://docs.example/guide) first."
    start = text.index("guide")
    end = text.index("docs") + 4  # from the label into the removed target
    assert highlighted_snippet(text, [Span(start, end)]).spans == ()


def test_a_heading_alone_keeps_its_words_and_their_spans() -> None:
    text = "## Status 429"
    result = highlighted_snippet(text, spans_of(text, "429"))
    assert (result.text, marked(result)) == ("Status 429", ["429"])


def test_a_highlighted_list_number_cleans_like_the_bare_text() -> None:
    text = "1. Install the toolchain\n2. Run step 1 again"
    result = highlighted_snippet(text, [Span(0, 1), *spans_of(text, "step 1", "Install")])
    assert result.text == snippet(text) == "Install the toolchain Run step 1 again"
    assert marked(result) == ["Install", "step 1"]  # the list number itself is gone


def test_chinese_text_maps_without_spaces() -> None:
    text = "## 分词\n\n检索服务先对中文文本进行**分词**，因为中文句子的词语之间没有空格。"
    result = highlighted_snippet(text, spans_of(text, "分词", "空格"))
    assert result.text == "检索服务先对中文文本进行分词，因为中文句子的词语之间没有空格。"
    assert marked(result) == ["分词", "空格"]


def test_offsets_count_code_points_across_astral_characters() -> None:
    text = "😀 emoji 🎉 then **the** 𝒳 identifier 𝒳_id here"
    result = highlighted_snippet(text, spans_of(text, "𝒳_id", identifier=True))
    assert result.text == "😀 emoji 🎉 then the 𝒳 identifier 𝒳_id here"
    start = result.text.index("𝒳_id")
    assert result.spans == (Span(start, start + 4, True),)
    assert len(result.text[:start].encode("utf-16-le")) // 2 > start  # not UTF-16 units


def test_unicode_whitespace_collapses_like_the_plain_snippet() -> None:
    text = "alpha\u3000\u3000beta\xa0 \tgamma\n\n\ndelta"
    result = highlighted_snippet(text, spans_of(text, "beta", "delta"))
    assert result.text == snippet(text) == "alpha beta gamma delta"
    assert marked(result) == ["beta", "delta"]


def test_a_late_match_gets_a_window_around_it() -> None:
    text = "# Notes\n\n" + "filler words here. " * 40 + "The code X7Q-4291 means rotate. " * 2
    spans = spans_of(text, "X7Q-4291", identifier=True)
    result = highlighted_snippet(text, spans)
    assert result.text.startswith(ELLIPSIS)
    assert not result.text.startswith(ELLIPSIS + " ")
    assert result.text.endswith("rotate.")
    assert len(result.text) <= 281
    assert marked(result) == ["X7Q-4291", "X7Q-4291"]
    assert all(s.identifier for s in result.spans)
    first = result.spans[0].start
    assert first > 60  # near the end: the window is the text's last ~280 characters
    assert result.text[first - 1] == " "


def test_a_window_in_a_long_text_ends_with_an_ellipsis_at_a_word() -> None:
    text = "lead " * 150 + "needle " + "tail " * 150
    result = highlighted_snippet(text, spans_of(text, "needle"))
    assert result.text.startswith(ELLIPSIS + "lead ")
    assert result.text.endswith("tail" + ELLIPSIS)
    assert marked(result) == ["needle"]
    assert len(result.text) <= 282
    assert 50 <= result.spans[0].start <= 61  # about CONTEXT_CHARS before it, from a word


def test_a_match_in_the_usual_snippet_keeps_the_usual_snippet() -> None:
    text = "status 429 early. " + "more text " * 100 + "429 again."
    result = highlighted_snippet(text, spans_of(text, "429"))
    assert result.text == snippet(text)
    assert marked(result) == ["429"]


def test_a_match_only_in_a_heading_leaves_the_usual_snippet_unmarked() -> None:
    text = "# Billing\n\n" + "Amounts are stored in minor units. " * 20
    result = highlighted_snippet(text, spans_of(text, "Billing"))
    assert result == Snippet(snippet(text), ())


def test_sentinel_characters_in_the_input_cannot_forge_a_span() -> None:
    forged = SENTINEL + "fake" + chr(0x100001)
    text = f"real {forged} word {chr(0x10FFFD)}"
    assert snippet(text) == "real fake word"
    assert highlighted_snippet(text, []).spans == ()
    result = highlighted_snippet(text, spans_of(text, "word"))
    assert (result.text, marked(result)) == ("real fake word", ["word"])


def test_invalid_spans_from_upstream_are_dropped() -> None:
    text = "alpha beta gamma"
    spans = [Span(6, 10), Span(-1, 3), Span(3, 3), Span(12, 99), Span(8, 12), Span(0, 5)]
    assert valid_spans(spans, len(text)) == [Span(0, 5), Span(6, 10)]
    many = [Span(i, i + 1) for i in range(MAX_SPANS + 10)]
    assert len(valid_spans(many, MAX_SPANS + 10)) == MAX_SPANS


MARKDOWN = """# Deployment guide

## Ports and `RAG_GATEWAY_PORT`

1. Set **RAG_GATEWAY_PORT** to 8080 (see [the table](https://docs.example/ports#table)).
2. Start the *gateway*; it listens on __all__ interfaces.
- Health checks: `GET /readyz` | returns 503 until ready
> Note: 中文 文档 also works, 😀 included.
"""


KEPT = re.findall(
    r"\S+",
    "Set RAG_GATEWAY_PORT to 8080 see the table Start the gateway it listens on all interfaces "
    "Health checks GET readyz returns 503 until ready Note 中文 文档 also works included",
)


@pytest.mark.parametrize("limit", [280, 60, 25])
def test_every_word_maps_exactly_or_is_dropped(limit: int) -> None:
    """A span on any word covers exactly that word where it is kept, and only
    changes the snippet to show a match the usual snippet would not."""
    plain = snippet(MARKDOWN, limit)
    kept = []
    for match in re.finditer(r"\w+", MARKDOWN):
        result = highlighted_snippet(MARKDOWN, [Span(match.start(), match.end())], limit)
        assert marked(result) in ([], [match.group().strip("_")])
        kept += marked(result)
        if result.text != plain:
            assert result.spans and match.group() not in plain
            assert len(result.text) <= limit + 1
    # Dropped: heading lines, the link target, list numbers.
    assert kept == KEPT


def test_link_text_holds_no_bracket_as_in_commonmark() -> None:
    assert plain_text("see [a [b](https://x.test) c") == "see [a b c"
    assert plain_text("[x![i](p.png)] and [y](u)") == "[xi] and y"


@pytest.mark.timeout(120)  # the hang guard: quadratic patterns took hours on these
@pytest.mark.parametrize("text", ["\n" * 200_000, " \n" * 100_000, "[" * 200_000])
def test_runs_of_blank_lines_and_brackets_clean_in_linear_time(text: str) -> None:
    assert plain_text(text).strip("\n [") == ""


def test_bidi_overrides_and_isolates_leave_the_snippet_and_spans_follow() -> None:
    # Probe: "with \u202egnp.exe" showed as "with exe.png" on the page.
    text = "xsszebra second body with \u202egnp.exe and \u2066isolated\u2069 words"
    start = text.index("words")
    excerpt = highlighted_snippet(text, [Span(start, start + 5, False)])
    assert excerpt.text == "xsszebra second body with gnp.exe and isolated words"
    (span,) = excerpt.spans
    assert excerpt.text[span.start : span.end] == "words"
    # Right-to-left text keeps its implicit marks: they reorder nothing.
    assert "\u200f" in highlighted_snippet("\u05e9\u05dc\u05d5\u05dd\u200f 42").text


def test_table_rules_and_thematic_breaks_are_not_words() -> None:
    """Probe: a table's snippet read "Setting Default --- --- ---"."""
    text = "| Setting | Default |\n| --- | :-: |\n| `chunkSize` | 800 |\n\n---\n\nAfter the rule."
    result = highlighted_snippet(text, spans_of(text, "800", "rule"))
    assert result.text == "Setting Default chunkSize 800 After the rule."
    assert marked(result) == ["800", "rule"]
    assert snippet("a - b -- c") == "a - b -- c"  # dashes in prose stay


@pytest.mark.timeout(120)  # the hang guard
def test_a_long_line_of_dashes_is_checked_in_linear_time() -> None:
    assert plain_text("-" * 200_000 + "x") == "-" * 200_000 + "x"  # not only drawing: kept
    assert plain_text("-" * 200_000).strip() == ""
