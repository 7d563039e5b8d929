"""Micro-batching of concurrent queries, on the real model and real threads:
waiting queries share one forward pass, get the vectors they would have got
alone, and all hear of an error in their pass."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from services.core.errors import DeadlineExceeded
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from services.embedding.query_batching import QueryBatcher
from tests.embedding.support import wait_until

pytestmark = pytest.mark.integration

QUERIES = [
    "what happens when the reranker is slow",
    "rate limits",
    "how do I restore a backup taken before the last schema migration",
    "X7Q-4291",
    "keep my daemon alive when it dies",
    "deployment",
    "which settings change how documents are split into chunks and why",
    "billing",
]
TIMEOUT_S = 60


@pytest.fixture
def held_model() -> Iterator[threading.Lock]:
    """A model lock the test holds, so queries pile up behind it."""
    lock = threading.Lock()
    lock.acquire()
    yield lock
    if lock.locked():
        lock.release()


def submit_while_busy(
    batcher: QueryBatcher, lock: threading.Lock, texts: list[str]
) -> list[Future[np.ndarray]]:
    """Start one thread per text, wait until every query is queued behind the
    held model, then free the model."""
    pool = ThreadPoolExecutor(max_workers=len(texts))
    futures = [pool.submit(batcher.embed, text) for text in texts]
    wait_until(lambda: batcher.stats().waiting == len(texts))
    lock.release()
    pool.shutdown(wait=True)
    return futures


def test_waiting_queries_share_one_pass_and_get_their_own_vectors(
    embedder: Embedder, held_model: threading.Lock
) -> None:
    batcher = QueryBatcher(embedder.embed_documents, 32, held_model)
    futures = submit_while_busy(batcher, held_model, QUERIES)
    stats = batcher.stats()
    assert (stats.queries, stats.forward_passes, stats.batch_sizes) == (8, 1, {8: 1})
    for text, future in zip(QUERIES, futures, strict=True):
        alone = embedder.embed_documents([text])[0]
        np.testing.assert_allclose(future.result(), alone, atol=1e-5)


def test_max_batch_splits_the_queue_in_arrival_order(
    embedder: Embedder, held_model: threading.Lock
) -> None:
    batcher = QueryBatcher(embedder.embed_documents, 3, held_model)
    futures = submit_while_busy(batcher, held_model, QUERIES)
    assert [f.result().shape for f in futures] == [(embedder.dim,)] * len(QUERIES)
    stats = batcher.stats()
    assert stats.forward_passes == 3 and stats.batch_sizes == {2: 1, 3: 2}


def test_a_repeated_query_is_encoded_once_per_pass(
    embedder: Embedder, held_model: threading.Lock
) -> None:
    batcher = QueryBatcher(embedder.embed_documents, 32, held_model)
    futures = submit_while_busy(batcher, held_model, ["rate limits"] * 4 + ["billing"])
    assert batcher.stats().batch_sizes == {2: 1}
    np.testing.assert_array_equal(futures[0].result(), futures[3].result())


def test_an_error_in_a_pass_reaches_every_waiter(
    embedder: Embedder, held_model: threading.Lock
) -> None:
    def encode_refusing_poison(texts: list[str]) -> np.ndarray:
        if "poison" in texts:
            raise ValueError("model refused the batch")
        return embedder.embed_documents(texts)

    batcher = QueryBatcher(encode_refusing_poison, 32, held_model)
    futures = submit_while_busy(batcher, held_model, [*QUERIES[:5], "poison"])
    for future in futures:
        with pytest.raises(ValueError, match="refused the batch"):
            future.result()
    # The failed pass released the model: the next query is served.
    assert batcher.embed("rate limits").shape == (embedder.dim,)


def test_concurrent_embed_query_matches_sequential_with_fewer_passes(
    embedder: Embedder,
) -> None:
    fresh = Embedder(EmbedderConfig(query_cache_size=0, query_max_batch=32))
    texts = [f"{text} ({n})" for n in range(2) for text in QUERIES]
    sequential = embedder.embed_documents(texts)
    # A long document batch keeps the model busy while the queries arrive.
    busy = threading.Thread(target=fresh.embed_documents, args=([" ".join(QUERIES) * 8] * 24,))
    busy.start()
    start = threading.Barrier(len(texts))

    def embed_after_barrier(text: str) -> np.ndarray:
        start.wait()
        return fresh.embed_query(text)

    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        concurrent = list(pool.map(embed_after_barrier, texts))
    busy.join()
    np.testing.assert_allclose(np.stack(concurrent), sequential, atol=1e-5)
    stats = fresh.query_stats()
    assert stats.queries == len(texts)
    assert stats.forward_passes < len(texts)


def test_one_caller_s_queries_share_a_pass_and_come_back_in_order(
    embedder: Embedder,
) -> None:
    """A question and its translations (Embedder.embed_queries) in one pass;
    cached rows come back in their places without a pass."""
    texts = ["发票在哪里下载", "invoice receipt bill download", "rate limits"]
    alone = np.stack([embedder.embed_query(text) for text in texts])
    passes = embedder.query_stats().forward_passes
    together = embedder.embed_queries(["new " + text for text in texts])
    assert embedder.query_stats().forward_passes == passes + 1
    assert together.shape == alone.shape
    again = embedder.embed_queries(texts)  # cached rows, no pass
    np.testing.assert_allclose(again, alone, atol=1e-6)
    assert embedder.query_stats().forward_passes == passes + 1


def recording(embedder: Embedder, encoded: list[str]) -> Callable[[list[str]], np.ndarray]:
    """The model's encode, noting every text it was given."""

    def encode(texts: list[str]) -> np.ndarray:
        encoded.extend(texts)
        return embedder.embed_documents(texts)

    return encode


