"""The model bound's embedder is configured as the services' (unit: no model loaded)."""

from __future__ import annotations

import pytest

from bench.load.model_bound import bound_config
from services.retriever.settings import RetrieverSettings

pytestmark = pytest.mark.unit


def test_the_bound_batches_queries_as_the_retriever_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the Retriever's micro-batching, "batches of 16" ran one pass
    per query and the batched throughput equalled the single one."""
    assert bound_config().query_max_batch == RetrieverSettings().query_max_batch > 1
    monkeypatch.setenv("RAG_QUERY_MAX_BATCH", "8")
    config = bound_config()
    assert (config.query_max_batch, config.query_cache_size) == (8, 0)
