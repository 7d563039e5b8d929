"""Opens the stores and the manifest for the mode the settings select.

`open_storage` opens all three as one `Storage` facade (`storage.py`);
the rest of the code only sees it and the protocols its parts declare,
so switching from embedded to server mode is a change of environment
variables, never of code. Implementations are imported inside the functions:
an embedded process never loads the server clients and vice versa.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from services.core.analysis import TextAnalyzer
from services.core.errors import ConfigError
from services.storage.base import LexicalStore, VectorStore
from services.storage.disk_room import MIN_FREE_BYTES, DiskRoom
from services.storage.manifest import Manifest
from services.storage.settings import StoreSettings
from services.storage.storage import Storage

MANIFEST_FILE = "manifest.sqlite3"
__all__ = ["MANIFEST_FILE", "Storage", "open_manifest", "open_storage", "open_stores"]


def open_storage(settings: StoreSettings, dim: int, second_dim: int = 0) -> Storage:
    """`second_dim`: chunks carry a second vector (RAG_CROSS_LINGUAL_MODEL's; 0: none)."""
    if settings.is_postgres:
        from services.storage.postgres.factory import open_postgres_storage

        return open_postgres_storage(settings, dim, second_dim)
    vectors, lexical = open_stores(settings, dim, second_dim)
    try:
        manifest = open_manifest(settings)
        room = None if settings.is_server else DiskRoom(settings.data_dir, 4 * (dim + second_dim))
        return Storage(vectors, lexical, manifest, disk_room=room)
    except BaseException:
        lexical.close()
        vectors.close()
        raise


def open_stores(
    settings: StoreSettings, dim: int, second_dim: int = 0
) -> tuple[VectorStore, LexicalStore]:
    if settings.is_postgres:
        from services.storage.postgres.factory import open_postgres_stores

        return open_postgres_stores(settings, dim, second_dim=second_dim)
    if not settings.is_server:
        from services.storage.embedded.stores import open_embedded_stores

        usable_data_dir(settings.data_dir)
        return open_embedded_stores(
            settings.data_dir,
            dim,
            settings.lexical_field_boosts,
            search_ef=settings.vector_search,
            analyzer=TextAnalyzer(settings.lexical_cjk),
            optimize_apart=settings.vector_optimize_apart,
            second_dim=second_dim,
            quantization=settings.vector_quantization,
        )
    if second_dim:
        raise ConfigError(
            "RAG_CROSS_LINGUAL_MODEL needs a second vector per chunk, which the Qdrant server "
            "store does not carry yet: unset RAG_CROSS_LINGUAL_MODEL, or use the embedded or "
            "PostgreSQL stores"
        )

    from services.storage.server.opensearch import OpenSearchLexicalStore
    from services.storage.server.qdrant import QdrantVectorStore

    vectors = QdrantVectorStore.from_settings(settings, dim)
    try:
        lexical = OpenSearchLexicalStore.from_settings(settings)
    except BaseException:
        vectors.close()  # do not leak the Qdrant channel when start-up fails half-way
        raise
    return vectors, lexical


def open_manifest(settings: StoreSettings) -> Manifest:
    if settings.is_postgres:
        from services.storage.postgres.factory import open_postgres_manifest

        return open_postgres_manifest(settings)
    if not settings.is_server:
        from services.storage.embedded.manifest_sqlite import SqliteManifest

        usable_data_dir(settings.data_dir)
        return SqliteManifest(settings.data_dir / MANIFEST_FILE)

    from services.storage.server.opensearch_manifest import OpenSearchManifest

    return OpenSearchManifest.from_settings(settings)


def usable_data_dir(folder: Path, min_free_bytes: int = MIN_FREE_BYTES) -> None:
    """Creates the embedded data folder; ConfigError, naming RAG_DATA_DIR, when
    it cannot be a writable folder with room to start (a file in the way, a
    read-only file system, a full disk): an operator's mistake, not a traceback."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.is_dir():
            raise NotADirectoryError(20, "not a directory")
        probe = folder / f".write-check-{os.getpid()}"
        probe.touch()
        probe.unlink()
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"RAG_DATA_DIR={str(folder)!r} is not a writable folder: {reason}"
        ) from None
    if free < min_free_bytes:
        raise ConfigError(
            f"RAG_DATA_DIR={str(folder)!r} has {free // 2**20} MiB free; the embedded stores "
            f"need at least {min_free_bytes // 2**20} MiB to start"
        )
