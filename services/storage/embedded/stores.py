"""Opens the embedded (single-machine) store pair under one data directory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from services.core.analysis import TextAnalyzer
from services.storage.base import (
    DEFAULT_VECTOR_QUANTIZATION,
    DEFAULT_VECTOR_SEARCH,
    SearchEf,
    VectorQuantization,
)
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.lexical_fields import FIELD_BOOSTS

VECTOR_SUBDIR = "vectors"
LEXICAL_SUBDIR = "lexical"


def open_embedded_stores(
    data_dir: Path,
    dim: int,
    field_boosts: Mapping[str, float] = FIELD_BOOSTS,
    *,
    search_ef: SearchEf = DEFAULT_VECTOR_SEARCH,
    analyzer: TextAnalyzer | None = None,
    optimize_apart: bool = True,
    second_dim: int = 0,
    quantization: VectorQuantization = DEFAULT_VECTOR_QUANTIZATION,
) -> tuple[EdgeVectorStore, TantivyLexicalStore]:
    """Vector store in `data_dir/vectors`, lexical store in `data_dir/lexical`
    (`second_dim`: each chunk also carries the second, cross-lingual vector)."""
    vectors = EdgeVectorStore(
        Path(data_dir) / VECTOR_SUBDIR,
        dim,
        search_ef=search_ef,
        optimize_apart=optimize_apart,
        second_dim=second_dim,
        quantization=quantization,
    )
    try:
        lexical = TantivyLexicalStore(
            Path(data_dir) / LEXICAL_SUBDIR, field_boosts=field_boosts, analyzer=analyzer
        )
    except BaseException:
        vectors.close()  # do not leave the shard open when start-up fails half-way
        raise
    return vectors, lexical
