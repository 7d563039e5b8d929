"""The benchmarks reach the services through the one client layer
(rag_client), plaintext on loopback and without retries: a benchmark counts
a failed call, it does not hide it behind a second attempt."""

from __future__ import annotations

from rag_client import (
    AsyncRetrieverClient,
    ClientSettings,
    IndexerClient,
    RetrieverClient,
    RetryPolicy,
)
from services.runtime.server import channel_options

BENCH_MAX_MESSAGE_BYTES = 64 * 2**20


def bench_settings(addr: str, timeout_s: float) -> ClientSettings:
    return ClientSettings(
        target=addr,
        timeout=timeout_s,
        retry=RetryPolicy(max_attempts=1),
        channel_options=tuple(channel_options(BENCH_MAX_MESSAGE_BYTES)),
    )


def bench_indexer(addr: str, timeout_s: float) -> IndexerClient:
    return IndexerClient(bench_settings(addr, timeout_s))


def bench_retriever(addr: str, timeout_s: float) -> RetrieverClient:
    return RetrieverClient(bench_settings(addr, timeout_s))


def bench_retriever_async(addr: str, timeout_s: float) -> AsyncRetrieverClient:
    """Make it inside the event loop that uses it."""
    return AsyncRetrieverClient(bench_settings(addr, timeout_s))
