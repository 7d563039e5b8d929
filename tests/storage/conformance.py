"""The one conformance suite every `VectorStore` / `LexicalStore` passes.

In the spirit of qdrant-client's congruence tests: the same assertions run
against every implementation, and filter results are checked against one
reference oracle (`harness.reference_match`), so the embedded and server
stores of both kinds mean the same thing by a ScopeFilter.

Usage: subclass a contract in a `test_*.py` module and provide a `factory`
fixture returning a `StoreFactory` (see `conftest.py` for the registered
embedded and server factories):

    class TestMyVectorStore(VectorStoreContract):
        @pytest.fixture
        def factory(self, server_vector_factory): return server_vector_factory

The contract classes are not collected by themselves (no `Test` prefix).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, RagError, StoreUnavailable
from services.core.models import ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import VectorQuery, unrequested_deadline
from tests.storage.harness import (
    COMMON_WORD,
    DIM,
    ENOUGH,
    EVERYWHERE,
    PROBE_VECTOR,
    SCOPE_CASES,
    StoreFactory,
    StoreHarness,
    filter_corpus,
    make_chunk,
    payload_of,
    reference_match,
    stored,
)


class StoreContract:
    """Behaviour shared by both store kinds."""

    @pytest.fixture
    def harness(self, factory: StoreFactory, tmp_path) -> Iterator[StoreHarness]:
        harness = StoreHarness.open(factory, tmp_path / "store")
        yield harness
        harness.close()

    def test_ping_succeeds_on_an_open_store(self, harness: StoreHarness) -> None:
        harness.store.ping()

    def test_fresh_store_is_empty(self, harness: StoreHarness) -> None:
        assert harness.store.count(None, unrequested_deadline()) == 0
        assert harness.matching_ids() == set()
        assert (
            harness.store.get([make_chunk("doc-1").chunk_id], deadline=unrequested_deadline()) == []
        )

    def test_upsert_round_trips_every_field(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        assert harness.store.count(None, unrequested_deadline()) == len(corpus)
        for chunk in corpus:
            assert harness.get_one(chunk.chunk_id) == stored(chunk)

    # -- two-phase fetch: a search reads SEARCH_FIELDS, `get` whole rows ------

    def test_search_hits_carry_the_first_phase_fields(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        by_id = {chunk.chunk_id: stored(chunk) for chunk in corpus}
        hits = harness.search()
        assert len(hits) == len(corpus)
        for hit in hits:
            whole = by_id[hit.chunk.chunk_id]
            assert _first_phase(hit.chunk) == _first_phase(whole)
            if hit.chunk.partial:  # nothing else: an empty field is never a stale one
                assert _second_phase(hit.chunk) == ("", "", "", "", "")
            else:
                assert hit.chunk == whole

    def test_get_completes_search_hits_into_whole_rows(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        ids = [hit.chunk.chunk_id for hit in harness.search()]
        rows = harness.store.get(ids, Deadline.after(30.0))
        assert sorted(rows, key=lambda row: row.chunk_id) == sorted(
            (stored(chunk) for chunk in corpus), key=lambda row: row.chunk_id
        )
        assert not any(row.partial for row in rows)

    def test_a_passed_deadline_stops_get_before_it_starts(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1")
        harness.upsert([chunk])
        with pytest.raises(DeadlineExceeded, match="no time left"):
            harness.store.get([chunk.chunk_id], Deadline.after(-0.001))
        assert harness.store.get([chunk.chunk_id], Deadline.after(30.0)) == [stored(chunk)]

    # -- deadlines: a passed one stops every call before it starts -------------

    def test_a_passed_deadline_stops_count_and_each_write_before_it_starts(
        self, harness: StoreHarness
    ) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        before = harness.rows()
        passed = Deadline.after(-0.001)
        renamed = payload_of(corpus[0], title="Renamed")
        calls = {
            "count": lambda: harness.store.count(EVERYWHERE, passed),
            "upsert": lambda: harness.upsert([make_chunk("doc-new")], deadline=passed),
            "update_payload": lambda: harness.store.update_payload(
                [(corpus[0].chunk_id, renamed)], passed
            ),
            "delete": lambda: harness.store.delete([corpus[1].chunk_id], passed),
        }
        for name, call in calls.items():
            with pytest.raises(DeadlineExceeded, match="no time left"):
                call()
            assert harness.rows() == before, f"{name} wrote although no time was left"

    def test_writes_and_counts_with_time_left_do_what_they_do_without(
        self, harness: StoreHarness
    ) -> None:
        corpus = filter_corpus()
        ample = Deadline.after(30.0)
        harness.upsert(corpus, deadline=ample)
        for scope in SCOPE_CASES.values():
            assert harness.store.count(scope, ample) == harness.store.count(
                scope, deadline=unrequested_deadline()
            ), scope
        renamed = payload_of(corpus[0], title="Renamed")
        harness.store.update_payload([(corpus[0].chunk_id, renamed)], ample)
        harness.store.delete([corpus[1].chunk_id], ample)
        expected = [stored(chunk) for chunk in corpus if chunk is not corpus[1]]
        expected[0] = replace(expected[0], title="Renamed")
        assert harness.rows() == sorted(expected, key=lambda row: row.chunk_id)

    def test_reupsert_is_idempotent(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        harness.upsert(corpus)
        harness.upsert([corpus[0], corpus[0]])  # a duplicate inside one batch too
        assert harness.store.count(None, unrequested_deadline()) == len(corpus)
        assert harness.matching_ids() == {chunk.chunk_id for chunk in corpus}

    def test_reupsert_replaces_a_changed_chunk(self, harness: StoreHarness) -> None:
        original = make_chunk("doc-1", title="Old title")
        harness.upsert([original])
        changed = make_chunk("doc-1", text=f"{COMMON_WORD} rewritten body", title="New title")
        assert changed.chunk_id == original.chunk_id
        harness.upsert([changed])
        assert harness.store.count(None, unrequested_deadline()) == 1
        assert harness.get_one(changed.chunk_id) == stored(changed)

    def test_update_payload_rewrites_fields_and_keeps_the_text(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1", metadata={"product": "api", "tier": "free"})
        harness.upsert([chunk])
        payload = payload_of(
            chunk,
            url="https://example.test/moved",
            title="Renamed",
            heading_path="Guide > Moved",
            scope_id="site-z",
            locale="fr",
            metadata={"product": "cli"},
        )
        harness.store.update_payload([(chunk.chunk_id, payload)], deadline=unrequested_deadline())
        got = harness.get_one(chunk.chunk_id)
        assert (got.url, got.title, got.heading_path) == (payload.url, "Renamed", "Guide > Moved")
        assert (got.scope_id, got.locale, got.metadata) == ("site-z", "fr", {"product": "cli"})
        assert (got.text, got.content_hash) == (chunk.text, chunk.content_hash)
        assert (got.doc_id, got.position) == (chunk.doc_id, chunk.position)

    def test_update_payload_moves_the_chunk_between_filters(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1", metadata={"product": "api", "tier": "free"})
        harness.upsert([chunk])
        payload = payload_of(chunk, scope_id="site-z", locale="fr", metadata={"product": "cli"})
        harness.store.update_payload([(chunk.chunk_id, payload)], deadline=unrequested_deadline())
        for scope in (
            ScopeFilter(scope_id="site-z"),
            ScopeFilter(locale="fr"),
            ScopeFilter(metadata=(("product", "cli"),)),
        ):
            assert harness.matching_ids(scope) == {chunk.chunk_id}, scope
            assert harness.store.count(scope, deadline=unrequested_deadline()) == 1
        for scope in (
            ScopeFilter(scope_id="site-a"),
            ScopeFilter(metadata=(("product", "api"),)),
            ScopeFilter(metadata=(("tier", "free"),)),  # a dropped key must not linger
        ):
            assert harness.matching_ids(scope) == set(), scope

    def test_update_payload_ignores_unknown_ids(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1")
        harness.upsert([chunk])
        ghost = make_chunk("doc-ghost")
        harness.store.update_payload(
            [(ghost.chunk_id, payload_of(ghost))], deadline=unrequested_deadline()
        )
        assert harness.store.count(None, unrequested_deadline()) == 1
        assert harness.store.get([ghost.chunk_id], deadline=unrequested_deadline()) == []

    def test_delete_removes_chunks_and_ignores_missing_ids(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        doomed = [corpus[0].chunk_id, corpus[3].chunk_id, make_chunk("doc-ghost").chunk_id]
        harness.store.delete(doomed, deadline=unrequested_deadline())
        harness.store.delete([], deadline=unrequested_deadline())
        remaining = {chunk.chunk_id for chunk in corpus} - set(doomed)
        assert harness.store.count(None, unrequested_deadline()) == len(remaining)
        assert harness.matching_ids() == remaining
        assert harness.store.get(doomed, deadline=unrequested_deadline()) == []

    @pytest.mark.parametrize("case", sorted(SCOPE_CASES))
    def test_filters_follow_the_reference(self, harness: StoreHarness, case: str) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        scope = SCOPE_CASES[case]
        expected = {chunk.chunk_id for chunk in corpus if reference_match(chunk, scope)}
        assert harness.matching_ids(scope) == expected
        assert harness.store.count(scope, deadline=unrequested_deadline()) == len(expected)

    def test_filters_narrow_without_changing_scores(self, harness: StoreHarness) -> None:
        harness.upsert(filter_corpus())
        unfiltered = {hit.chunk.chunk_id: hit.score for hit in harness.search()}
        filtered = harness.search(SCOPE_CASES["everything"])
        assert filtered
        for hit in filtered:
            assert hit.score == pytest.approx(unfiltered[hit.chunk.chunk_id], rel=1e-6)

    # -- generations: rows of uncommitted runs stay invisible ------------------

    def test_get_reads_back_the_generation_and_content_hash(self, harness: StoreHarness) -> None:
        """An undo leaves alone rows a crashed run never wrote by reading both
        back (services.indexer.transactions): a store that lost either would
        have a written row taken for an untouched one."""
        chunk = make_chunk("doc-gen-read", generation=7)
        harness.upsert([chunk])
        got = harness.get_one(chunk.chunk_id)
        assert (got.generation, got.content_hash) == (7, chunk.content_hash)
        assert chunk.content_hash

    def test_visible_generation_hides_rows_of_later_runs(self, harness: StoreHarness) -> None:
        # Far above any run count: an int32 or a float32 would lose it.
        huge = 2**40
        runs = {g: make_chunk(f"doc-gen-{g}", generation=g) for g in (0, 1, 2, 3, huge)}
        other = make_chunk("doc-gen-other", scope_id="site-b", generation=1)
        harness.upsert([*runs.values(), other])
        ids = {g: chunk.chunk_id for g, chunk in runs.items()}
        every = {*ids.values(), other.chunk_id}
        cases: list[tuple[ScopeFilter, set[str]]] = [
            (ScopeFilter(visible_generation=0), {ids[0]}),
            (ScopeFilter(visible_generation=1), {ids[0], ids[1], other.chunk_id}),
            (ScopeFilter(visible_generation=2), {ids[0], ids[1], ids[2], other.chunk_id}),
            (ScopeFilter(visible_generation=huge - 1), every - {ids[huge]}),
            (ScopeFilter(visible_generation=huge), every),
            (ScopeFilter(), every),
            (ScopeFilter(scope_id="site-a", visible_generation=1), {ids[0], ids[1]}),
            (
                ScopeFilter(scope_id="site-a", visible_generation=3),
                {ids[0], ids[1], ids[2], ids[3]},
            ),
            (ScopeFilter(scope_id="site-b", visible_generation=0), set()),
            (ScopeFilter(scope_id="site-b", visible_generation=1), {other.chunk_id}),
            (ScopeFilter(doc_ids=("doc-gen-3", "doc-gen-0"), visible_generation=2), {ids[0]}),
        ]
        for scope, expected in cases:
            assert harness.matching_ids(scope) == expected, scope
            assert harness.store.count(scope, deadline=unrequested_deadline()) == len(expected), (
                scope
            )

    def test_a_payload_rewrite_moves_a_row_across_the_generation_limit(
        self, harness: StoreHarness
    ) -> None:
        chunk = make_chunk("doc-1", generation=1)
        kept = make_chunk("doc-2", generation=1)
        harness.upsert([chunk, kept])
        both = {chunk.chunk_id, kept.chunk_id}
        committed = ScopeFilter(visible_generation=1)
        in_scope = ScopeFilter(scope_id="site-a", visible_generation=1)
        assert harness.matching_ids(committed) == both

        # A later, uncommitted run rewrites the payload: hidden at once.
        harness.store.update_payload(
            [(chunk.chunk_id, payload_of(chunk, generation=2))], deadline=unrequested_deadline()
        )
        for scope in (committed, in_scope):
            assert harness.matching_ids(scope) == {kept.chunk_id}, scope
            assert harness.store.count(scope, deadline=unrequested_deadline()) == 1, scope
        assert harness.matching_ids(ScopeFilter(visible_generation=2)) == both
        assert harness.matching_ids() == both
        assert harness.get_one(chunk.chunk_id) == replace(stored(chunk), generation=2)

        # Its recovery writes the old generation back: visible again, unchanged.
        harness.store.update_payload(
            [(chunk.chunk_id, payload_of(chunk, generation=1))], deadline=unrequested_deadline()
        )
        for scope in (committed, in_scope):
            assert harness.matching_ids(scope) == both, scope
            assert harness.store.count(scope, deadline=unrequested_deadline()) == 2, scope
        assert harness.get_one(chunk.chunk_id) == stored(chunk)

    # -- scan: every row, whatever its generation -----------------------------

    def test_scan_returns_every_row_once_in_pages_of_the_batch(self, harness: StoreHarness) -> None:
        corpus = [
            make_chunk(
                f"doc-scan-{n // 2}",
                n % 2,
                scope_id=("site-a", "site-b")[n % 3 == 0],
                locale=("en", "de")[n % 4 == 0],
                metadata={"n": str(n)},
                generation=(0, 1, 5, 10**6)[n % 4],
            )
            for n in range(10)
        ]
        harness.upsert(corpus)
        # A search limited to generation 1 sees 6 of them; a scan sees all 10.
        committed = {chunk.chunk_id for chunk in corpus if chunk.generation <= 1}
        assert len(committed) == 6
        assert harness.matching_ids(ScopeFilter(visible_generation=1)) == committed
        pages = list(harness.store.scan(batch=3))
        assert [len(page) for page in pages] == [3, 3, 3, 1]
        rows = [row for page in pages for row in page]
        ids = [row.chunk_id for row in rows]
        assert len(ids) == len(set(ids)), f"a row came back twice: {ids}"
        expected = sorted((stored(chunk) for chunk in corpus), key=lambda c: c.chunk_id)
        assert sorted(rows, key=lambda c: c.chunk_id) == expected
        by_id = {row.chunk_id: row for row in rows}
        for chunk in corpus:
            got = by_id[chunk.chunk_id]
            assert (got.doc_id, got.content_hash, got.generation, got.text) == (
                chunk.doc_id,
                chunk.content_hash,
                chunk.generation,
                chunk.text,
            )
        # One page when the batch holds them all.
        [whole] = list(harness.store.scan())
        assert sorted(whole, key=lambda c: c.chunk_id) == expected

    def test_scan_follows_writes_and_an_empty_store_has_no_page(
        self, harness: StoreHarness
    ) -> None:
        assert list(harness.store.scan(batch=3)) == []
        corpus = [make_chunk(f"doc-{n}", generation=n) for n in range(7)]
        harness.upsert(corpus)
        harness.store.delete(
            [corpus[0].chunk_id, corpus[4].chunk_id], deadline=unrequested_deadline()
        )
        rewritten = payload_of(corpus[5], title="Rewritten", generation=9)
        harness.store.update_payload(
            [(corpus[5].chunk_id, rewritten)], deadline=unrequested_deadline()
        )
        pages = list(harness.store.scan(batch=3))
        assert [len(page) for page in pages] == [3, 2]
        rows = sorted((row for page in pages for row in page), key=lambda c: c.chunk_id)
        expected = [stored(chunk) for chunk in corpus if chunk not in (corpus[0], corpus[4])]
        expected = [
            replace(row, title="Rewritten", generation=9)
            if row.chunk_id == corpus[5].chunk_id
            else row
            for row in expected
        ]
        assert rows == sorted(expected, key=lambda c: c.chunk_id)

    def test_get_skips_missing_ids_and_repeats(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        wanted = [corpus[1].chunk_id, "no-such-chunk", corpus[1].chunk_id, corpus[2].chunk_id]
        found = harness.store.get(wanted, deadline=unrequested_deadline())
        assert sorted(c.chunk_id for c in found) == sorted([corpus[1].chunk_id, corpus[2].chunk_id])
        assert harness.store.get([], deadline=unrequested_deadline()) == []

    def test_search_respects_the_limit(self, harness: StoreHarness) -> None:
        harness.upsert(filter_corpus())
        assert len(harness.search(limit=3)) == 3
        assert harness.search(limit=0) == []

    def test_a_deadline_with_time_left_changes_nothing(self, harness: StoreHarness) -> None:
        harness.upsert(filter_corpus())
        plenty = Deadline.after(30.0)
        assert _ranked(harness.search(deadline=plenty)) == _ranked(harness.search())

    def test_a_passed_deadline_stops_the_search_before_it_starts(
        self, harness: StoreHarness
    ) -> None:
        harness.upsert(filter_corpus())
        with pytest.raises(DeadlineExceeded, match="no time left"):
            harness.search(deadline=Deadline.after(-0.001))
        if not harness.is_vector:
            plan = harness.store.analyzer.plan(COMMON_WORD)
            with pytest.raises(DeadlineExceeded):
                harness.store.search_plan(plan, ENOUGH, EVERYWHERE, Deadline.after(0.0))

    def test_results_are_best_first_and_deterministic(self, harness: StoreHarness) -> None:
        harness.upsert(filter_corpus())
        first = [(hit.chunk.chunk_id, hit.score) for hit in harness.search()]
        scores = [score for _, score in first]
        assert scores == sorted(scores, reverse=True)
        assert all(math.isfinite(score) for score in scores)
        assert [(hit.chunk.chunk_id, hit.score) for hit in harness.search()] == first

    def test_reopening_keeps_every_write(self, harness: StoreHarness) -> None:
        corpus = filter_corpus()
        harness.upsert(corpus)
        renamed = payload_of(corpus[2], title="Renamed before restart")
        harness.store.update_payload(
            [(corpus[2].chunk_id, renamed)], deadline=unrequested_deadline()
        )
        harness.store.delete([corpus[0].chunk_id], deadline=unrequested_deadline())
        harness.reopen()
        assert harness.store.count(None, unrequested_deadline()) == len(corpus) - 1
        assert harness.store.get([corpus[0].chunk_id], deadline=unrequested_deadline()) == []
        assert harness.get_one(corpus[2].chunk_id).title == "Renamed before restart"
        assert harness.get_one(corpus[1].chunk_id) == stored(corpus[1])

    def test_a_closed_store_is_unavailable(self, harness: StoreHarness) -> None:
        harness.store.close()
        with pytest.raises(StoreUnavailable):
            harness.store.ping()
        harness.store.close()  # closing twice is harmless


class VectorStoreContract(StoreContract):
    """Cosine-similarity search specifics."""

    def test_scores_are_cosine_similarities_best_first(self, harness: StoreHarness) -> None:
        names = ("same", "diagonal", "orthogonal", "opposite")
        axis = [make_chunk(f"doc-{name}") for name in names]
        vectors = [_vec(1, 0), _vec(1, 1), _vec(0, 1), _vec(-1, 0)]
        harness.upsert(axis, vectors)
        hits = harness.store.search(
            _vec(3, 0), 10, ScopeFilter(), deadline=unrequested_deadline()
        )  # length must not matter
        assert [hit.chunk.chunk_id for hit in hits] == [chunk.chunk_id for chunk in axis]
        expected = [1.0, math.sqrt(0.5), 0.0, -1.0]
        assert [hit.score for hit in hits] == pytest.approx(expected, abs=1e-5)

    def test_search_many_answers_each_query_as_search_does(self, harness: StoreHarness) -> None:
        harness.upsert(filter_corpus())
        queries = [
            VectorQuery(PROBE_VECTOR, 5, EVERYWHERE),
            VectorQuery(_vec(0.0, 1.0), 3, ScopeFilter(scope_id="site-b")),
            VectorQuery(PROBE_VECTOR, 0, EVERYWHERE),  # nothing asked, nothing found
            VectorQuery(_vec(1.0, 0.2), 4, ScopeFilter(locale="de")),
        ]
        batched = harness.store.search_many(queries, Deadline.after(30.0))
        one_by_one = [
            harness.store.search(q.vector, q.limit, q.scope, deadline=unrequested_deadline())
            for q in queries
        ]
        assert [_ranked(hits) for hits in batched] == [_ranked(hits) for hits in one_by_one]
        assert [len(hits) for hits in batched][:3] == [5, 3, 0]
        assert harness.store.search_many([], deadline=unrequested_deadline()) == []
        with pytest.raises(DeadlineExceeded):
            harness.store.search_many(queries, Deadline.after(-1.0))

    def test_equal_scores_are_ordered_by_chunk_id(self, harness: StoreHarness) -> None:
        twins = [make_chunk(f"doc-twin-{n}") for n in range(5)]
        harness.upsert(twins, [_vec(1, 2)] * len(twins))
        hits = harness.store.search(_vec(1, 0), 10, ScopeFilter(), deadline=unrequested_deadline())
        assert [hit.chunk.chunk_id for hit in hits] == sorted(chunk.chunk_id for chunk in twins)

    def test_filtered_search_ranks_within_the_scope(self, harness: StoreHarness) -> None:
        best = make_chunk("doc-best", scope_id="site-a")
        inside = make_chunk("doc-inside", scope_id="site-b")
        harness.upsert([best, inside], [_vec(1, 0), _vec(1, 1)])
        hits = harness.store.search(
            _vec(1, 0), 1, ScopeFilter(scope_id="site-b"), deadline=unrequested_deadline()
        )
        assert [hit.chunk.chunk_id for hit in hits] == [inside.chunk_id]

    def test_update_payload_keeps_the_vector(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1")
        harness.upsert([chunk], [_vec(1, 1)])
        harness.store.update_payload(
            [(chunk.chunk_id, payload_of(chunk, title="Renamed"))], deadline=unrequested_deadline()
        )
        [hit] = harness.store.search(
            PROBE_VECTOR, 10, ScopeFilter(), deadline=unrequested_deadline()
        )
        assert hit.score == pytest.approx(math.sqrt(0.5), abs=1e-5)
        assert harness.get_one(chunk.chunk_id).title == "Renamed"

    def test_stored_vectors_come_back_unit_length_by_chunk_id(self, harness: StoreHarness) -> None:
        chunks = [make_chunk("doc-1"), make_chunk("doc-2")]
        harness.upsert(chunks, [_vec(3, 4), _vec(0, 2)])
        ghost = make_chunk("doc-ghost").chunk_id
        got = harness.store.vectors(
            [chunks[0].chunk_id, chunks[1].chunk_id, ghost], deadline=unrequested_deadline()
        )
        assert set(got) == {chunks[0].chunk_id, chunks[1].chunk_id}
        assert got[chunks[0].chunk_id] == pytest.approx(_vec(0.6, 0.8), abs=1e-6)
        assert got[chunks[1].chunk_id] == pytest.approx(_vec(0, 1), abs=1e-6)
        assert harness.store.vectors([], deadline=unrequested_deadline()) == {}

    def test_reading_vectors_keeps_to_the_deadline(self, harness: StoreHarness) -> None:
        chunks = [make_chunk("doc-1"), make_chunk("doc-2")]
        harness.upsert(chunks, [_vec(3, 4), _vec(0, 2)])
        ids = [chunk.chunk_id for chunk in chunks]
        with pytest.raises(DeadlineExceeded, match="no time left"):
            harness.store.vectors(ids, Deadline.after(-0.001))
        assert harness.store.vectors(ids, Deadline.after(30.0)) == harness.store.vectors(
            ids, deadline=unrequested_deadline()
        )

    def test_mismatched_vectors_are_rejected(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1")
        with pytest.raises(RagError):
            harness.store.upsert([chunk], [], deadline=unrequested_deadline())
        with pytest.raises(RagError):
            harness.store.upsert([chunk], [[1.0] * (DIM + 1)], deadline=unrequested_deadline())
        assert harness.store.count(None, unrequested_deadline()) == 0


def _ranked(hits: list[ScoredChunk]) -> list[tuple[str, float]]:
    return [(hit.chunk.chunk_id, round(hit.score, 6)) for hit in hits]


def _vec(x: float, y: float) -> list[float]:
    return [float(x), float(y)] + [0.0] * (DIM - 2)


class LexicalStoreContract(StoreContract):
    """BM25 specifics: ranking, field weights, stemming."""

    def test_denser_match_ranks_first(self, harness: StoreHarness) -> None:
        dense = make_chunk("doc-dense", text="kubernetes pods: kubernetes scheduling in kubernetes")
        sparse = make_chunk("doc-sparse", text="a long note that mentions kubernetes once " * 3)
        harness.upsert([sparse, dense])
        hits = harness.store.search(
            "kubernetes", 10, ScopeFilter(), deadline=unrequested_deadline()
        )
        assert [hit.chunk.chunk_id for hit in hits] == [dense.chunk_id, sparse.chunk_id]
        assert hits[0].score > hits[1].score > 0

    def test_a_title_match_adds_to_a_body_match(self, harness: StoreHarness) -> None:
        # The same body; only one title names the word. (At the default weights
        # a body match alone outweighs a title match alone: lexical_fields.)
        in_both = make_chunk("doc-both", title="Webhooks", text="how webhooks reach you")
        in_body = make_chunk("doc-body", title="Events", text="how webhooks reach you")
        in_title = make_chunk("doc-title", title="Webhooks", text="how events reach you")
        harness.upsert([in_body, in_title, in_both])
        hits = harness.store.search("webhooks", 10, ScopeFilter(), deadline=unrequested_deadline())
        assert [hit.chunk.chunk_id for hit in hits] == [
            in_both.chunk_id,
            in_body.chunk_id,
            in_title.chunk_id,
        ]

    def test_heading_path_is_searchable(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1", heading_path="Guide > Troubleshooting", text="see below")
        harness.upsert([chunk, make_chunk("doc-2")])
        hits = harness.store.search(
            "troubleshooting", 10, ScopeFilter(), deadline=unrequested_deadline()
        )
        assert [hit.chunk.chunk_id for hit in hits] == [chunk.chunk_id]

    def test_english_stemming_matches_word_forms(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1", text="The service was configured to retry requests.")
        harness.upsert([chunk, make_chunk("doc-2")])
        for query in ("configuring", "configuration", "retries", "request"):
            hits = harness.store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
            assert [hit.chunk.chunk_id for hit in hits] == [chunk.chunk_id], query

    def test_update_payload_keeps_the_text_searchable(self, harness: StoreHarness) -> None:
        chunk = make_chunk("doc-1", title="Quarterly report", text="revenue grew strongly")
        harness.upsert([chunk])
        payload = payload_of(chunk, title="Annual summary")
        harness.store.update_payload([(chunk.chunk_id, payload)], deadline=unrequested_deadline())
        assert _ids(harness, "revenue") == [chunk.chunk_id]
        assert _ids(harness, "annual") == [chunk.chunk_id]
        assert _ids(harness, "quarterly") == []

    def test_unknown_words_find_nothing(self, harness: StoreHarness) -> None:
        harness.upsert(filter_corpus())
        assert (
            harness.store.search("zyzzyva", 10, ScopeFilter(), deadline=unrequested_deadline())
            == []
        )

    def test_search_plan_finds_what_search_finds(self, harness: StoreHarness) -> None:
        """The Retriever passes the plan it already made (the store's own
        analyzer): the same hits, scores and exact identifiers as the text."""
        harness.upsert(filter_corpus())
        harness.upsert([make_chunk("doc-exact", text="HTTP 429 from text-embedding-v4.")])
        analyzer = harness.store.analyzer
        for query in (COMMON_WORD, "429 text-embedding-v4", "zyzzyva", "the"):
            for scope in (ScopeFilter(), ScopeFilter(visible_generation=10**9)):
                expected = harness.store.search(query, 10, scope, deadline=unrequested_deadline())
                assert (
                    harness.store.search_plan(
                        analyzer.plan(query), 10, scope, deadline=unrequested_deadline()
                    )
                    == expected
                )

    # -- exact identifiers and CJK text (one analysis in every store) ---------

    def test_exact_identifier_outranks_word_matches(self, harness: StoreHarness) -> None:
        wordy = make_chunk(
            "doc-wordy",
            title="Text embedding",
            text="Text embedding models embed text: embedding text well needs a text model.",
        )
        exact = make_chunk("doc-exact", title="Models", text="New projects use text-embedding-v4.")
        harness.upsert([wordy, exact])
        hits = harness.store.search(
            "text-embedding-v4", 10, ScopeFilter(), deadline=unrequested_deadline()
        )
        assert [hit.chunk.doc_id for hit in hits] == ["doc-exact", "doc-wordy"]
        assert [hit.exact for hit in hits] == [("text-embedding-v4",), ()]
        assert 0 < hits[0].score < 100  # BM25 alone: the exact boost is not reported
        # `exact` is read from the text, so an identifier query reads whole rows.
        assert [hit.chunk for hit in hits] == [stored(exact), stored(wordy)]

    def test_more_identifiers_held_rank_higher(self, harness: StoreHarness) -> None:
        one = make_chunk("doc-one", text="HTTP 429 means slow down; 429 429 429.")
        both = make_chunk("doc-both", text="E1042 comes with HTTP 429.")
        harness.upsert([one, both])
        assert _docs(harness, "429 E1042") == ["doc-both", "doc-one"]

    def test_after_the_best_exact_holder_bm25_decides(self, harness: StoreHarness) -> None:
        wordy = make_chunk("doc-wordy", text="rate limit: the rate limit and rate limit errors")
        holder = make_chunk("doc-holder", text="HTTP 429 when over the rate limit")
        terse = make_chunk("doc-terse", text="see 429")
        harness.upsert([wordy, holder, terse])
        hits = harness.store.search(
            "429 rate limit", 10, ScopeFilter(), deadline=unrequested_deadline()
        )
        assert hits[0].chunk.doc_id == "doc-holder"  # holds 429, best BM25 of the holders
        rest = [hit.score for hit in hits[1:]]
        assert rest == sorted(rest, reverse=True) and len(rest) == 2

    def test_a_near_miss_is_not_an_exact_match(self, harness: StoreHarness) -> None:
        near = make_chunk("doc-near", text="Error 4290 and text-embedding-v3 are different.")
        harness.upsert([near, make_chunk("doc-other")])
        hits = harness.store.search(
            "429 text-embedding-v4", 10, ScopeFilter(), deadline=unrequested_deadline()
        )
        assert all(hit.exact == () for hit in hits)

    def test_identifier_parts_are_exact_forms(self, harness: StoreHarness) -> None:
        setting = make_chunk("doc-setting", text="Set `chunkSize=800` in config/indexer.yaml.")
        other = make_chunk("doc-other", text="The chunk size and the indexer configuration.")
        harness.upsert([other, setting])
        for query in ("chunkSize", "chunksize=800", "indexer.yaml", "800"):
            assert _docs(harness, query)[0] == "doc-setting", query

    def test_full_width_identifiers_are_exact_and_scored_like_others(
        self, harness: StoreHarness
    ) -> None:
        wide = make_chunk(
            "doc-wide", locale="ja", text="レート制限を超えると ４２９ エラーになります。"
        )
        plain = make_chunk("doc-plain", text="Too many requests: status 429.")
        harness.upsert([wide, plain])
        hits = harness.store.search("429", 10, ScopeFilter(), deadline=unrequested_deadline())
        assert {hit.chunk.doc_id: hit.exact for hit in hits} == {
            "doc-wide": ("429",),
            "doc-plain": ("429",),
        }
        assert all(hit.score < 100 for hit in hits)  # the boost is never reported

    def test_chinese_questions_match_segmented_words(self, harness: StoreHarness) -> None:
        limits = make_chunk(
            "doc-limits",
            locale="zh-CN",
            title="限流",
            text="每个密钥每分钟最多发送六十个请求，超出后返回错误。",
        )
        billing = make_chunk(
            "doc-billing", locale="zh-CN", title="计费", text="按调用次数计费，每月结算一次。"
        )
        harness.upsert([limits, billing])
        assert _docs(harness, "每分钟能发多少请求") == ["doc-limits"]
        assert _docs(harness, "怎么结算") == ["doc-billing"]

    def test_mixed_text_works_both_ways(self, harness: StoreHarness) -> None:
        zh = make_chunk("doc-zh", locale="zh-CN", text="将 chunkSize 设置为 800 可以减少分块数量。")
        en = make_chunk("doc-en", text="Retries use exponential backoff with jitter.")
        harness.upsert([zh, en])
        assert _docs(harness, "chunkSize 怎么设置") == ["doc-zh"]
        assert _docs(harness, "分块 chunkSize") == ["doc-zh"]
        assert _docs(harness, "retries 指数退避 backoff") == ["doc-en"]

    def test_japanese_and_korean_match_by_bigrams(self, harness: StoreHarness) -> None:
        ja = make_chunk("doc-ja", locale="ja", text="レート制限を超えるとエラーになります。")
        ko = make_chunk("doc-ko", locale="ko", text="요청 한도를 초과하면 오류가 발생합니다.")
        harness.upsert([ja, ko])
        assert _docs(harness, "レート制限") == ["doc-ja"]
        assert _docs(harness, "요청 한도") == ["doc-ko"]


def _docs(harness: StoreHarness, query: str) -> list[str]:
    return [
        hit.chunk.doc_id
        for hit in harness.store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    ]


def _ids(harness: StoreHarness, query: str) -> list[str]:
    return [
        hit.chunk.chunk_id
        for hit in harness.store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    ]


def _first_phase(row: StoredChunk) -> tuple[object, ...]:
    """The fields every search reads (services.storage.payload.SEARCH_FIELDS)."""
    return (
        row.chunk_id,
        row.doc_id,
        row.position,
        row.scope_id,
        row.locale,
        row.metadata,
        row.generation,
    )


def _second_phase(row: StoredChunk) -> tuple[str, ...]:
    return (row.text, row.url, row.title, row.heading_path, row.content_hash)
