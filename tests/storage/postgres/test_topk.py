"""The PostgreSQL lexical search (`postgres_topk`) returns exactly what the
reference statement (`postgres_bm25.search_statement`: every posting scored,
every match filtered, then sorted) returns: the same chunks in the same order,
scores equal up to float summation order. Checked property-style on seeded
random corpora, through writes, payload updates and deletes, with filters
from none to a handful of documents, and limits from 1 to more than match.

A real server (`tests.support.postgres`); one schema per test, dropped after.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from services.core.analysis import TextAnalyzer
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk
from services.storage.base import unrequested_deadline
from services.storage.lexical_fields import exact_first
from services.storage.postgres.bm25 import search_statement
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.sql import stored_chunk
from tests.storage.harness import make_chunk
from tests.support.postgres import PostgresServer, drop_schema, running_postgres

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=11)]

# A few very common words, many rare ones, identifiers (phrases and exact
# forms), and Chinese: the shapes whose cost and scoring differ.
COMMON = ("cell", "patient", "rate", "limit", "error")
RARE = tuple(f"term{n}" for n in range(40))
IDENTIFIERS = ("text-embedding-v4", "il-6", "covid-19", "x-ray", "chunkSize=800", "429")
CHINESE = ("限流", "每分钟", "请求", "错误")
BOOSTS = {"title": 2.0, "heading_path": 1.5, "text": 1.0}
SCORE_TOLERANCE = 1e-9


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


SCHEMA = "t_topk"


@pytest.fixture
def store(postgres: PostgresServer) -> Iterator[PostgresLexicalStore]:
    opened = PostgresLexicalStore(postgres.url, SCHEMA, field_boosts=BOOSTS, pool_size=2)
    try:
        yield opened
    finally:
        opened.close()
        drop_schema(postgres.url, SCHEMA)


def _words(rng: random.Random, count: int) -> str:
    pools = (COMMON, RARE, IDENTIFIERS, CHINESE)
    weights = (6, 3, 1, 1)
    return " ".join(rng.choice(rng.choices(pools, weights)[0]) for _ in range(count))


def random_chunk(rng: random.Random, n: int) -> Chunk:
    return make_chunk(
        f"doc-{n % 60}",
        n // 60,
        text=_words(rng, rng.randint(1, 80)),
        title=_words(rng, rng.randint(1, 5)),
        heading_path=_words(rng, rng.randint(0, 4)),
        scope_id=rng.choice(("site-a", "site-b")),
        locale=rng.choice(("en", "en", "zh")),
        generation=rng.randint(0, 3),
    )


def new_payload(chunk: Chunk, rng: random.Random) -> ChunkPayload:
    """Another title and heading (their terms are re-indexed), scope kept."""
    return ChunkPayload(
        url=chunk.url,
        title=_words(rng, 3),
        heading_path=_words(rng, 2),
        scope_id=chunk.scope_id,
        locale=chunk.locale,
        metadata=dict(chunk.metadata),
        generation=chunk.generation,
    )


def random_queries(rng: random.Random, count: int) -> list[str]:
    queries = [_words(rng, rng.randint(1, 14)) for _ in range(count)]
    return [*queries, "cell", "text-embedding-v4", "il-6 covid-19 cell", "每分钟 请求", "nothing"]


def scopes(rng: random.Random) -> list[ScopeFilter]:
    return [
        ScopeFilter(),
        ScopeFilter(scope_id="site-a", visible_generation=2),
        ScopeFilter(locale="zh"),
        # A handful of documents: most matches are filtered out.
        ScopeFilter(doc_ids=tuple(f"doc-{n}" for n in rng.sample(range(60), 3))),
    ]


def reference(
    store: PostgresLexicalStore, query: str, limit: int, scope: ScopeFilter
) -> list[ScoredChunk]:
    """The exhaustive statement, as the store ran it before."""
    plan = TextAnalyzer().plan(query)
    if plan.is_empty():
        return []
    statement, params = search_statement(store.schema, plan, BOOSTS, scope, limit)
    with store._conn() as conn:  # a pool connection, as the store's own search
        rows = conn.execute(statement, params).fetchall()
    return exact_first([ScoredChunk(stored_chunk(row), float(row[-1])) for row in rows], plan)


def assert_same_ranking(got: list[ScoredChunk], want: list[ScoredChunk], context: str) -> None:
    """Rank by rank the same score; each chunk its reference score; a chunk
    the reference does not list only in a tie at the cut (equal scores are
    ordered by chunk_id in both, but their float sums may differ in the last
    bit, so either side of a tie is right)."""
    assert len(got) == len(want), context
    expected = {hit.chunk.chunk_id: hit.score for hit in want}
    for rank, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        assert mine.score == pytest.approx(theirs.score, rel=SCORE_TOLERANCE), (context, rank)
        assert mine.exact == theirs.exact or mine.chunk.chunk_id != theirs.chunk.chunk_id
        score = expected.get(mine.chunk.chunk_id, want[-1].score)
        assert mine.score == pytest.approx(score, rel=SCORE_TOLERANCE), (context, rank)


def assert_matches_reference(store: PostgresLexicalStore, rng: random.Random) -> int:
    """Every query, scope and limit; how many comparisons found hits."""
    compared = 0
    for query in random_queries(rng, 8):
        for scope in scopes(rng):
            for limit in (1, 10, 1000):
                got = store.search(query, limit, scope, deadline=unrequested_deadline())
                want = reference(store, query, limit, scope)
                assert_same_ranking(got, want, f"{query!r} {scope} {limit}")
                compared += bool(want)
    return compared


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_search_returns_the_reference_top_k(store: PostgresLexicalStore, seed: int) -> None:
    rng = random.Random(seed)
    store.upsert([random_chunk(rng, n) for n in range(240)], deadline=unrequested_deadline())
    assert assert_matches_reference(store, rng) > 100


def test_it_stays_exact_through_updates_payload_changes_and_deletes(
    store: PostgresLexicalStore,
) -> None:
    """The statistics the search reads (df, field lengths, chunk count) change
    with every write; the result follows them."""
    rng = random.Random(7)
    chunks = [random_chunk(rng, n) for n in range(240)]
    store.upsert(chunks, deadline=unrequested_deadline())
    for round_ in range(3):
        rewritten = [random_chunk(rng, n) for n in rng.sample(range(240), 40)]
        store.upsert(rewritten, deadline=unrequested_deadline())
        store.update_payload(
            [(chunk.chunk_id, new_payload(chunk, rng)) for chunk in rng.sample(chunks, 20)],
            deadline=unrequested_deadline(),
        )
        store.delete(
            [chunk.chunk_id for chunk in rng.sample(chunks, 30)], deadline=unrequested_deadline()
        )
        assert assert_matches_reference(store, rng) > 50, round_


def test_a_phrase_is_found_from_its_rarest_word_in_every_field(
    store: PostgresLexicalStore,
) -> None:
    """`text-embedding-v4` read from `v4` (rare) rather than `text` (in every
    chunk): the same chunks and scores, the phrase in title and text alike."""
    filler = [make_chunk(f"filler-{n}", text=f"text {n} embedding text") for n in range(80)]
    holders = [
        make_chunk("in-text", text="call text-embedding-v4 for vectors"),
        make_chunk("in-title", title="text-embedding-v4", text="text text"),
        make_chunk("apart", text="text v4 embedding"),  # the words, not the phrase
    ]
    store.upsert([*filler, *holders], deadline=unrequested_deadline())
    for query in ("text-embedding-v4", "text embedding v4", "embedding-v4 text"):
        got = store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
        assert_same_ranking(got, reference(store, query, 10, ScopeFilter()), query)
    first = store.search("text-embedding-v4", 3, ScopeFilter(), deadline=unrequested_deadline())
    assert {hit.chunk.doc_id for hit in first[:2]} == {"in-text", "in-title"}
