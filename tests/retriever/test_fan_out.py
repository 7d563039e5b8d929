"""The fan-out (services.retriever.fan_out): what its product tells the later
steps, and the language rule applied where the channels are run, on real
embedded stores with a stand-in model (unit)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.core.deadline import Deadline
from services.retriever.channels import ChannelOutcome, ChannelStatus, not_requested
from services.retriever.fan_out import FanOut
from services.retriever.locale_balance import LocaleLists
from services.retriever.pipeline import RetrievalConfig, RetrievalPipeline, RetrievalRequest
from services.retriever.scope_locales import IndexLocales
from services.retriever.steps import LanguageCrossing, build_retrieval_steps
from services.retriever.types import Channel
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.storage import Storage
from tests.storage.harness import make_chunk
from tests.storage.manifest_contract import entry

pytestmark = pytest.mark.unit

DIM = 8


class EnglishUnitEmbedder:
    """Stands in for an English-only model: every text embeds to one unit vector."""

    dim = DIM
    languages = frozenset({"en"})

    def embed_queries(
        self, texts: list[str], deadline: float | None = None, *, partition: str = ""
    ) -> np.ndarray:
        return np.tile(np.eye(DIM, dtype=np.float32)[0], (len(texts), 1))


def one_chunk_storage(root: Path, chunk: Any) -> Storage:
    """Real embedded stores holding `chunk`, its vector the model's one unit vector."""
    vectors = EdgeVectorStore(root / "vectors", DIM)
    lexical = TantivyLexicalStore(root / "lexical")
    vectors.upsert([chunk], [[1.0] + [0.0] * (DIM - 1)], deadline=unrequested_deadline())
    lexical.upsert([chunk], deadline=unrequested_deadline())
    return Storage(vectors, lexical, SqliteManifest(root / "manifest.sqlite3"))


def test_the_product_names_the_stores_that_answered_and_the_channels_that_failed() -> None:
    vector = ChannelOutcome(Channel.VECTOR, ChannelStatus.OK)
    lexical = ChannelOutcome(Channel.LEXICAL, ChannelStatus.TIMEOUT, error="timed out")
    cross = not_requested(Channel.CROSS_LINGUAL)
    searched = FanOut.of(vector, lexical, cross, LocaleLists(()))
    assert searched.answered == (Channel.VECTOR,)
    assert searched.failed == ("lexical",)  # the cross-lingual one was not asked for


def test_a_question_the_model_cannot_read_leaves_the_vector_channel_out_by_rule(
    tmp_path: Path,
) -> None:
    chunk = make_chunk("doc-zh", text="签名密钥 轮换 每 九十 天")
    storage = one_chunk_storage(tmp_path, chunk)
    with ThreadPoolExecutor(2) as executor:
        model: Any = EnglishUnitEmbedder()
        steps = build_retrieval_steps(model, storage, None, executor, RetrievalConfig())
        request = RetrievalRequest(query="签名密钥多久轮换一次", rerank=False)
        result = asyncio.run(RetrievalPipeline(steps).retrieve(request, Deadline.after(10.0)))
    storage.close()
    vector = next(o for o in result.channels if o.channel is Channel.VECTOR)
    assert (vector.status, vector.by_rule, vector.requested) == (
        ChannelStatus.SKIPPED,
        True,
        False,
    )
    assert "reads en" in vector.error
    assert not result.degraded  # a rule's decision, not a failure
    assert [hit.chunk.chunk_id for hit in result.hits] == [chunk.chunk_id]  # lexical found it


def test_searches_run_on_their_own_threads_and_short_reads_do_not_wait_for_them(
    tmp_path: Path,
) -> None:
    """Every thread of the searches' pool held (slow searches piled up):
    the request's short reads run on the shared pool, and it is answered by
    its deadline, degraded, not starved of its commit-point read."""
    storage = one_chunk_storage(tmp_path, make_chunk("doc-en", text="rotate the key yearly"))
    release = threading.Event()
    with ThreadPoolExecutor(2) as shared, ThreadPoolExecutor(1) as searches:
        searches.submit(release.wait, 30)  # the searches' one thread is taken
        model: Any = EnglishUnitEmbedder()
        config = RetrievalConfig(channel_timeout_ms=300)
        steps = build_retrieval_steps(
            model, storage, None, shared, config, channel_executor=searches
        )
        request = RetrievalRequest(query="signing key rotation", rerank=False)
        try:
            result = asyncio.run(RetrievalPipeline(steps).retrieve(request, Deadline.after(5.0)))
        finally:
            release.set()
    storage.close()
    assert result.degraded  # both channels timed out waiting for a thread
    assert {o.status for o in result.channels if o.requested} == {ChannelStatus.TIMEOUT}


class EveryLanguageUnitEmbedder(EnglishUnitEmbedder):
    """Stands in for a model of every language (locales are ranked apart)."""

    languages = frozenset({"*"})


def test_a_read_of_the_scopes_locales_is_timed_as_its_stage_and_a_cached_one_is_not(
    tmp_path: Path,
) -> None:
    storage = one_chunk_storage(tmp_path, make_chunk("doc-en", text="rotate the key yearly"))
    entries = [entry("doc-en", "en"), entry("doc-zh", "zh-CN")]
    storage.manifest.put_many(entries, deadline=unrequested_deadline())
    model: Any = EveryLanguageUnitEmbedder()
    crossing = LanguageCrossing(locales=IndexLocales.of(storage.manifest, refresh_s=600))
    with ThreadPoolExecutor(2) as executor:
        steps = build_retrieval_steps(
            model, storage, None, executor, RetrievalConfig(), crossing=crossing
        )
        pipeline = RetrievalPipeline(steps)
        request = RetrievalRequest(query="signing key rotation", rerank=False)
        read, cached = (
            asyncio.run(pipeline.retrieve(request, Deadline.after(10.0))) for _ in range(2)
        )
    storage.close()
    assert [stage for stage, _ in read.timings].count("locales") == 1
    assert "locales" not in [stage for stage, _ in cached.timings]
    assert [hit.chunk.doc_id for hit in cached.hits] == ["doc-en"]
