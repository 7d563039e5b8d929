"""The two ways the embedder runs its model: sentence-transformers (PyTorch),
and ONNX Runtime on an export of the same transformer.

Both take the loaded SentenceTransformer, so they share its tokenizer, its
max_seq_length truncation and its weights; the ONNX path replaces only the
transformer's forward pass and does the model's mean pooling and L2
normalisation in numpy. Measured on all-MiniLM-L6-v2 (fp32): cosine to the
torch vectors ≥ 0.9999998 over the 300 SciFact test queries and 128 abstracts,
and the same top 10 documents for every one of those queries against the
torch-built index, so an index built by one backend is searched correctly with
the other. A warm query takes ~4-5 ms instead of ~11-13 ms (2 cores); long
passages cost the same in both.

Dynamic int8 (`precision="int8"`) is for documents only, 1.68x as fast as
fp32 per chunk on a quiet 2-core machine (bench.load.document_encoder; ~1.9x
with passes of ~4 chunks, which the query-wait bound of `document_pass_chars`
rules out in the embedded stack). Its query vectors drift to
cosine 0.989 (mean 0.993), enough to reorder near-ties, so queries always go
through fp32. Document vectors drift about as much (cosine ≥ 0.988, mean 0.995,
on 1,500 SciFact chunks), and fp32 queries ranking them keep their top-1 on a
SciFact sample (tests/embedding/test_document_precision.py); what the
drift costs in nDCG@10 is measured by `make eval` (SciFact hybrid: 0.720
int8 vs 0.717 fp32).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.core.thread_priority import built_at_lower_priority
from services.embedding.config import Precision
from services.embedding.onnx_files import open_session

log = get_logger(__name__)

_TOKEN_STATES = "last_hidden_state"
# Every row of a batch is padded to its longest, and ORT spends as much on a
# pad token as on a real one (measured, batches of 16 SciFact queries, 2 cores:
# one padded batch 111 queries/s, one call per query 118, batches split where
# a row is shorter than 0.75 x the longest 184; 0.9: 165, 0.6: 165).
MIN_LENGTH_RATIO = 0.75
_ONNX_MODULES = ("Transformer", "Pooling", "Normalize")


class TextEncoder(Protocol):
    name: str

    def encode(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per text, in input order."""
        ...


class OpenedOnFirstUse:
    """A TextEncoder whose session is opened by its first `encode`.

    For a second graph that only some processes use: the int8 document graph
    of multilingual-e5-small holds ~360 MiB of its own once open (measured:
    1,179 MiB anonymous with both graphs open against 821 with the query
    graph alone), and a Retriever, or a stack that is not indexing, never
    encodes a document. Whatever can fail slowly (building the graph file) is
    done at start-up by the caller; only opening the session waits. It opens
    from a thread at `nice` (index work's priority: a session's compute
    threads keep the priority of the thread that opens it) and logs
    `document_encoder_opened` with `model`."""

    def __init__(
        self, name: str, open_encoder: Callable[[], TextEncoder], nice: int = 0, model: str = ""
    ) -> None:
        self.name = name
        self._open_encoder = open_encoder
        self._nice = nice
        self._model = model
        self._encoder: TextEncoder | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._encoder is not None

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._opened().encode(texts)

    def _opened(self) -> TextEncoder:
        with self._lock:
            if self._encoder is None:
                self._encoder = built_at_lower_priority(self._open_encoder, self._nice)
                log.info("document_encoder_opened", model=self._model)
            return self._encoder


class TorchTextEncoder:
    """The SentenceTransformer itself."""

    name = "torch"

    def __init__(self, model: Any, batch_size: int) -> None:
        self._model = model
        self._batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


