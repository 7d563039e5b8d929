"""What an Embedder is configured with: the model, the backend that runs it
and the precision of each side, as plain values.

Kept apart from the Embedder itself so that the backends (st_runtime,
e5_runtime, muse_runtime, text_encoders) and the registry of packaged models
can read a configuration without importing the Embedder that loads them:
the dependencies run one way, Embedder → loader → backends → config.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from services.embedding.prompts import PromptSource

# The English MiniLM: the library default (fast, English only), and the
# documented fast option of the services, whose default is MULTILINGUAL_MODEL
# (services.runtime.embedding_settings; chosen by measurement, docs/benchmarks.md).
PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"
MULTILINGUAL_MODEL = "packaged:multilingual-e5-small"
EmbeddingBackend = Literal["auto", "torch", "onnx"]
# fp32: the model's own weights; int8: a dynamic int8 quantization of its ONNX
# export (per-channel weights, activations quantized per pass).
Precision = Literal["fp32", "int8"]
# The variables that select them, for messages that tell an operator what to change.
BACKEND_VARIABLE = "RAG_EMBEDDING_BACKEND"
DOCUMENT_PRECISION_VARIABLE = "RAG_EMBEDDING_DOCUMENT_PRECISION"
QUERY_PRECISION_VARIABLE = "RAG_EMBEDDING_QUERY_PRECISION"


def int8_on_torch(variable: str) -> str:
    """Why `variable`=int8 is refused with the torch backend, and what to change."""
    return (
        f"{variable}=int8 needs the ONNX embedding backend, but "
        f"{BACKEND_VARIABLE}=torch: set {BACKEND_VARIABLE} to onnx or auto, or "
        f"{variable} to fp32"
    )


INT8_ON_TORCH = int8_on_torch(DOCUMENT_PRECISION_VARIABLE)
INT8_QUERIES_ON_TORCH = int8_on_torch(QUERY_PRECISION_VARIABLE)


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
    # The precision of the document encoder, and of the query encoder (fp32
    # unless RAG_EMBEDDING_QUERY_PRECISION says int8: packaged e5 only). int8
    # needs the ONNX backend (never a silent fallback to torch).
    document_precision: Precision = "fp32"
    query_precision: Precision = "fp32"
    # The nice value of a document encoder's own compute threads (where it
    # has its own: an int8 ONNX session), so queries go first on shared
    # cores (services.core.thread_priority); 0: as the process.
    document_nice: int = 0
    # Primary language codes the model reads ("*": all); the query path leaves
    # the vector channel out for other languages. Empty: what the model
    # declares (services.embedding.packaged_models), else English.
    languages: frozenset[str] = frozenset()
    # services.embedding.prompts: where prompts come from, and
    # explicit ones (None: from the source).
    prompt_source: PromptSource = "model"
    query_prompt: str | None = None
    passage_prompt: str | None = None
