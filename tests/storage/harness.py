"""Building blocks of the store conformance suite: factories, a corpus, a
reference filter oracle and a harness that drives either store kind alike.

A harness lets one test body exercise a vector store and a lexical store:
`matching_ids(scope)` asks the store for *every* chunk inside `scope` (a
vector probe with a large limit, or a word that every test chunk contains),
so filter semantics can be compared against `reference_match` — the single
definition of what a ScopeFilter means. Both kinds agreeing with the oracle
is what makes their semantics identical.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pytest

from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.indexer.identity import chunk_id, content_hash
from services.storage.base import unrequested_deadline
from services.storage.payload import payload_of_stored

DIM = 8
COMMON_WORD = "conformance"  # every corpus text contains it: the lexical "match all" probe
PROBE_VECTOR = [1.0] + [0.0] * (DIM - 1)
ENOUGH = 1000  # a search limit above any corpus size used here
EVERYWHERE = ScopeFilter()

StoreKind = Literal["vector", "lexical"]


@dataclass(frozen=True)
class StoreFactory:
    """How the suite opens one store implementation.

    `open(path)` must return the same data for the same path and an empty store
    for a fresh path (server factories derive a collection/index name from the
    path). `destroy(path)`, when given, removes what `open` created (server
    collections; tmp dirs clean themselves). `requires_env` names variables that
    must be set (e.g. QDRANT_URL) or the tests are skipped with that reason.
    """

    name: str
    kind: StoreKind
    open: Callable[[Path], Any]
    requires_env: tuple[str, ...] = ()
    destroy: Callable[[Path], None] | None = None

    def skip_reason(self) -> str | None:
        missing = [var for var in self.requires_env if not os.environ.get(var)]
        if not missing:
            return None
        return f"{self.name}: set {', '.join(missing)} to a live server to run this suite"


def factory_params(factories: Sequence[StoreFactory], *, none_reason: str) -> list[Any]:
    """pytest params for a factory fixture; unavailable servers become skips
    whose reason `pytest -rs` prints."""
    if not factories:
        skip = pytest.mark.skip(reason=none_reason)
        return [pytest.param(None, id="none-registered", marks=skip)]
    params = []
    for factory in factories:
        reason = factory.skip_reason()
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(factory, id=factory.name, marks=marks))
    return params


# -- corpus ------------------------------------------------------------------


def make_chunk(
    doc_id: str,
    index: int = 0,
    *,
    text: str = "",
    title: str = "",
    scope_id: str = "site-a",
    locale: str = "en",
    url: str = "",
    heading_path: str = "Guide > Setup",
    metadata: dict[str, str] | None = None,
    generation: int = 0,
) -> Chunk:
    body = text or f"{COMMON_WORD} text of {doc_id} part {index}"
    return Chunk(
        chunk_id=chunk_id(locale, doc_id, index),
        doc_id=doc_id,
        position=index,
        text=body,
        content_hash=content_hash(body),
        url=url or f"https://example.test/{doc_id}",
        title=title or f"Title of {doc_id}",
        heading_path=heading_path,
        scope_id=scope_id,
        locale=locale,
        metadata=dict(metadata or {}),
        generation=generation,
    )


def filter_corpus() -> list[Chunk]:
    """Chunks spread over scopes, locales, documents, urls, metadata and the
    generations (indexing runs) that wrote them, including the escaping trap
    `{"a=b": "c"}` versus `{"a": "b=c"}`."""
    return [
        make_chunk("doc-1", 0, metadata={"product": "api", "tier": "free"}),
        make_chunk("doc-1", 1, metadata={"product": "api", "tier": "free"}, generation=2),
        make_chunk("doc-2", 0, metadata={"product": "api", "tier": "pro"}, generation=1),
        make_chunk("doc-3", 0, scope_id="site-b", metadata={"product": "cli"}, generation=3),
        make_chunk("doc-3", 0, scope_id="site-b", locale="de", metadata={"product": "cli"}),
        make_chunk(
            "doc-4", 0, scope_id="site-b", locale="de", url="https://example.test/x", generation=2
        ),
        make_chunk("doc-5", 0, metadata={"a=b": "c"}, generation=1),
        make_chunk("doc-6", 0, metadata={"a": "b=c"}, generation=3),
    ]


SCOPE_CASES: dict[str, ScopeFilter] = {
    "empty": ScopeFilter(),
    "scope": ScopeFilter(scope_id="site-b"),
    "locale": ScopeFilter(locale="de"),
    "scope+locale": ScopeFilter(scope_id="site-b", locale="en"),
    "doc-any": ScopeFilter(doc_ids=("doc-1", "doc-4", "doc-missing")),
    "url-any": ScopeFilter(urls=("https://example.test/x", "https://example.test/doc-2")),
    "meta-one": ScopeFilter(metadata=(("product", "api"),)),
    "meta-all": ScopeFilter(metadata=(("product", "api"), ("tier", "free"))),
    "meta-escaped-key": ScopeFilter(metadata=(("a=b", "c"),)),
    "meta-escaped-value": ScopeFilter(metadata=(("a", "b=c"),)),
    "everything": ScopeFilter(
        scope_id="site-a", locale="en", doc_ids=("doc-1", "doc-2"), metadata=(("tier", "pro"),)
    ),
    "no-match": ScopeFilter(scope_id="site-unknown"),
    "scopes-any": ScopeFilter(scope_ids=("site-b", "site-unknown")),
    "scopes-all": ScopeFilter(scope_ids=("site-a", "site-b"), locale="de"),
    "scopes+scope": ScopeFilter(scope_id="site-a", scope_ids=("site-b",)),
    "scopes+generation": ScopeFilter(scope_ids=("site-a", "site-b"), visible_generation=1),
    "generation-0": ScopeFilter(visible_generation=0),
    "generation-2": ScopeFilter(visible_generation=2),
    "scope+generation": ScopeFilter(scope_id="site-b", visible_generation=2),
    "meta+generation": ScopeFilter(metadata=(("product", "api"),), visible_generation=1),
}


def reference_match(chunk: Chunk | StoredChunk, scope: ScopeFilter) -> bool:
    """What a ScopeFilter means: every set field must hold (any-of for lists),
    and no row written by a generation above `visible_generation` is seen."""
    return (
        (scope.visible_generation is None or chunk.generation <= scope.visible_generation)
        and (not scope.scope_id or chunk.scope_id == scope.scope_id)
        and (not scope.scope_ids or chunk.scope_id in scope.scope_ids)
        and (not scope.locale or chunk.locale == scope.locale)
        and (not scope.doc_ids or chunk.doc_id in scope.doc_ids)
        and (not scope.urls or chunk.url in scope.urls)
        and all(chunk.metadata.get(key) == value for key, value in scope.metadata)
    )


def stored(chunk: Chunk) -> StoredChunk:
    """How a store must give `chunk` back."""
    return StoredChunk(**asdict(chunk))  # every field of a chunk, whole (not partial)


def payload_of(chunk: Chunk, **changes: Any) -> ChunkPayload:
    return replace(payload_of_stored(chunk), **changes)


def seeded_vector(key: str) -> list[float]:
    """A fixed pseudo-random vector per key, the same on every run."""
    rng = random.Random(hashlib.sha256(key.encode()).digest())
    return [rng.uniform(-1.0, 1.0) for _ in range(DIM)]


# -- harness -----------------------------------------------------------------


@dataclass
class StoreHarness:
    """Drives a vector or lexical store through the same small API."""

    factory: StoreFactory
    path: Path
    store: Any
    vectors: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def open(cls, factory: StoreFactory, path: Path) -> StoreHarness:
        return cls(factory=factory, path=path, store=factory.open(path))

    @property
    def is_vector(self) -> bool:
        return self.factory.kind == "vector"

    def reopen(self) -> None:
        """Close the store and open the same path again (a process restart)."""
        self.store.close()
        self.store = self.factory.open(self.path)

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[list[float]] | None = None,
        deadline: Any = None,
    ) -> None:
        """Write `chunks` (a vector store: with `vectors`, or seeded ones);
        without a deadline, the one a call no request covers gets."""
        deadline = unrequested_deadline() if deadline is None else deadline
        if not self.is_vector:
            self.store.upsert(chunks, deadline)
            return
        if vectors is None:
            vectors = [seeded_vector(chunk.chunk_id) for chunk in chunks]
        self.store.upsert(chunks, list(vectors), deadline)

    def rows(self) -> list[StoredChunk]:
        """Every row, whatever its generation, in chunk-id order (`scan`)."""
        return sorted((row for page in self.store.scan() for row in page), key=_by_id)

    def search(
        self, scope: ScopeFilter = EVERYWHERE, limit: int = ENOUGH, deadline: Any = None
    ) -> list[ScoredChunk]:
        probe: Any = PROBE_VECTOR if self.is_vector else COMMON_WORD
        if deadline is None:  # the call every caller without a deadline makes
            return list(self.store.search(probe, limit, scope, deadline=unrequested_deadline()))
        return list(self.store.search(probe, limit, scope, deadline))

    def matching_ids(self, scope: ScopeFilter = EVERYWHERE) -> set[str]:
        hits = self.search(scope)
        ids = [hit.chunk.chunk_id for hit in hits]
        assert len(ids) == len(set(ids)), f"duplicate hits: {ids}"
        return set(ids)

    def get_one(self, chunk_id_value: str) -> StoredChunk:
        found = self.store.get([chunk_id_value], deadline=unrequested_deadline())
        assert len(found) == 1, f"expected exactly one {chunk_id_value}, got {found}"
        return found[0]

    def close(self) -> None:
        self.store.close()
        if self.factory.destroy is not None:
            self.factory.destroy(self.path)


def _by_id(row: StoredChunk) -> str:
    return row.chunk_id


@contextmanager
def searches_meanwhile(search: Callable[[], Sequence[Any]], hits: int) -> Iterator[None]:
    """Three threads search over and over while the body writes, each search
    asserting `hits` hits; past the body, no search has failed."""
    errors: list[BaseException] = []
    done = threading.Event()

    def search_until_done() -> None:
        try:
            while not done.is_set():
                assert len(search()) == hits
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=search_until_done) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        yield
    finally:
        done.set()
        for reader in readers:
            reader.join()
    assert errors == [], errors
