"""EvidenceAssembler: numbered blocks, citations and the character budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import ConfigError, InvalidArgument
from services.retriever.evidence import EvidenceAssembler
from services.retriever.types import Citation, FusedHit
from tests.retriever.factories import hit

pytestmark = pytest.mark.unit


def block(number: int, label: str, source: str, text: str) -> str:
    return f"[{number}] {label}\nSource: {source}\n{text}"


def test_blocks_and_citations_in_hit_order() -> None:
    hits = [
        hit(
            "c1",
            doc_id="d1",
            text="Ports are 50051.",
            url="https://ex.com/setup",
            title="Setup",
            heading_path="Guide > Ports",
        ),
        hit("c2", doc_id="d2", text="  Untitled text.\n"),
    ]
    evidence = EvidenceAssembler().assemble(hits)
    assert evidence.text == (
        block(1, "Setup — Guide > Ports", "https://ex.com/setup", "Ports are 50051.")
        + "\n\n"
        + block(2, "d2", "d2", "Untitled text.")
    )
    assert evidence.citations == [
        Citation(1, "c1", "d1", "https://ex.com/setup", "Setup", "Guide > Ports"),
        Citation(2, "c2", "d2", "", "", ""),
    ]
    assert (evidence.chars, evidence.dropped_chunks, evidence.truncated) == (
        len(evidence.text),
        0,
        False,
    )


def test_exact_fit_is_included() -> None:
    hits = [hit("a", text="x" * 40), hit("b", text="y" * 40)]
    full = EvidenceAssembler().assemble(hits)
    exact = EvidenceAssembler(char_budget=full.chars).assemble(hits)
    assert exact == full
    one_less = EvidenceAssembler(char_budget=full.chars - 1).assemble(hits)
    assert [c.chunk_id for c in one_less.citations] == ["a"]


def test_skips_a_block_that_does_not_fit_and_continues_with_smaller_ones() -> None:
    hits = [hit("a", text="short a"), hit("b", text="b" * 500), hit("c", text="short c")]
    evidence = EvidenceAssembler(char_budget=120).assemble(hits)
    assert [(c.number, c.chunk_id) for c in evidence.citations] == [(1, "a"), (2, "c")]
    assert "[2] doc-c\nSource: doc-c\nshort c" in evidence.text
    assert "b" * 20 not in evidence.text
    assert (evidence.dropped_chunks, evidence.truncated) == (1, False)
    assert evidence.chars <= 120


def test_drops_whole_chunks_before_truncating_the_top_one() -> None:
    # The top block alone is too big, but a later one fits whole: no cutting.
    hits = [hit("big", text="para one.\n\n" + "z" * 400), hit("small", text="fits")]
    evidence = EvidenceAssembler(char_budget=100).assemble(hits)
    assert [c.chunk_id for c in evidence.citations] == ["small"]
    assert evidence.citations[0].number == 1
    assert (evidence.dropped_chunks, evidence.truncated) == (1, False)


def test_truncates_the_top_block_at_the_last_fitting_paragraph() -> None:
    text = "First paragraph.\n\nSecond paragraph.\n\nThird paragraph is long " + "w " * 50
    hits = [hit("a", text=text), hit("b", text="q" * 300)]
    header = "[1] doc-a\nSource: doc-a\n"
    budget = len(header) + len("First paragraph.\n\nSecond paragraph.") + 10
    evidence = EvidenceAssembler(char_budget=budget).assemble(hits)
    assert evidence.text == header + "First paragraph.\n\nSecond paragraph."
    assert [c.chunk_id for c in evidence.citations] == ["a"]
    assert (evidence.dropped_chunks, evidence.truncated) == (1, True)


def test_truncates_at_a_sentence_when_no_paragraph_fits() -> None:
    text = "One sentence here. Two sentences here! Three? " + "tail " * 40 + "\n\nNext para."
    header = "[1] doc-a\nSource: doc-a\n"
    budget = len(header) + len("One sentence here. Two sentences here!") + 3
    evidence = EvidenceAssembler(char_budget=budget).assemble([hit("a", text=text)])
    assert evidence.text == header + "One sentence here. Two sentences here!"
    assert evidence.truncated


def test_truncates_at_a_line_break_when_no_sentence_fits() -> None:
    text = "key: value\nother_key: other value\n" + "x" * 200
    header = "[1] doc-a\nSource: doc-a\n"
    budget = len(header) + len("key: value\nother_key: other value") + 2
    evidence = EvidenceAssembler(char_budget=budget).assemble([hit("a", text=text)])
    assert evidence.text == header + "key: value\nother_key: other value"


def test_falls_back_to_word_then_hard_cut() -> None:
    header = "[1] doc-a\nSource: doc-a\n"
    words = EvidenceAssembler(char_budget=len(header) + 12).assemble(
        [hit("a", text="alpha beta gamma delta epsilon")]
    )
    assert words.text == header + "alpha beta"
    hard = EvidenceAssembler(char_budget=len(header) + 5).assemble([hit("a", text="z" * 50)])
    assert hard.text == header + "zzzzz"
    assert words.truncated and hard.truncated


def test_budget_below_the_header_gives_empty_evidence() -> None:
    evidence = EvidenceAssembler(char_budget=10).assemble([hit("a"), hit("b")])
    assert (evidence.text, evidence.citations, evidence.chars) == ("", [], 0)
    assert (evidence.dropped_chunks, evidence.truncated) == (2, False)


def test_no_hits() -> None:
    evidence = EvidenceAssembler().assemble([])
    assert (evidence.text, evidence.citations, evidence.dropped_chunks) == ("", [], 0)


def test_per_call_budget_overrides_and_is_validated() -> None:
    hits = [hit("a", text="a" * 100), hit("b", text="b" * 100)]
    assembler = EvidenceAssembler(char_budget=10_000)
    assert len(assembler.assemble(hits).citations) == 2
    assert len(assembler.assemble(hits, char_budget=150).citations) == 1
    with pytest.raises(InvalidArgument, match="got 0"):
        assembler.assemble(hits, char_budget=0)
    with pytest.raises(ConfigError, match="got -5"):
        EvidenceAssembler(char_budget=-5)


texts = st.text(alphabet=st.sampled_from("ab .\n"), max_size=300)


@settings(deadline=None)  # never fail on a slow, shared CI machine
@given(
    contents=st.lists(texts, max_size=14),
    budget=st.integers(1, 1500),
)
def test_budget_and_numbering_invariants(contents: list[str], budget: int) -> None:
    hits = [hit(f"c{i:02d}", text=text) for i, text in enumerate(contents)]
    evidence = EvidenceAssembler(char_budget=budget).assemble(hits)
    assert evidence.chars == len(evidence.text) <= budget
    numbers = [c.number for c in evidence.citations]
    assert numbers == list(range(1, len(numbers) + 1))
    for citation in evidence.citations:
        assert f"[{citation.number}] doc-{citation.chunk_id}\n" in evidence.text
    included = [c.chunk_id for c in evidence.citations]
    assert included == sorted(included)  # hit order kept
    assert evidence.dropped_chunks + len(included) == len(hits)
    if evidence.truncated:
        assert included == ["c00"]
        assert not _any_whole_block_fits(hits, budget)


def _any_whole_block_fits(hits: list[FusedHit], budget: int) -> bool:
    assembler = EvidenceAssembler(char_budget=budget)
    return any(
        not assembler.assemble([h]).truncated and assembler.assemble([h]).citations for h in hits
    )
