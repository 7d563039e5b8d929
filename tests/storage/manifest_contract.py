"""What every `Manifest` implementation must do (SQLite and OpenSearch alike).

Subclass `ManifestContract` and provide a `manifest_factory` fixture: a
callable that opens the manifest stored at a given path (the OpenSearch one
derives an index name from it), so reopening the same path sees the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.core.models import StoredChunk
from services.storage.base import unrequested_deadline
from services.storage.manifest import ManifestEntry, RunIntent

ManifestFactory = Callable[[Path], Any]


def entry(
    doc_id: str, locale: str = "en", scope_id: str = "docs", chunks: int = 2
) -> ManifestEntry:
    return ManifestEntry(
        doc_id=doc_id,
        locale=locale,
        scope_id=scope_id,
        content_hash=f"content-{doc_id}",
        metadata_hash=f"meta-{doc_id}",
        chunk_ids=tuple(f"{doc_id}#{n}" for n in range(chunks)),
        chunk_hashes=tuple(f"hash-{doc_id}-{n}" for n in range(chunks)),
        updated_at="2026-01-02T03:04:05Z",
    )


def intent(generation: int, doc_id: str, old: ManifestEntry | None = None) -> RunIntent:
    saved = StoredChunk(
        chunk_id=f"{doc_id}#0",
        doc_id=doc_id,
        position=0,
        text="the text as it was, 中文 too",
        url="https://x.invalid/a",
        title="T",
        heading_path="H",
        scope_id="docs",
        locale="en",
        content_hash="h0",
        metadata={"k": "v"},
        generation=generation - 1,
    )
    return RunIntent(generation, doc_id, "en", old, (f"{doc_id}#0", f"{doc_id}#1"), (saved,))


class ManifestContract:
    @pytest.fixture
    def manifest(self, manifest_factory: ManifestFactory, tmp_path: Path) -> Iterator[Any]:
        opened = manifest_factory(tmp_path / "manifest")
        yield opened
        opened.close()

    def test_put_then_get_round_trips_every_field(self, manifest) -> None:
        long_id = "https://docs.test/" + "a" * 700  # longer than an OpenSearch _id may be
        entries = [entry("guide/setup"), entry("guide/setup", "de"), entry(long_id, chunks=0)]
        manifest.put_many(entries, deadline=unrequested_deadline())
        assert manifest.get("guide/setup", "en", deadline=unrequested_deadline()) == entries[0]
        assert manifest.get_many(
            [(e.doc_id, e.locale) for e in entries] + [("x", "en")], deadline=unrequested_deadline()
        ) == {(e.doc_id, e.locale): e for e in entries}
        assert manifest.get("guide/setup", "fr", deadline=unrequested_deadline()) is None

    def test_put_replaces_an_entry(self, manifest) -> None:
        manifest.put_many([entry("a", chunks=3)], deadline=unrequested_deadline())
        changed = entry("a", scope_id="other", chunks=1)
        manifest.put_many([changed], deadline=unrequested_deadline())
        assert manifest.get("a", "en", deadline=unrequested_deadline()) == changed
        assert manifest.count(deadline=unrequested_deadline()) == 1

    def test_scope_locales_and_counts(self, manifest) -> None:
        manifest.put_many(
            [entry("b"), entry("a"), entry("a", "de", chunks=5), entry("c", scope_id="blog")],
            deadline=unrequested_deadline(),
        )
        assert list(manifest.keys_in_scope("docs", deadline=unrequested_deadline())) == [
            ("a", "de"),
            ("a", "en"),
            ("b", "en"),
        ]
        assert list(manifest.keys_in_scope("nowhere", deadline=unrequested_deadline())) == []
        assert manifest.locales_of("a", deadline=unrequested_deadline()) == ["de", "en"]
        assert manifest.locales_of("missing", deadline=unrequested_deadline()) == []
        assert manifest.count(deadline=unrequested_deadline()) == 4
        assert manifest.chunk_counts_by_locale(deadline=unrequested_deadline()) == {
            "en": 6,
            "de": 5,
        }

    def test_locales_in_a_scope_are_those_its_documents_hold_chunks_in(self, manifest) -> None:
        manifest.put_many(
            [
                entry("api", "en", scope_id="api"),
                entry("manual", "en", scope_id="site"),
                entry("manual", "zh-CN", scope_id="site"),
                entry("faq", "zh", scope_id="site"),
                entry("draft", "ja", scope_id="site", chunks=0),  # nothing to search in
            ],
            deadline=unrequested_deadline(),
        )
        ample = Deadline.after(30.0)
        assert manifest.locales_in([], [], ample) == ["en", "zh", "zh-CN"]
        assert manifest.locales_in(["api"], [], ample) == ["en"]
        assert manifest.locales_in(["site"], [], ample) == ["en", "zh", "zh-CN"]
        assert manifest.locales_in(["api", "site"], ["faq"], ample) == ["zh"]
        assert manifest.locales_in([], ["manual", "api"], ample) == ["en", "zh-CN"]
        assert manifest.locales_in(["api"], ["faq"], ample) == []
        assert manifest.locales_in(["nowhere"], [], ample) == []

    def test_delete_removes_entries(self, manifest) -> None:
        manifest.put_many([entry("a"), entry("b")], deadline=unrequested_deadline())
        manifest.delete_many([("a", "en"), ("never", "en")], deadline=unrequested_deadline())
        assert manifest.get("a", "en", deadline=unrequested_deadline()) is None
        assert [k for k in manifest.keys_in_scope("docs", deadline=unrequested_deadline())] == [
            ("b", "en")
        ]
        assert [e.doc_id for e in manifest.entries()] == ["b"]

    def test_intents_round_trip_until_their_run_is_settled(self, manifest) -> None:
        first, second = intent(1, "a", old=entry("a")), intent(2, "b", old=None)
        manifest.begin_run([first], deadline=unrequested_deadline())
        manifest.begin_run([second], deadline=unrequested_deadline())
        assert manifest.open_intents(deadline=unrequested_deadline()) == [first, second]
        manifest.clear_intents(1, deadline=unrequested_deadline())
        assert manifest.open_intents(deadline=unrequested_deadline()) == [second]

    def test_commit_run_moves_entries_and_the_commit_point_together(self, manifest) -> None:
        manifest.put_many([entry("gone"), entry("a", chunks=1)], deadline=unrequested_deadline())
        manifest.begin_run(
            [intent(3, "a", old=entry("a", chunks=1)), intent(3, "gone")],
            deadline=unrequested_deadline(),
        )
        manifest.begin_run([intent(4, "later")], deadline=unrequested_deadline())
        manifest.commit_run(
            3, [entry("a", chunks=3)], [("gone", "en")], deadline=unrequested_deadline()
        )
        assert manifest.get("a", "en", deadline=unrequested_deadline()) == entry("a", chunks=3)
        assert manifest.get("gone", "en", deadline=unrequested_deadline()) is None
        assert manifest.get_meta("committed_generation", deadline=unrequested_deadline()) == "3"
        assert [i.generation for i in manifest.open_intents(deadline=unrequested_deadline())] == [4]

    def test_a_passed_deadline_stops_every_call_before_it_starts(self, manifest) -> None:
        manifest.put_many([entry("a"), entry("gone")], deadline=unrequested_deadline())
        manifest.set_meta("chunking", "{}", deadline=unrequested_deadline())
        manifest.begin_run([intent(2, "a", old=entry("a"))], deadline=unrequested_deadline())
        before = _state(manifest)
        passed = Deadline.after(-0.001)
        calls = {
            "get_many": lambda: manifest.get_many([("a", "en")], passed),
            "get_meta": lambda: manifest.get_meta("chunking", passed),
            "locales_in": lambda: manifest.locales_in(["docs"], [], passed),
            "put_many": lambda: manifest.put_many([entry("b")], passed),
            "delete_many": lambda: manifest.delete_many([("gone", "en")], passed),
            "begin_run": lambda: manifest.begin_run([intent(3, "b")], passed),
            "commit_run": lambda: manifest.commit_run(
                2, [entry("a", chunks=5)], [("gone", "en")], passed
            ),
            "clear_intents": lambda: manifest.clear_intents(2, passed),
            "set_meta": lambda: manifest.set_meta("chunking", "changed", passed),
        }
        for name, call in calls.items():
            with pytest.raises(DeadlineExceeded, match="no time left"):
                call()
            assert _state(manifest) == before, f"{name} wrote although no time was left"

    def test_calls_with_time_left_do_what_they_do_without(self, manifest) -> None:
        ample = Deadline.after(30.0)
        manifest.put_many([entry("gone"), entry("a", chunks=1)], ample)
        manifest.begin_run([intent(3, "a", old=entry("a", chunks=1))], ample)
        manifest.begin_run([intent(4, "later")], ample)
        assert manifest.get_many([("a", "en")], ample) == {("a", "en"): entry("a", chunks=1)}
        manifest.commit_run(3, [entry("a", chunks=3)], [("gone", "en")], ample)
        assert manifest.get_meta("committed_generation", ample) == "3"
        assert [i.generation for i in manifest.open_intents(deadline=unrequested_deadline())] == [4]
        manifest.clear_intents(4, ample)
        manifest.set_meta("chunking", "{}", ample)
        manifest.delete_many([("a", "en")], ample)
        assert _state(manifest) == ([], "{}", [], "3")

    def test_meta_values_and_reopening(self, manifest_factory, tmp_path: Path) -> None:
        first = manifest_factory(tmp_path / "manifest")
        assert first.get_meta("chunking", deadline=unrequested_deadline()) is None
        first.set_meta("chunking", '{"target": 800}', deadline=unrequested_deadline())
        first.set_meta("chunking", '{"target": 600}', deadline=unrequested_deadline())
        first.put_many([entry("a")], deadline=unrequested_deadline())
        first.close()
        again = manifest_factory(tmp_path / "manifest")
        try:
            assert again.get_meta("chunking", deadline=unrequested_deadline()) == '{"target": 600}'
            assert again.get("a", "en", unrequested_deadline()) == entry("a")
        finally:
            again.close()

    def test_a_document_key_spans_scopes_and_the_planner_keeps_its_owner(self, manifest) -> None:
        """Identity is (doc_id, locale) in every manifest: a second scope
        asking for the same key finds the first scope's entry, and the
        Indexer's planner refuses to move or overwrite it (docs/security.md)."""
        from services.core.models import Document
        from services.indexer.chunking import Chunker
        from services.indexer.planning import DocState, Planner
        from services.indexer.validation import DocumentLimits

        manifest.put_many(
            [entry("architecture.md", scope_id="beta")], deadline=unrequested_deadline()
        )
        assert (
            manifest.get("architecture.md", "en", deadline=unrequested_deadline()).scope_id
            == "beta"
        )
        assert ("architecture.md", "en") not in set(
            manifest.keys_in_scope("alpha", deadline=unrequested_deadline())
        )
        planner = Planner(Chunker(), manifest, DocumentLimits())
        taker = Document(doc_id="architecture.md", text="# Taken\n\nNew body.", scope_id="alpha")
        owner = Document(doc_id="architecture.md", text="# Ours\n\nNew body.", scope_id="beta")
        taken, kept = planner.plan_upserts(
            [taker], deadline=unrequested_deadline()
        ) + planner.plan_upserts([owner], deadline=unrequested_deadline())
        assert (taken.state, taken.error_code) == (DocState.REJECTED, "ALREADY_EXISTS")
        assert kept.state == DocState.CHANGED


def _state(manifest: Any) -> tuple[object, ...]:
    """Everything a manifest call could change."""
    entries = sorted(manifest.entries(), key=lambda e: (e.doc_id, e.locale))
    return (
        entries,
        manifest.get_meta("chunking", deadline=unrequested_deadline()),
        manifest.open_intents(deadline=unrequested_deadline()),
        manifest.get_meta("committed_generation", deadline=unrequested_deadline()),
    )
