"""Manifest round trips of one run, counted on the real manifests (SQLite,
and PostgreSQL on a real server): an upsert that changes the index makes at
most four (the open runs and the commit point together, the planner's read
of the entries, the intents, the commit with the run's counts), whatever
its batch's size; one that changes nothing makes three. The plan carries
the entries the planner read, so the intents never read them again.

`CountingManifest` is a counting wrapper around the real manifest, not a
fake: every call goes through to it unchanged, and the tests check what the
run left in the manifest too."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from services.core.models import ContentType, Document, ScopeFilter
from services.embedding.embedder import Embedder
from services.indexer.app import build_indexing_pipeline
from services.indexer.pipeline import IndexingPipeline
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest, open_storage, open_stores
from services.storage.manifest import Manifest
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage
from services.storage.visibility import committed_generation
from tests.support.postgres import PostgresServer, running_postgres

pytestmark = pytest.mark.integration

# A changing upsert: run_state, get_many, begin_run, commit_run.
CHANGING_RUN = ["run_state", "get_many", "begin_run", "commit_run"]
MAX_ROUND_TRIPS = 4


class CountingManifest:
    """Counting wrapper around a real `Manifest`: records the name of every
    method called on it (one call, one round trip), then calls the real one."""

    def __init__(self, inner: Manifest) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute) or name in ("close", "observe_write_retries"):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attribute(*args, **kwargs)

        return counted

    def counted_during(self, run: Callable[[], object]) -> list[str]:
        self.calls.clear()
        run()
        return list(self.calls)


def doc(doc_id: str, text: str, locale: str = "en") -> Document:
    return Document(
        doc_id=doc_id,
        text=text,
        url=f"https://example.org/{doc_id}",
        title=doc_id.title(),
        scope_id="docs",
        locale=locale,
        content_type=ContentType.MARKDOWN,
    )


BATCH = [
    doc(f"page-{n}", f"# Page {n}\n\nThe tundrafalcon guide, part {n}. " * 8) for n in range(6)
]


def pipeline_on(storage: Storage, embedder: Embedder) -> IndexingPipeline:
    settings = IndexerSettings(
        chunk_target_chars=300, chunk_overlap_chars=50, chunk_max_slack_chars=100
    )
    return build_indexing_pipeline(settings, embedder, storage)


def assert_round_trips(pipeline: IndexingPipeline, counting: CountingManifest) -> None:
    """Add a batch, change one document and remove one, then repeat the
    last batch unchanged: count each run's manifest calls, and check what
    each run committed."""
    added = counting.counted_during(lambda: pipeline.upsert(BATCH))
    assert added == CHANGING_RUN and len(added) <= MAX_ROUND_TRIPS
    changed = [doc("page-0", "# Page 0\n\nRewritten: the quasarmarmot atlas."), *BATCH[1:]]
    assert counting.counted_during(lambda: pipeline.upsert(changed)) == CHANGING_RUN
    unchanged = counting.counted_during(lambda: pipeline.upsert(changed))
    assert unchanged == ["run_state", "get_many", "set_meta"]
    removal = counting.counted_during(lambda: pipeline.delete(["page-5"], "en"))
    assert removal == CHANGING_RUN

    deadline = unrequested_deadline()
    manifest = counting.inner
    assert committed_generation(manifest, deadline) == 3
    assert manifest.open_intents(deadline) == []
    assert json.loads(manifest.get_meta("last_run", deadline) or "{}")["removed"] == 1
    assert manifest.count(deadline) == len(BATCH) - 1
    rewritten = manifest.get("page-0", "en", deadline)
    assert rewritten is not None
    visible = ScopeFilter(visible_generation=3)
    hits = pipeline.storage.lexical.search("quasarmarmot", 5, visible, unrequested_deadline())
    assert [hit.chunk.doc_id for hit in hits] == ["page-0"]
    assert pipeline.storage.lexical.count(ScopeFilter(doc_ids=("page-5",)), deadline) == 0


def test_an_upsert_makes_at_most_four_manifest_round_trips_on_sqlite(
    tmp_path: Path, embedder: Embedder
) -> None:
    settings = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(settings, embedder.dim)
    counting = CountingManifest(open_manifest(settings))
    storage = Storage(vectors, lexical, counting)  # type: ignore[arg-type]
    try:
        assert_round_trips(pipeline_on(storage, embedder), counting)
    finally:
        storage.close()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def test_an_upsert_makes_at_most_four_manifest_round_trips_on_postgres(
    postgres: PostgresServer, embedder: Embedder
) -> None:
    schema = "t_round_trips"
    settings = StoreSettings(POSTGRES_URL=postgres.url, POSTGRES_SCHEMA=schema)
    storage = open_storage(settings, embedder.dim)
    counting = CountingManifest(storage.manifest)
    storage.manifest = counting  # type: ignore[assignment]
    try:
        assert_round_trips(pipeline_on(storage, embedder), counting)
    finally:
        storage.close()
        with psycopg.connect(postgres.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
