"""Evidence assembly: numbered reference blocks within a character budget.

Each included hit becomes one block, separated from the next by a blank line:

    [n] Title — Heading > Path
    Source: https://canonical.url/of/the/page   (the doc_id when there is no url)
    chunk text

plus a citation list mapping each `[n]` to its chunk, document and url.

Budget policy (the whole `text`, separators included, never exceeds it):
* Hits are taken in the given (ranked) order; a block is added whole when it fits.
* A block that does not fit is skipped and the following, possibly smaller,
  blocks are still tried (skip-and-continue): the budget is used for as much
  ranked evidence as fits, and relative rank order is preserved.
* Whole chunks are always dropped before any chunk is cut. Only when not even
  one block fits is the top hit's block truncated: at the last paragraph break
  (blank line) that fits, else at the last sentence end or line break, else at
  a word boundary, else hard; `truncated` is then True. Its header is never cut.
* Citation numbers are contiguous 1..n over the blocks actually included;
  `dropped_chunks` counts the hits left out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from services.core.analysis import QueryPlan, TextAnalyzer, match_spans
from services.core.errors import ConfigError, InvalidArgument
from services.retriever.types import Citation, Evidence, FusedHit

BLOCK_SEPARATOR = "\n\n"
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_OR_LINE_END = re.compile(r"(?<=[.!?])\s|\n")
_WORD_BREAK = re.compile(r"\s")


def with_highlights(
    hits: Sequence[FusedHit], analyzer: TextAnalyzer, plan: QueryPlan
) -> list[FusedHit]:
    """The answer's hits with the spans of their text that match the query."""
    return [
        dataclasses.replace(hit, highlights=match_spans(analyzer, hit.chunk.text, plan))
        for hit in hits
    ]


class EvidenceAssembler:
    """Builds the context block handed to a generator, within `char_budget`."""

    def __init__(self, char_budget: int = 6000) -> None:
        if char_budget < 1:
            raise ConfigError(f"evidence char_budget must be at least 1, got {char_budget}")
        self.char_budget = char_budget

    def assemble(self, hits: Sequence[FusedHit], *, char_budget: int | None = None) -> Evidence:
        """Blocks for `hits` in order; `char_budget` overrides the configured one."""
        budget = self.char_budget if char_budget is None else char_budget
        if budget < 1:
            raise InvalidArgument(f"context char budget must be at least 1, got {budget}")
        included = _select_whole_blocks(hits, budget)
        if included:
            return _evidence(included, len(hits), truncated=False)
        first = _truncated_first_block(hits, budget)
        if first is None:
            return _evidence([], len(hits), truncated=False)
        return _evidence([first], len(hits), truncated=True)


def _select_whole_blocks(hits: Sequence[FusedHit], budget: int) -> list[tuple[FusedHit, str]]:
    included: list[tuple[FusedHit, str]] = []
    used = 0
    for hit in hits:
        number = len(included) + 1
        block = _header(hit, number) + _content(hit)
        cost = len(block) + (len(BLOCK_SEPARATOR) if included else 0)
        if used + cost <= budget:
            included.append((hit, block))
            used += cost
    return included


def _truncated_first_block(hits: Sequence[FusedHit], budget: int) -> tuple[FusedHit, str] | None:
    if not hits:
        return None
    header = _header(hits[0], 1)
    content = _cut_to_fit(_content(hits[0]), budget - len(header))
    return (hits[0], header + content) if content else None


def _header(hit: FusedHit, number: int) -> str:
    chunk = hit.chunk
    label = chunk.title or chunk.doc_id
    if chunk.heading_path:
        label = f"{label} — {chunk.heading_path}"
    return f"[{number}] {label}\nSource: {chunk.url or chunk.doc_id}\n"


def _content(hit: FusedHit) -> str:
    return hit.chunk.text.strip()


def _cut_to_fit(text: str, limit: int) -> str:
    """The longest prefix of `text` within `limit` that ends at the best boundary."""
    if limit <= 0:
        return ""
    for boundary in (_PARAGRAPH_BREAK, _SENTENCE_OR_LINE_END, _WORD_BREAK):
        cut = _last_boundary_within(text, boundary, limit)
        if cut:
            return cut
    return text[:limit]


def _last_boundary_within(text: str, boundary: re.Pattern[str], limit: int) -> str:
    best = ""
    for match in boundary.finditer(text):
        if match.start() > limit:
            break
        prefix = text[: match.start()].rstrip()
        if prefix:
            best = prefix
    return best


def _evidence(
    included: Sequence[tuple[FusedHit, str]], total_hits: int, *, truncated: bool
) -> Evidence:
    text = BLOCK_SEPARATOR.join(block for _, block in included)
    citations = [_citation(hit, number) for number, (hit, _) in enumerate(included, start=1)]
    return Evidence(
        text=text,
        citations=citations,
        chars=len(text),
        dropped_chunks=total_hits - len(included),
        truncated=truncated,
    )


def _citation(hit: FusedHit, number: int) -> Citation:
    chunk = hit.chunk
    return Citation(
        number=number,
        chunk_id=chunk.chunk_id,
        doc_id=chunk.doc_id,
        url=chunk.url,
        title=chunk.title,
        heading_path=chunk.heading_path,
    )
