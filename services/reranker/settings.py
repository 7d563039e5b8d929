"""Reranker settings (`RAG_` prefix): which cross-encoder, how it runs, and the
request limits. Field names are chosen so the variables read naturally:
`rerank_model` → `RAG_RERANK_MODEL`, `reranker_port` → `RAG_RERANKER_PORT`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator, model_validator

from services.core.environment import default_data_dir
from services.embedding.packaged_files import MODELS, default_cache_dir
from services.embedding.packaged_models import DEFAULT_RERANKER, PREFIX, model_name
from services.runtime.settings import GrpcServiceSettings

Backend = Literal["torch", "onnx", "onnx-int8"]
Activation = Literal["none", "sigmoid"]

# Installed by `make install` from a pinned wheel (services.embedding.packaged_files);
# input length and candidate count chosen by measurement (docs/benchmarks.md).
DEFAULT_MODEL = DEFAULT_RERANKER
PACKAGED_BACKEND: Backend = "onnx-int8"


class RerankerSettings(GrpcServiceSettings):
    reranker_port: int = Field(50053, ge=0, le=65535, description="gRPC port (0: any free port)")
    reranker_metrics_port: int = Field(
        9467,
        ge=0,
        le=65535,
        description="Prometheus metrics port of the Reranker (0: any free port)",
    )
    rerank_model: str = Field(
        DEFAULT_MODEL,
        min_length=1,
        description="a packaged model (packaged:ms-marco-MiniLM-L-12-v2, "
        "packaged:answerai-colbert-small-v1) or a "
        "sentence-transformers CrossEncoder: local directory or hub name",
    )
    rerank_backend: Backend = Field(
        "torch",
        description="torch | onnx | onnx-int8 (a packaged model: onnx-int8, its only form)",
    )
    rerank_max_length: int = Field(
        128,
        ge=16,
        le=8192,
        description="tokens per (query, passage), or per passage for a late-interaction model; "
        "a packaged model's own default when unset (128 for the cross-encoder: half the cost "
        "of 256; 256 for ColBERT; docs/benchmarks.md)",
    )
    rerank_batch_size: int = Field(8, ge=1, le=512)
    rerank_device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$")
    rerank_activation: Activation = Field("none", description="applied to the raw logits")
    rerank_max_passages: int = Field(64, ge=1, le=10_000, description="per request")
    rerank_max_passage_chars: int = Field(
        2000, ge=16, le=1_000_000, description="longer passages (and queries) are truncated"
    )
    # A call with no deadline had none at all: forty of 64 long passages held the
    # model for four minutes while calls with deadlines timed out in the queue
    # (probe 3). The Retriever caps its own calls the same way (RAG_DEFAULT_DEADLINE_MS).
    rerank_default_deadline_ms: int = Field(
        10_000,
        ge=50,
        le=3_600_000,
        description="a call's deadline when its caller sets none, and the longest any call "
        "may take: past it the scores so far are returned, marked partial",
    )
    rerank_safety_margin_ms: float = Field(
        15.0, ge=0, le=10_000, description="kept free before the RPC deadline for the reply"
    )
    rerank_threads: int = Field(0, ge=0, le=256, description="compute threads (0: library default)")
    rerank_onnx_spin: bool = Field(
        False, description="ONNX threads spin while idle: faster alone, slower on shared cores"
    )
    rerank_workers: int = Field(
        64,
        ge=1,
        le=256,
        description="requests scoring at once: their pairs share the model's batches; "
        "more wait their turn, each answered by its deadline",
    )
    rerank_cache_dir: Path = Field(
        default_factory=lambda: default_data_dir() / "reranker",
        description="where ONNX exports of the model are kept",
    )
    rerank_model_cache: Path = Field(
        default_factory=default_cache_dir,
        description="where `make install` put the packaged models' files",
    )

    @field_validator("rerank_cache_dir", "rerank_model_cache", mode="before")
    @classmethod
    def _folder(cls, value: object, info: ValidationInfo) -> object:
        # Blank became Path("."): exports written into, and packaged models
        # looked for in, whatever folder the process started in (probe).
        if isinstance(value, str):
            if not value.strip():
                name = f"RAG_{(info.field_name or '').upper()}"
                raise ValueError(f"{name} is blank: unset it for its default, or name a folder")
            return Path(value.strip()).expanduser()
        return value

    @model_validator(mode="before")
    @classmethod
    def _packaged_runs_int8(cls, data: Any) -> Any:
        """A packaged model ships as an int8 ONNX graph only: that is its
        backend unless another is asked for, which is refused."""
        if not isinstance(data, dict):
            return data
        model = model_name(str(data.get("rerank_model", DEFAULT_MODEL)))
        if not model.startswith(PREFIX):
            return data  # a folder or hub name, kept as given (a blank one is refused below)
        data["rerank_model"] = model
        backend = data.setdefault("rerank_backend", PACKAGED_BACKEND)
        if backend in get_args(Backend) and backend != PACKAGED_BACKEND:  # else: named below
            raise ValueError(
                f"RAG_RERANK_MODEL={model} ships as an int8 ONNX graph: "
                f"use RAG_RERANK_BACKEND={PACKAGED_BACKEND}"
            )
        known = MODELS.get(model)
        if known is None:  # else the service would start, NOT_SERVING for good
            names = ", ".join(sorted(MODELS))
            raise ValueError(f"RAG_RERANK_MODEL={model} is not a packaged model: known are {names}")
        # Its measured length unless RAG_RERANK_MAX_LENGTH says otherwise.
        data.setdefault("rerank_max_length", known.max_length)
        return data

    @field_validator("rerank_model")
    @classmethod
    def _model_named(cls, model: str) -> str:
        if not model.strip():
            raise ValueError("RAG_RERANK_MODEL is blank: name a packaged model or a folder")
        return model

    @model_validator(mode="after")
    def _margin_within_deadline(self) -> RerankerSettings:
        if self.rerank_safety_margin_ms >= self.rerank_default_deadline_ms:
            raise ValueError(
                "RAG_RERANK_SAFETY_MARGIN_MS must be less than RAG_RERANK_DEFAULT_DEADLINE_MS "
                f"({self.rerank_safety_margin_ms:g} >= {self.rerank_default_deadline_ms})"
            )
        return self

    @field_validator("rerank_device")
    @classmethod
    def _onnx_runs_on_cpu(cls, device: str, info: ValidationInfo) -> str:
        backend = info.data.get("rerank_backend")
        if backend is not None and backend != "torch" and device != "cpu":
            raise ValueError(
                f"RAG_RERANK_BACKEND={backend} runs on CPU only; use RAG_RERANK_DEVICE=cpu"
            )
        return device
