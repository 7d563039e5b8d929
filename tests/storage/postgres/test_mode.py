"""PostgreSQL mode as a whole: chosen by POSTGRES_URL, contradictions refused
naming the settings, the factory opening all three parts on a real server,
several writers at once, and BM25 that ranks like tantivy's."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from services.core.errors import ConfigError, StoreUnavailable
from services.core.models import ScopeFilter, ScoredChunk
from services.runtime.settings import load_settings
from services.storage.base import unrequested_deadline
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.factory import open_manifest, open_storage, open_stores
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.manifest import PostgresManifest
from services.storage.postgres.vectors import PostgresVectorStore
from services.storage.settings import StoreMode, StoreSettings
from services.storage.visibility import committed_generation
from tests.storage.harness import make_chunk
from tests.storage.manifest_contract import entry
from tests.storage.postgres.test_sql import _stats_drift
from tests.storage.store_env import assert_refused_naming
from tests.support.postgres import PostgresServer, drop_schema, running_postgres

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


# -- settings -----------------------------------------------------------------


def test_postgres_url_alone_selects_postgres_mode(env) -> None:
    env.setenv("POSTGRES_URL", "postgresql://rag:secret@db:5432/rag")
    settings = load_settings(StoreSettings)
    assert settings.resolved_mode() is StoreMode.POSTGRES
    assert settings.is_postgres and not settings.is_server
    assert (settings.postgres_schema, settings.postgres_pool_size) == ("rag", 8)
    assert "secret" not in repr(settings)  # the URL holds a password
    env.setenv("RAG_STORE_MODE", "postgres")
    assert load_settings(StoreSettings).is_postgres


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"RAG_STORE_MODE": "postgres"}, ["RAG_STORE_MODE=postgres", "POSTGRES_URL"]),
        (
            {"POSTGRES_URL": "postgresql://db/rag", "QDRANT_URL": "http://q"},
            ["POSTGRES_URL", "QDRANT_URL"],
        ),
        (
            {
                "POSTGRES_URL": "postgresql://db/rag",
                "QDRANT_URL": "http://q",
                "OPENSEARCH_URL": "http://o",
            },
            ["POSTGRES_URL", "QDRANT_URL and OPENSEARCH_URL"],
        ),
        (
            {"POSTGRES_URL": "postgresql://db/rag", "RAG_STORE_MODE": "embedded"},
            ["RAG_STORE_MODE=embedded", "POSTGRES_URL"],
        ),
        (
            {"POSTGRES_URL": "postgresql://db/rag", "RAG_STORE_MODE": "server"},
            ["RAG_STORE_MODE=server", "POSTGRES_URL"],
        ),
        ({"POSTGRES_URL": "postgresql://db/rag", "POSTGRES_SCHEMA": "Rag-1"}, ["POSTGRES_SCHEMA"]),
    ],
)
def test_contradictions_are_refused_naming_the_settings(env, variables, named) -> None:
    assert_refused_naming(env, variables, named)


def test_a_blank_postgres_url_counts_as_unset(env) -> None:
    env.setenv("POSTGRES_URL", " ")
    assert load_settings(StoreSettings).resolved_mode() is StoreMode.EMBEDDED


# -- the factory on a real server ---------------------------------------------


def test_the_factory_opens_all_three_parts_in_one_schema(
    env, postgres: PostgresServer, tmp_path: Path
) -> None:
    env.setenv("POSTGRES_URL", postgres.url)
    env.setenv("POSTGRES_SCHEMA", "t_factory")
    env.setenv("RAG_DATA_DIR", str(tmp_path / "unused"))
    settings = load_settings(StoreSettings)
    storage = open_storage(settings, dim=8)
    try:
        assert isinstance(storage.vectors, PostgresVectorStore)
        assert isinstance(storage.lexical, PostgresLexicalStore)
        assert isinstance(storage.manifest, PostgresManifest)
        storage.manifest.commit_run(3, [entry("doc-1")], [], deadline=unrequested_deadline())
        assert committed_generation(storage.manifest, unrequested_deadline()) == 3
    finally:
        storage.close()
        drop_schema(postgres.url, "t_factory")
    assert not (tmp_path / "unused").exists()  # nothing was written locally


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_server_is_reported_unavailable(env) -> None:
    env.setenv("POSTGRES_URL", f"postgresql://rag@127.0.0.1:{_closed_port()}/rag")
    env.setenv("POSTGRES_TIMEOUT_S", "1")
    settings = load_settings(StoreSettings)
    with pytest.raises(StoreUnavailable, match="postgres-vectors"):
        open_stores(settings, dim=8)
    with pytest.raises(StoreUnavailable, match="postgres-manifest"):
        open_manifest(settings)


# -- several writers, like several Indexer processes ---------------------------


def _write(store: PostgresLexicalStore, seed: int, errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    try:
        for _ in range(15):
            picked = rng.sample(range(30), 8)
            store.upsert(
                [make_chunk(f"doc-{n}", text=f"rate limit {rng.random()}") for n in picked],
                deadline=unrequested_deadline(),
            )
            store.delete(
                [make_chunk(f"doc-{rng.randrange(30)}").chunk_id], deadline=unrequested_deadline()
            )
    except BaseException as exc:
        errors.append(exc)


def _search(
    store: PostgresLexicalStore, stop: threading.Event, errors: list[BaseException]
) -> None:
    try:
        while not stop.is_set():
            store.search(
                "rate limit", 10, ScopeFilter(visible_generation=0), deadline=unrequested_deadline()
            )
    except BaseException as exc:
        errors.append(exc)


def test_concurrent_writers_keep_the_statistics_exact(postgres: PostgresServer) -> None:
    """Two stores (two pools, as two processes would have) rewrite overlapping
    chunks while a third searches: no deadlock, no error, no drift."""
    stores = [PostgresLexicalStore(postgres.url, "t_concurrent", pool_size=2) for _ in range(3)]
    errors: list[BaseException] = []
    stop = threading.Event()
    writers = [threading.Thread(target=_write, args=(stores[i], i, errors)) for i in range(2)]
    reader = threading.Thread(target=_search, args=(stores[2], stop, errors))
    try:
        for thread in [*writers, reader]:
            thread.start()
        for thread in writers:
            thread.join(timeout=120)
        stop.set()
        reader.join(timeout=30)
        assert errors == []
        with psycopg.connect(postgres.url) as conn:
            assert _stats_drift(conn, "t_concurrent") == []
    finally:
        for store in stores:
            store.close()
        drop_schema(postgres.url, "t_concurrent")


# -- ranking ------------------------------------------------------------------

WORDS = [
    *("rate", "limit", "gateway", "retry", "budget", "token", "kubernetes", "pod"),
    *("schedule", "error", "timeout", "network", "429", "text-embedding-v4"),
    *("chunkSize=800", "限流", "每分钟", "请求", "错误"),
]
QUERIES = (
    "rate limit",
    "kubernetes pod error",
    "text-embedding-v4",
    "429 gateway",
    "每分钟 请求",
    "chunkSize=800 timeout",
)


def test_bm25_ranks_like_tantivy(postgres: PostgresServer, tmp_path: Path) -> None:
    """Same analyzer, same formula: the same order; scores differ only by
    tantivy's one-byte field-length quantisation (measured < 0.3 %)."""
    rng = random.Random(1)
    chunks = [
        make_chunk(
            f"doc-{n}",
            text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60))),
            title=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))),
        )
        for n in range(300)
    ]
    tantivy = TantivyLexicalStore(tmp_path / "tantivy")
    store = PostgresLexicalStore(postgres.url, "t_parity", pool_size=1)
    try:
        tantivy.upsert(chunks, deadline=unrequested_deadline())
        store.upsert(chunks, deadline=unrequested_deadline())
        for query in QUERIES:
            want = tantivy.search(query, 20, ScopeFilter(), deadline=unrequested_deadline())
            got = store.search(query, 20, ScopeFilter(), deadline=unrequested_deadline())
            for mine, theirs in zip(got, want, strict=True):
                assert mine.score == pytest.approx(theirs.score, rel=0.01), query
                assert mine.exact == theirs.exact
            assert _ids_apart_from_near_ties(got, want), query
    finally:
        tantivy.close()
        store.close()
        drop_schema(postgres.url, "t_parity")