class OnnxTextEncoder:
    """The model's transformer exported to ONNX (fp32, or its dynamic int8
    quantization), pooled like the model. Two encoders of one model (fp32 for
    queries, int8 for documents) share its tokenizer and one cache entry."""

    name = "onnx"

    def __init__(
        self,
        model: Any,
        cache_dir: Path,
        batch_size: int,
        threads: int,
        spin: bool,
        precision: Precision = "fp32",
        graph: tuple[Path, list[str]] | None = None,
    ) -> None:
        """`graph`: what `exported_graph` returned for these arguments, when
        the caller has it (else it is exported or found here)."""
        self._model = model
        self._batch_size = batch_size
        self.dim = int(model.get_embedding_dimension() or 0)
        self.model_path, self._input_names = graph or exported_graph(model, cache_dir, precision)
        self._session = open_session(self.model_path, threads, spin)
        self._pads_right = getattr(model.tokenizer, "padding_side", "right") == "right"

    def encode(self, texts: list[str]) -> np.ndarray:
        features = self._features(texts)
        feeds = {name: np.asarray(features[name], dtype=np.int64) for name in self._input_names}
        lengths = feeds["attention_mask"].sum(axis=1)
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for rows in similar_length_groups(lengths, self._batch_size):
            width = int(lengths[rows[0]])
            columns = slice(0, width) if self._pads_right else slice(-width, None)
            group = {name: feed[rows, columns] for name, feed in feeds.items()}
            (token_states,) = self._session.run([_TOKEN_STATES], group)
            vectors[rows] = mean_pooled_unit_vectors(token_states, group["attention_mask"])
        return vectors

    def _features(self, texts: list[str]) -> dict[str, Any]:
        # The model's own preprocessing: same tokenizer, lower-casing and
        # max_seq_length truncation as the torch path.
        return dict(self._model.preprocess(texts))


def exported_graph(model: Any, cache_dir: Path, precision: Precision) -> tuple[Path, list[str]]:
    """The ONNX file of `model`'s transformer in `precision` (exported, and
    quantized, at the first call for these weights; found in the cache after)
    and the input names it takes."""
    # torch only here: the packaged e5 model imports this module's helpers
    # and serves without it
    from services.embedding.onnx_export import OnnxExporter, model_input_names

    network = _mean_pooled_transformer(model).auto_model
    sample = dict(model.preprocess(["warm-up query"]))
    input_names = model_input_names(network, sample)
    inputs = {name: sample[name] for name in input_names}
    path = OnnxExporter(cache_dir).ensure(
        network, inputs, quantize=precision == "int8", output=_TOKEN_STATES
    )
    return path, input_names


def similar_length_groups(
    lengths: np.ndarray, max_rows: int, min_ratio: float = MIN_LENGTH_RATIO
) -> list[np.ndarray]:
    """Row indices, longest first, cut into groups of at most `max_rows`
    where no row is shorter than `min_ratio` times its group's longest."""
    groups: list[np.ndarray] = []
    current: list[int] = []
    for row in np.argsort(-lengths, kind="stable"):
        longest = lengths[current[0]] if current else 0
        if current and (len(current) == max_rows or lengths[row] < min_ratio * longest):
            groups.append(np.asarray(current))
            current = []
        current.append(int(row))
    if current:
        groups.append(np.asarray(current))
    return groups


def mean_pooled_unit_vectors(token_states: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Mean over the real (unmasked) tokens, then L2 normalisation, with the
    same epsilons as sentence-transformers' Pooling and Normalize modules."""
    weights = attention_mask[..., None].astype(np.float32)
    pooled = (token_states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return unit_vectors(pooled)


def unit_vectors(rows: np.ndarray) -> np.ndarray:
    """Each row L2-normalised (Normalize's epsilon), as float32."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


def _mean_pooled_transformer(model: Any) -> Any:
    """The Transformer module of a Transformer → mean Pooling (→ Normalize)
    model; any other layout would need its own numpy pooling, so it is refused."""
    modules = list(model)
    names = tuple(type(module).__name__ for module in modules)
    pooling_mode = getattr(modules[1], "pooling_mode", None) if len(modules) > 1 else None
    if names not in (_ONNX_MODULES[:2], _ONNX_MODULES) or pooling_mode != "mean":
        raise ConfigError(
            "RAG_EMBEDDING_BACKEND=onnx supports Transformer → mean Pooling (→ Normalize) "
            f"models; this one is {' → '.join(names)} (pooling {pooling_mode!r}): "
            "use RAG_EMBEDDING_BACKEND=torch"
        )
    return modules[0]
