"""open_stores / open_manifest pick implementations from the settings alone."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from services.core.errors import ConfigError, StoreUnavailable
from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.factory import (
    MANIFEST_FILE,
    open_manifest,
    open_stores,
    usable_data_dir,
)
from services.storage.settings import StoreSettings

pytestmark = pytest.mark.integration


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_embedded_mode_opens_the_local_stores_and_sqlite_manifest(tmp_path: Path) -> None:
    settings = StoreSettings(data_dir=tmp_path, QDRANT_URL="", OPENSEARCH_URL="")
    vectors, lexical = open_stores(settings, dim=8)
    manifest = open_manifest(settings)
    try:
        assert isinstance(vectors, EdgeVectorStore) and isinstance(lexical, TantivyLexicalStore)
        assert isinstance(manifest, SqliteManifest)
        assert manifest.path == tmp_path / MANIFEST_FILE
        assert (
            vectors.count(ScopeFilter(), deadline=unrequested_deadline()) == 0
            and lexical.count(None, unrequested_deadline()) == 0
        )
    finally:
        for closeable in (vectors, lexical, manifest):
            closeable.close()


@pytest.mark.filterwarnings("ignore::UserWarning")  # qdrant-client's version probe fails
def test_server_mode_goes_to_the_servers_and_reports_them_unreachable(tmp_path: Path) -> None:
    """Both URLs point at a closed local port: the server adapters (not the
    embedded ones) are opened, retry, and give up with StoreUnavailable."""
    port = closed_port()
    settings = StoreSettings(
        data_dir=tmp_path,
        QDRANT_URL=f"http://127.0.0.1:{port}",
        QDRANT_GRPC_PORT=port,
        QDRANT_TIMEOUT_S=1,
        OPENSEARCH_URL=f"http://127.0.0.1:{port}",
    )
    with pytest.raises(StoreUnavailable, match="qdrant ensure collection failed"):
        open_stores(settings, dim=8)
    with pytest.raises(StoreUnavailable, match="opensearch manifest ensure index failed"):
        open_manifest(settings)
    assert list(tmp_path.iterdir()) == []  # nothing was created locally


def test_lexical_field_boosts_from_settings_reach_the_embedded_store(tmp_path: Path) -> None:
    settings = StoreSettings(
        data_dir=tmp_path,
        store_mode="embedded",
        lexical_title_boost=0.05,
        lexical_heading_boost=0.25,
        lexical_text_boost=1.0,
    )
    vectors, lexical = open_stores(settings, 4)
    try:
        described = lexical.describe_query("snapshot restore")  # type: ignore[attr-defined]
    finally:
        vectors.close()
        lexical.close()
    assert "title^0.05" in described and "heading_path^0.25" in described


def test_embedded_mode_hands_the_quantization_setting_to_the_vector_shard(tmp_path: Path) -> None:
    settings = StoreSettings(
        data_dir=tmp_path, QDRANT_URL="", OPENSEARCH_URL="", vector_quantization="none"
    )
    vectors, lexical = open_stores(settings, dim=8)
    vectors.close()
    lexical.close()
    # The shard's own persisted config, which its optimizer builds segments by.
    config = json.loads((tmp_path / "vectors" / "edge_config.json").read_text())
    assert "quantization_config" not in config["vectors"][""]
    default = StoreSettings(data_dir=tmp_path / "b", QDRANT_URL="", OPENSEARCH_URL="")
    vectors, lexical = open_stores(default, dim=8)
    vectors.close()
    lexical.close()
    config = json.loads((tmp_path / "b" / "vectors" / "edge_config.json").read_text())
    assert config["vectors"][""]["quantization_config"]["scalar"]["type"] == "int8"


@pytest.mark.parametrize("under", ["a-file", "a-file/below"])
def test_a_data_dir_that_cannot_be_a_folder_is_a_configuration_error(
    tmp_path: Path, under: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    settings = StoreSettings(data_dir=tmp_path / under, QDRANT_URL="", OPENSEARCH_URL="")
    for opening in (lambda: open_stores(settings, dim=8), lambda: open_manifest(settings)):
        with pytest.raises(ConfigError, match=r"RAG_DATA_DIR=.* is not a writable folder"):
            opening()


def test_a_data_dir_without_room_to_start_is_refused_with_the_space_left(tmp_path: Path) -> None:
    """(A fuller disk ended the process with SIGBUS on the first log write.)"""
    with pytest.raises(ConfigError, match=r"MiB free; the embedded stores need at least"):
        usable_data_dir(tmp_path / "data", min_free_bytes=2**62)
    usable_data_dir(tmp_path / "data")  # room enough: created, nothing left behind
    assert list((tmp_path / "data").iterdir()) == []


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_data_dir_is_refused_rather_than_the_current_folder(blank: str) -> None:
    with pytest.raises(ValueError, match="RAG_DATA_DIR is blank"):
        StoreSettings(data_dir=blank, QDRANT_URL="", OPENSEARCH_URL="")  # type: ignore[arg-type]
