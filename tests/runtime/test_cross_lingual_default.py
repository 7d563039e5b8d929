"""What RAG_CROSS_LINGUAL_MODEL=auto (the default) means per index
(services.runtime.parts.cross_lingual_model_for), on real SQLite manifests:
a new index gets the packaged mUSE, an index already built keeps what it
recorded (none for one from before second vectors), and the Qdrant server
store, which carries no second vector, gets none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.runtime.embedding_settings import (
    AUTO_CROSS_LINGUAL,
    DEFAULT_CROSS_LINGUAL_MODEL,
    EmbeddingSettings,
)
from services.runtime.parts import cross_lingual_model_for
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest
from services.storage.manifest import CROSS_LINGUAL_META, EMBEDDING_META
from services.storage.settings import StoreMode, StoreSettings

pytestmark = pytest.mark.unit


def _stores(data_dir: Path, mode: StoreMode = StoreMode.EMBEDDED, **urls: str) -> StoreSettings:
    return StoreSettings(data_dir=data_dir, store_mode=mode, **urls)


def _record(stores: StoreSettings, key: str, value: str) -> None:
    manifest = open_manifest(stores)
    try:
        manifest.set_meta(key, value, unrequested_deadline())
    finally:
        manifest.close()


def test_auto_is_the_default() -> None:
    assert EmbeddingSettings().cross_lingual_model == AUTO_CROSS_LINGUAL


def test_a_new_index_gets_the_packaged_cross_lingual_model(tmp_path: Path) -> None:
    assert cross_lingual_model_for(_stores(tmp_path)) == DEFAULT_CROSS_LINGUAL_MODEL


def test_an_index_keeps_the_second_model_it_recorded(tmp_path: Path) -> None:
    stores = _stores(tmp_path)
    _record(stores, CROSS_LINGUAL_META, json.dumps({"model": "packaged:muse-v3", "dim": 512}))
    assert cross_lingual_model_for(stores) == "packaged:muse-v3"
    _record(stores, CROSS_LINGUAL_META, "")  # built without one
    assert cross_lingual_model_for(stores) == ""


def test_an_index_from_before_second_vectors_keeps_none(tmp_path: Path) -> None:
    stores = _stores(tmp_path)
    _record(stores, EMBEDDING_META, json.dumps({"model": "packaged:multilingual-e5-small"}))
    assert cross_lingual_model_for(stores) == ""


def test_the_qdrant_server_store_gets_none(tmp_path: Path) -> None:
    # No server is asked: the answer comes from the store mode alone.
    urls = {"qdrant_url": "http://127.0.0.1:1", "opensearch_url": "http://127.0.0.1:1"}
    assert cross_lingual_model_for(_stores(tmp_path, StoreMode.SERVER, **urls)) == ""


@pytest.mark.parametrize("record", ["not json", "[]", '{"dim": 512}', '{"model": ""}'])
def test_an_unreadable_record_is_a_clear_start_up_error(tmp_path: Path, record: str) -> None:
    stores = _stores(tmp_path)
    _record(stores, CROSS_LINGUAL_META, record)
    with pytest.raises(ConfigError, match=r"unreadable.*Set RAG_CROSS_LINGUAL_MODEL"):
        cross_lingual_model_for(stores)
