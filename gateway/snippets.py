"""A hit's Markdown as a short plain-text snippet, with the Retriever's
highlight spans carried onto it.

The Retriever reports where the query matched as code-point offsets into
`Hit.text` (Markdown). The snippet removes markup, collapses whitespace and
cuts the result, so those offsets must travel through the same cleaning to be
right in the snippet. They do so as sentinel characters: each span boundary
becomes its own private-use character, the text is cleaned by the very
function that makes every snippet, and the sentinels' positions are read back.
A span whose start or end sentinel did not survive (it sat in a removed heading
line or link target) is dropped rather than guessed. Sentinels come only from
here: the input's own characters from that range are removed first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SNIPPET_CHARS = 280
CONTEXT_CHARS = 60  # text shown before a match that lies past the usual snippet
MAX_SPANS = 1024  # per hit: bounds the work and the JSON; later spans are ignored
ELLIPSIS = "…"

# Supplementary Private Use Area-B: two sentinels per span (start, end).
_SENTINEL_BASE = 0x100000
_SENTINEL_CLASS = "[\U00100000-\U0010ffff]"
_SENTINELS = re.compile(_SENTINEL_CLASS)
_M = _SENTINEL_CLASS + "*"  # lets the line patterns see through sentinels

# The patterns tolerate sentinels where a span boundary could split the markup
# they remove (before a heading's `#`, inside a list number), so a marked text
# cleans exactly like the bare one; those sentinels are then lost with the markup.
_HEADING_LINE = re.compile(rf"^{_M}\s{{0,3}}#{{1,6}}\s.*$", re.MULTILINE)
# Link text holds no bracket (as in CommonMark: `[a [b](u)` links only "b"),
# so a run of `[` is not rescanned to its end from each one.
_LINK = re.compile(r"!?\[([^\][]*)\]\([^)]*\)")
_INLINE_MARKUP = re.compile(r"\*\*|__|`+")
# Explicit bidi embeddings, overrides and isolates: in a result list they let
# a body's text read as other text ("with \u202egnp.exe" shows as "with
# exe.png"), which titles refuse for that reason. The implicit marks (LRM,
# RLM, ALM) stay: right-to-left text needs them and they reorder nothing.
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
# `[^\S\n]*` (blanks of one line), not `\s*`: from each line start, `\s*` ran
# across every blank line below it before failing (quadratic in a run of them).
_LINE_MARKUP = re.compile(rf"^[^\S\n]*{_M}(?:[>*+-]|#{{1,6}}|(?:\d{_M})+\.)\s+|\|", re.MULTILINE)
_ALONE = re.compile(rf"(?:(?<= )|^)({_SENTINEL_CLASS}+) ")
_LAST_ALONE = re.compile(rf" ({_SENTINEL_CLASS}+)$")


@dataclass(frozen=True, order=True)
class Span:
    """[start, end) in code points; `identifier`: an exact identifier match."""

    start: int
    end: int
    identifier: bool = False


@dataclass(frozen=True)
class Snippet:
    text: str
    spans: tuple[Span, ...] = ()


def plain_text(markdown: str) -> str:
    """Chunk text as a person reads it in a result list: heading lines dropped
    (the heading path shows them), link targets and emphasis markers removed."""
    markdown = BIDI_CONTROLS.sub("", markdown)
    text = _HEADING_LINE.sub(" ", markdown)
    if not _SENTINELS.sub("", text).strip():  # a heading alone: keep its words
        text = markdown
    text = _LINK.sub(r"\1", _without_rules(text))
    return _LINE_MARKUP.sub(" ", _INLINE_MARKUP.sub("", text))


_RULE_CHARS = frozenset("|:- \t")


def _without_rules(text: str) -> str:
    """A table's delimiter row (`| --- | :-: |`) and a thematic break (`---`)
    are drawing, not words: in a snippet they read "--- --- ---". Checked
    line by line, not by a pattern (a line of dashes must not cost a
    quadratic scan)."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        bare = _SENTINELS.sub("", line)
        if "---" in bare and set(bare) <= _RULE_CHARS:
            lines[index] = " "
    return "\n".join(lines)


def valid_spans(spans: Iterable[Span], length: int) -> list[Span]:
    """The spans a client can rely on: inside the text, non-empty, sorted and
    non-overlapping (the Retriever promises this; the gateway enforces it)."""
    kept: list[Span] = []
    for span in sorted(s for s in spans if 0 <= s.start < s.end <= length):
        if kept and span.start < kept[-1].end:
            continue
        kept.append(span)
        if len(kept) == MAX_SPANS:
            break
    return kept


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    return highlighted_snippet(text, (), limit).text