# -- outages --------------------------------------------------------------------


RECOVERY_S = 15  # the pools' reconnect window (5 s here) plus a margin for a loaded machine


def _eventually(call: Callable[[], object], within_s: float) -> object:
    """`call`'s result once it stops raising StoreUnavailable (as a replica
    retries the next request), failing after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_an_outage_is_unavailable_and_a_restart_heals_every_part() -> None:
    """A replica must ride out a database restart: while the server is down
    every part answers StoreUnavailable (never another error), and once it is
    back the pools replace their dead connections, without a restart of ours."""
    with running_postgres() as server:
        vectors = PostgresVectorStore(server.url, "t_outage", 8, pool_size=2, timeout_s=2)
        lexical = PostgresLexicalStore(server.url, "t_outage", pool_size=2, timeout_s=2)
        manifest = PostgresManifest(server.url, "t_outage", pool_size=2, timeout_s=2)
        chunk = make_chunk("doc-1")
        vectors.upsert([chunk], [[1.0] * 8], deadline=unrequested_deadline())
        lexical.upsert([chunk], deadline=unrequested_deadline())
        manifest.set_meta("committed_generation", "4", deadline=unrequested_deadline())
        calls: list[Callable[[], object]] = [
            lambda: [
                h.chunk.chunk_id
                for h in vectors.search(
                    [1.0] * 8, 5, ScopeFilter(), deadline=unrequested_deadline()
                )
            ],
            lambda: [
                h.chunk.chunk_id
                for h in lexical.search(
                    "conformance", 5, ScopeFilter(), deadline=unrequested_deadline()
                )
            ],
            lambda: manifest.get_meta("committed_generation", deadline=unrequested_deadline()),
        ]
        try:
            server.stop()
            for call in calls:
                with pytest.raises(StoreUnavailable):
                    call()
            server.start()
            healed = [_eventually(call, RECOVERY_S) for call in calls]
            assert healed == [[chunk.chunk_id], [chunk.chunk_id], "4"]
        finally:
            for part in (vectors, lexical, manifest):
                part.close()


def test_a_role_without_rights_is_told_what_to_run(postgres: PostgresServer) -> None:
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS rag_reader")
        conn.execute("CREATE ROLE rag_reader LOGIN")  # no CREATE on the database
    url = postgres.url.replace("postgres@", "rag_reader@", 1)
    with pytest.raises(ConfigError, match="CREATE EXTENSION vector"):
        PostgresVectorStore(url, "t_rights", 8, pool_size=1)


def _ids_apart_from_near_ties(got: list[ScoredChunk], want: list[ScoredChunk]) -> bool:
    """The same chunk at every position whose score stands apart from its
    neighbours' by more than the quantisation (1%); within a near-tie the two
    stores may order differently."""
    scores = [hit.score for hit in want]
    for pos, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        neighbours = scores[max(pos - 1, 0) : pos] + scores[pos + 1 : pos + 2]
        tied = any(abs(s - scores[pos]) <= 0.01 * abs(scores[pos]) for s in neighbours)
        if not tied and mine.chunk.chunk_id != theirs.chunk.chunk_id:
            return False
    return True
