"""Opening an index directly (the stack stopped) as the stack built it: with
the second, cross-lingual vector when RAG_CROSS_LINGUAL_MODEL=auto (the
default) gave it one, so a test that reads the stores after a stack process
ran on the defaults opens the same shard or schema."""

from __future__ import annotations

from services.embedding.muse_runtime import DIM as MUSE_DIM
from services.runtime.embedding_settings import DEFAULT_CROSS_LINGUAL_MODEL
from services.runtime.parts import cross_lingual_model_for
from services.storage.base import LexicalStore, VectorStore
from services.storage.factory import Storage, open_storage, open_stores
from services.storage.settings import StoreSettings

SECOND_DIMS = {"": 0, DEFAULT_CROSS_LINGUAL_MODEL: MUSE_DIM}


def built_second_dim(settings: StoreSettings) -> int:
    """The second vector's dimension the index was built with (0: none)."""
    return SECOND_DIMS[cross_lingual_model_for(settings)]


def open_built_storage(settings: StoreSettings, dim: int) -> Storage:
    return open_storage(settings, dim, built_second_dim(settings))


def open_built_stores(settings: StoreSettings, dim: int) -> tuple[VectorStore, LexicalStore]:
    return open_stores(settings, dim, built_second_dim(settings))
