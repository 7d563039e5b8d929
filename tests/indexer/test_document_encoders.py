"""An index records the document encoders that wrote its vectors, as it
records the model: switching encoder (same weights) is allowed, but shows up
as a mixed list in the manifest and in Stats, and is logged once as
`document_encoder_changed`. Real manifest; real stack, model and stores."""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.embedding.config import EmbedderConfig, Precision
from services.embedding.embedder import Embedder
from services.indexer.document_encoders import (
    DOCUMENT_ENCODERS_META,
    record_document_encoder,
    recorded_document_encoders,
)
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.factory import open_manifest
from services.storage.settings import StoreMode, StoreSettings
from tests.storage.manifest_contract import entry
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack, free_port

CHANGED, ADOPTED = "document_encoder_changed", "document_encoder_adopted"


def warnings(logs: Sequence[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line["event"] in (CHANGED, ADOPTED)]


@pytest.fixture
def manifest(tmp_path: Path) -> Iterator[SqliteManifest]:
    opened = SqliteManifest(tmp_path / "manifest.sqlite")
    yield opened
    opened.close()


@pytest.mark.unit
def test_an_empty_index_records_its_encoder_without_a_warning(manifest: SqliteManifest) -> None:
    with structlog.testing.capture_logs() as logs:
        assert record_document_encoder(manifest, "onnx-fp32") == ["onnx-fp32"]
        manifest.set_meta(
            DOCUMENT_ENCODERS_META, json.dumps(["onnx-fp32"]), deadline=unrequested_deadline()
        )
        # still empty: nothing the first encoder wrote remains
        assert record_document_encoder(manifest, "onnx-int8") == ["onnx-int8"]
    assert warnings(logs) == []
    assert recorded_document_encoders(manifest, unrequested_deadline()) == ["onnx-int8"]


@pytest.mark.unit
def test_a_switch_is_recorded_and_logged_once(manifest: SqliteManifest) -> None:
    record_document_encoder(manifest, "onnx-fp32")
    manifest.put_many([entry("a")], deadline=unrequested_deadline())
    with structlog.testing.capture_logs() as logs:
        assert record_document_encoder(manifest, "onnx-int8") == ["onnx-fp32", "onnx-int8"]
        assert record_document_encoder(manifest, "onnx-int8") == ["onnx-fp32", "onnx-int8"]
    [changed] = warnings(logs)
    assert changed["event"] == CHANGED and changed["log_level"] == "warning"
    assert (changed["old"], changed["new"]) == ("onnx-fp32", "onnx-int8")
    with structlog.testing.capture_logs() as logs:
        # back again: still mixed, the current encoder last
        assert record_document_encoder(manifest, "onnx-fp32") == ["onnx-int8", "onnx-fp32"]
    assert [(w["old"], w["new"]) for w in warnings(logs)] == [("onnx-int8", "onnx-fp32")]
    assert recorded_document_encoders(manifest, unrequested_deadline()) == [
        "onnx-int8",
        "onnx-fp32",
    ]


@pytest.mark.unit
def test_an_index_from_before_the_record_adopts_the_encoder(manifest: SqliteManifest) -> None:
    manifest.put_many([entry("a")], deadline=unrequested_deadline())
    with structlog.testing.capture_logs() as logs:
        assert record_document_encoder(manifest, "onnx-int8") == ["onnx-int8"]
    [adopted] = warnings(logs)
    assert (adopted["event"], adopted["encoder"], adopted["documents"]) == (ADOPTED, "onnx-int8", 1)


# -- the real stack --------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


def onnx_embedder(cache: Path, precision: Precision) -> Embedder:
    config = EmbedderConfig(backend="onnx", onnx_cache_dir=cache, document_precision=precision)
    return Embedder(config)


def stats_after_start(data_dir: Path, embedder: Embedder, docs: list[ipb.Document]) -> list[str]:
    """Start the stack on `data_dir`, upsert `docs`, and return Stats' encoders."""
    stack = BackgroundStack(data_dir, embedder, reranker_addr=f"127.0.0.1:{free_port()}").start()
    try:
        reply = stack.upsert(docs)
        assert not [o for o in reply.outcomes if o.state == ipb.DOCUMENT_STATE_REJECTED]
        return list(stack.indexer.Stats(ipb.StatsRequest(), timeout=30).document_encoders)
    finally:
        stack.stop()


def manifest_encoders(data_dir: Path) -> list[str]:
    manifest = open_manifest(StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED))
    try:
        return recorded_document_encoders(manifest, unrequested_deadline())
    finally:
        manifest.close()


@pytest.mark.integration
def test_the_indexer_records_its_encoder_and_stats_shows_a_mixed_index(
    tmp_path: Path, onnx_cache: Path
) -> None:
    docs = corpus_documents()
    fp32, int8 = onnx_embedder(onnx_cache, "fp32"), onnx_embedder(onnx_cache, "int8")
    assert stats_after_start(tmp_path, fp32, docs[:2]) == ["onnx-fp32"]
    assert manifest_encoders(tmp_path) == ["onnx-fp32"]
    with structlog.testing.capture_logs() as logs:
        # the other precision on the same index: allowed, mixed, logged
        assert stats_after_start(tmp_path, int8, docs[2:4]) == ["onnx-fp32", "onnx-int8"]
    [changed] = warnings(logs)
    assert (changed["event"], changed["old"], changed["new"]) == (CHANGED, "onnx-fp32", "onnx-int8")
    assert manifest_encoders(tmp_path) == ["onnx-fp32", "onnx-int8"]
    with structlog.testing.capture_logs() as logs:
        assert stats_after_start(tmp_path, int8, docs[4:5]) == ["onnx-fp32", "onnx-int8"]
    assert warnings(logs) == []  # once per switch, not once per start
