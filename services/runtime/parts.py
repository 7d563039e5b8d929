"""The parts a data service runs on, opened once per process: the embedding
model, the stores (vectors, lexical, manifest), the I/O thread pool and the
view of the commit point.

`python -m services.indexer` and `python -m services.retriever` each open
their own; the embedded stack (`services.stack`) opens one set and hands it
to both apps, because embedded stores have a single writer and the Retriever
must read through the Indexer's open handles.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.embedding.config import EmbedderConfig, Precision
from services.embedding.document_precision import choose_document_precision, int8_dot_product
from services.embedding.embedder import Embedder
from services.runtime.embedding_settings import (
    AUTO_CROSS_LINGUAL,
    DEFAULT_CROSS_LINGUAL_MODEL,
    EmbeddingSettings,
    declared_languages,
)
from services.runtime.settings import GrpcServiceSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import Storage, open_manifest, open_storage
from services.storage.manifest import CROSS_LINGUAL_META, EMBEDDING_META
from services.storage.settings import StoreSettings
from services.storage.visibility import CommittedGeneration, ReleaseVerdict, read_release

ONNX_CACHE_SUBDIR = "models"  # under RAG_DATA_DIR: ONNX exports of the embedding model
# Only the Indexer encodes documents, so in one process the Indexer's setting
# decides and the Retriever's need not agree with it.
INDEXER_ONLY_FIELDS = frozenset({"embedding_document_precision"})
EMBEDDING_FIELDS = tuple(
    name
    for name in EmbeddingSettings.model_fields
    if name not in GrpcServiceSettings.model_fields and name not in INDEXER_ONLY_FIELDS
)

log = get_logger(__name__)


@dataclass(frozen=True)
class PartsConfig:
    """What the parts are opened with, beyond the stores' own settings."""

    embedding: EmbeddingSettings
    embedding_batch_size: int = 64  # the Indexer's
    query_cache_size: int = 0  # the Retriever's query-embedding cache
    query_cache_ttl_s: float = 0.0
    query_max_batch: int = 1
    io_threads: int = 8
    committed_refresh_s: float = 1.0
    # The Indexer's RAG_EMBEDDING_DOCUMENT_PRECISION; fp32 where no Indexer
    # runs (a Retriever alone embeds queries only: no int8 export to build).
    document_precision: Precision = "fp32"
    # The Indexer's RAG_INDEX_WORK_NICE, for the document encoder's own
    # compute threads (0 where no Indexer runs).
    document_nice: int = 0

    def embedder_config(self, data_dir: Path, model: str | None = None) -> EmbedderConfig:
        """The embedding model's configuration (`model`: another model, e.g.
        the cross-lingual one, on the same backend settings)."""
        source = self.embedding
        return EmbedderConfig(
            model=source.embedding_model if model is None else model,
            batch_size=self.embedding_batch_size,
            query_cache_size=self.query_cache_size,
            query_cache_ttl_s=self.query_cache_ttl_s,
            backend=source.embedding_backend,
            onnx_cache_dir=source.embedding_cache_dir or data_dir / ONNX_CACHE_SUBDIR,
            threads=source.embedding_threads,
            onnx_spin=source.embedding_onnx_spin,
            query_max_batch=self.query_max_batch,
            document_precision=self.document_precision,
            query_precision=source.embedding_query_precision,
            document_nice=self.document_nice,
            languages=declared_languages(source.embedding_languages),
            prompt_source=source.embedding_prompts,
            query_prompt=source.embedding_query_prompt,
            passage_prompt=source.embedding_passage_prompt,
        )


@dataclass
class SharedParts:
    embedder: Embedder
    storage: Storage
    executor: ThreadPoolExecutor
    # The Retriever's view of the commit point; an in-process Indexer advances it.
    committed: CommittedGeneration
    # The second, cross-lingual model (RAG_CROSS_LINGUAL_MODEL; None: none).
    cross_lingual: Embedder | None = None

    def index_status(self) -> tuple[int, ReleaseVerdict | None]:
        """The served generation and the latest release verdict (IndexStatus)."""
        deadline = unrequested_deadline()
        return self.committed.current(deadline), read_release(self.storage.manifest, deadline)

    def close(self) -> None:
        self.storage.close()
        self.executor.shutdown(wait=False, cancel_futures=True)