def test_a_query_queued_past_its_deadline_is_withdrawn_and_never_encoded(
    embedder: Embedder, held_model: threading.Lock
) -> None:
    """A caller whose channel gave up must get its thread back at its
    deadline, not after a pass it no longer needs (probe 3: abandoned long
    questions once held every worker thread of the Retriever)."""
    encoded: list[str] = []
    batcher = QueryBatcher(recording(embedder, encoded), 32, held_model)
    pool = ThreadPoolExecutor(max_workers=2)
    leader = pool.submit(batcher.embed, QUERIES[0])  # waits for the held model
    wait_until(lambda: batcher.stats().waiting == 1)
    late = pool.submit(batcher.embed_many, [QUERIES[1], QUERIES[2]], time.monotonic() + 0.2)
    with pytest.raises(DeadlineExceeded, match="deadline passed"):
        late.result(timeout=TIMEOUT_S)  # while the model is still held
    assert batcher.stats().waiting == 1  # only the leader's query is left
    held_model.release()
    assert leader.result(timeout=TIMEOUT_S).shape == (embedder.dim,)
    pool.shutdown(wait=True)
    assert encoded == [QUERIES[0]]


def test_a_leader_whose_deadline_passed_before_the_model_freed_leaves_without_a_pass(
    embedder: Embedder, held_model: threading.Lock
) -> None:
    encoded: list[str] = []
    batcher = QueryBatcher(recording(embedder, encoded), 32, held_model)
    pool = ThreadPoolExecutor(max_workers=2)
    leader = pool.submit(batcher.embed, QUERIES[0], time.monotonic() + 0.2)
    wait_until(lambda: batcher.stats().waiting == 1)
    time.sleep(0.3)
    held_model.release()
    with pytest.raises(DeadlineExceeded):
        leader.result(timeout=TIMEOUT_S)
    assert batcher.embed(QUERIES[1]).shape == (embedder.dim,)  # the next caller leads
    pool.shutdown(wait=True)
    assert encoded == [QUERIES[1]]