def highlighted_snippet(
    text: str, spans: Iterable[Span] = (), limit: int = SNIPPET_CHARS
) -> Snippet:
    """The snippet of `text` and where `spans` (offsets into `text`) fall in it.

    Usually the head of the text, exactly as without spans. When no match is
    visible there but one exists further on, a window around the first match,
    led by "…", so the reader sees why the hit matched."""
    wanted = valid_spans(spans, len(text))
    # Only the head of the text can end up in the usual snippet; skip cleaning the rest.
    flat, mapped = _flatten(text[: limit * 4], wanted)
    usual = _head(flat, mapped, limit)
    if usual.spans or not wanted:
        return usual
    # No match visible: clean far enough to show the first one that survives.
    flat, mapped = _flatten(text[: wanted[-1].end + limit * 4], wanted)
    return _window(flat, mapped, limit) if mapped else usual


def _flatten(text: str, spans: list[Span]) -> tuple[str, list[Span]]:
    """`text` cleaned and whitespace-collapsed, and the spans that survived."""
    inside = [s for s in spans if s.end <= len(text)]
    collapsed = " ".join(plain_text(_mark(text, inside)).split())
    if not inside:
        return collapsed, []
    # Sentinels are not whitespace, so they stay on their word; a run of them
    # left between two spaces joins the next word (the last word, at the end).
    collapsed = _LAST_ALONE.sub(r"\1", _ALONE.sub(r"\1", collapsed))
    flat, bounds = _unmark(collapsed, 2 * len(inside))
    mapped = []
    for index, span in enumerate(inside):
        start, end = bounds.get(2 * index), bounds.get(2 * index + 1)
        if start is None or end is None:
            continue  # a boundary went with removed markup
        if flat[start : start + 1] == " ":
            start += 1  # onto the next word
        if end and flat[end - 1] == " ":
            end -= 1  # back onto the previous one
        if start < end:
            mapped.append(Span(start, end, span.identifier))
    return flat, mapped


def _mark(text: str, spans: list[Span]) -> str:
    """`text` with sentinels at the span boundaries and none of its own."""
    clean = _SENTINELS.sub if _SENTINELS.search(text) else None
    pieces, at = [], 0
    for index, span in enumerate(spans):
        for code, pos in ((2 * index, span.start), (2 * index + 1, span.end)):
            piece = text[at:pos]
            pieces.append(clean("", piece) if clean else piece)
            pieces.append(chr(_SENTINEL_BASE + code))
            at = pos
    rest = text[at:]
    pieces.append(clean("", rest) if clean else rest)
    return "".join(pieces)


def _unmark(marked: str, count: int) -> tuple[str, dict[int, int]]:
    """The text without sentinels, and where each of the first `count` that
    survived stands in it. Cleaning keeps the order of what it keeps, so the
    survivors appear in code order: each one's position drops by the number
    found before it."""
    bounds: dict[int, int] = {}
    for code in range(count):
        at = marked.find(chr(_SENTINEL_BASE + code))
        if at >= 0:
            bounds[code] = at - len(bounds)
    return _SENTINELS.sub("", marked), bounds


def _trim(body: str) -> str:
    """Cut at the last word boundary, without dangling punctuation."""
    return body.rsplit(" ", 1)[0].rstrip(" ,;:.-")


def _head(flat: str, spans: list[Span], limit: int) -> Snippet:
    """The usual snippet: the start of the text, with the spans it shows."""
    if len(flat) <= limit:
        return Snippet(flat, tuple(spans))
    body = _trim(flat[:limit])
    return Snippet(body + ELLIPSIS, _shift(spans, 0, len(body), 0))


def _window(flat: str, spans: list[Span], limit: int) -> Snippet:
    """About `limit` characters from a little before the first span."""
    first = spans[0]
    budget = limit - 1  # the leading ellipsis
    begin = max(0, min(first.start - CONTEXT_CHARS, len(flat) - budget), first.end - budget)
    if begin > 0 and flat[begin - 1] != " ":  # start at a word, if one starts before the match
        space = flat.find(" ", begin, first.start)
        begin = space + 1 if space >= 0 else begin
    rest = flat[begin:]
    body = rest if len(rest) <= budget else _trim(rest[:budget])
    if len(body) < first.end - begin:  # never cut the match itself away
        body = rest[: first.end - begin]
    lead = ELLIPSIS if begin > 0 else ""
    tail = ELLIPSIS if len(body) < len(rest) else ""
    return Snippet(lead + body + tail, _shift(spans, begin, begin + len(body), len(lead)))


def _shift(spans: list[Span], begin: int, end: int, offset: int) -> tuple[Span, ...]:
    """Spans within [begin, end) of the flat text, as offsets into a snippet
    whose text starts at `begin` after `offset` extra characters."""
    moved = []
    for span in spans:
        start, stop = max(span.start, begin), min(span.end, end)
        if start < stop:
            moved.append(Span(start - begin + offset, stop - begin + offset, span.identifier))
    return tuple(moved)