def document_precision(settings: EmbeddingSettings) -> Precision:
    """What the Indexer encodes documents in (RAG_EMBEDDING_DOCUMENT_PRECISION,
    `auto` resolved for this model, backend and CPU), logged with the reason."""
    choice = choose_document_precision(
        settings.embedding_document_precision,
        settings.embedding_model,
        settings.embedding_backend,
        int8_dot_product(),
    )
    log.info(
        "document_precision_chosen",
        setting=settings.embedding_document_precision,
        precision=choice.precision,
        reason=choice.reason,
    )
    return choice.precision


def open_parts(
    stores: StoreSettings,
    config: PartsConfig,
    embedder: Embedder | None = None,
    cross_lingual: Embedder | None = None,
) -> SharedParts:
    """Open everything (`embedder`, `cross_lingual` may be shared, e.g. by
    tests; the latter only where RAG_CROSS_LINGUAL_MODEL names its model)."""
    embedder = embedder or Embedder(config.embedder_config(stores.data_dir))
    cross_lingual = cross_lingual or open_cross_lingual(stores, config)
    storage = open_storage(stores, embedder.dim, cross_lingual.dim if cross_lingual else 0)
    storage.second_encoder = cross_lingual
    executor = ThreadPoolExecutor(max_workers=config.io_threads, thread_name_prefix="rag-io")
    committed = CommittedGeneration.of(storage.manifest, config.committed_refresh_s)
    return SharedParts(embedder, storage, executor, committed, cross_lingual)


def open_cross_lingual(stores: StoreSettings, config: PartsConfig) -> Embedder | None:
    """The second model's embedder, when RAG_CROSS_LINGUAL_MODEL names one
    (`auto`: as `cross_lingual_model_for` decides)."""
    model = config.embedding.cross_lingual_model.strip()
    if model == AUTO_CROSS_LINGUAL:
        model = cross_lingual_model_for(stores)
        log.info("cross_lingual_model_chosen", setting=AUTO_CROSS_LINGUAL, model=model or "none")
    if not model:
        return None
    # Its own prompts (mUSE: none) and languages, never the first model's.
    source = replace(
        config.embedder_config(stores.data_dir, model),
        prompt_source="model",
        query_prompt=None,
        passage_prompt=None,
        languages=frozenset(),
        document_precision="fp32",
        query_precision="fp32",
    )
    return Embedder(source)


def cross_lingual_model_for(stores: StoreSettings) -> str:
    """What RAG_CROSS_LINGUAL_MODEL=auto means for this index: what an index
    already built recorded (none for one from before second vectors), the
    packaged mUSE for a new one, none for the Qdrant server store (it carries
    no second vector). So a new index gets the channel that crosses
    languages, and an existing one opens as it was built, without a re-index."""
    if stores.is_server:
        return ""
    manifest = open_manifest(stores)
    try:
        deadline = unrequested_deadline()
        recorded = manifest.get_meta(CROSS_LINGUAL_META, deadline)
        if recorded is not None:
            return _recorded_model(recorded) if recorded else ""
        built = manifest.get_meta(EMBEDDING_META, deadline) or manifest.count(deadline)
        return "" if built else DEFAULT_CROSS_LINGUAL_MODEL
    finally:
        manifest.close()


def _recorded_model(record: str) -> str:
    """The model an index's second-vector record names; a record that cannot
    be read is a clear start-up error, not a traceback."""
    try:
        model = json.loads(record)["model"]
    except (ValueError, KeyError, TypeError):
        model = None
    if not isinstance(model, str) or not model:
        raise ConfigError(
            f"RAG_CROSS_LINGUAL_MODEL=auto: this index's record of its cross-lingual model "
            f"({CROSS_LINGUAL_META}) is unreadable: {record[:200]!r}. Set "
            "RAG_CROSS_LINGUAL_MODEL to the model the index was built with (empty for none)"
        )
    return model


def check_same_embedding(first: EmbeddingSettings, second: EmbeddingSettings) -> None:
    """One embedder serves both services in one process: their settings must
    agree (but for INDEXER_ONLY_FIELDS, where the Indexer's decide)."""
    for name in EMBEDDING_FIELDS:
        ours, theirs = getattr(first, name), getattr(second, name)
        if ours != theirs:
            raise ConfigError(
                f"RAG_{name.upper()} differs between indexer ({ours!r}) and retriever "
                f"({theirs!r}); one embedder serves both, and queries must be embedded "
                "the way the index was"
            )
