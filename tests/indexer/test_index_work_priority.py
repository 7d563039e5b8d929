"""RAG_INDEX_WORK_NICE in a real embedded stack: the Indexer says at start
what priority its work runs at, and a run's store writes happen on a thread
at that nice value while the Retriever's searches keep the process's."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import structlog

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.thread_priority import per_thread_nice, thread_nice
from services.embedding.embedder import Embedder
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not per_thread_nice(), reason="per-thread nice values are Linux's"),
]


class NiceRecorder:
    """A spy (not a fault) around a real store: records the nice value of the
    thread each call of `methods` runs on, then calls through."""

    def __init__(self, inner: Any, methods: set[str]) -> None:
        self.inner, self.methods = inner, methods
        self.seen: dict[str, set[int]] = {name: set() for name in methods}

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self.methods:
            return target

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.seen[name].add(thread_nice(threading.get_native_id()))
            return target(*args, **kwargs)

        return recorded


@pytest.mark.parametrize("nice", [7, 0])
def test_a_run_writes_at_the_configured_priority_and_searches_do_not(
    tmp_path: Path, embedder: Embedder, nice: int
) -> None:
    process = thread_nice(threading.get_native_id())
    spies: list[NiceRecorder] = []

    def wrap(vectors: Any, lexical: Any) -> tuple[Any, Any]:
        spies.append(NiceRecorder(vectors, {"upsert", "search", "search_many"}))
        return spies[0], lexical

    with structlog.testing.capture_logs() as logs:
        stack = BackgroundStack(
            tmp_path, embedder, indexer={"index_work_nice": nice}, wrap_stores=wrap
        ).start()
    try:
        reply = stack.upsert(corpus_documents()[:3])
        assert not [o for o in reply.outcomes if o.state == ipb.DOCUMENT_STATE_REJECTED]
        stack.retriever.Retrieve(rpb.RetrieveRequest(query="what is retrieval", top_k=3))
    finally:
        stack.stop()
    [started] = [entry for entry in logs if entry["event"] == "index_work_priority"]
    assert (started["nice"], started["per_thread"]) == (nice, True)
    assert spies[0].seen["upsert"] == {max(process, nice)}
    seen = spies[0].seen
    assert seen["search"] | seen["search_many"] == {process}
