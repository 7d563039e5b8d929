"""The sentence-transformers embedding backend: any model folder or name that
`SentenceTransformer` loads, run in PyTorch or, where the model's layout
allows, in ONNX Runtime on an export of the same transformer
(services.embedding.text_encoders); documents optionally through a dynamic int8
export. It declares the model's dimension, weights digest, its own prompts
(`prompts` in config_sentence_transformers.json) and maximum input length.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.core.thread_priority import built_at_lower_priority
from services.embedding.config import (
    BACKEND_VARIABLE,
    DOCUMENT_PRECISION_VARIABLE,
    INT8_ON_TORCH,
    EmbedderConfig,
    Precision,
)
from services.embedding.model_runtime import ModelRuntime, usable_cpus
from services.embedding.packaged_models import model_path
from services.embedding.prompts import model_prompts

if TYPE_CHECKING:
    from services.embedding.text_encoders import TextEncoder

log = get_logger(__name__)


def load_sentence_transformer(config: EmbedderConfig) -> ModelRuntime:
    """The model of `config.model` with its query and document encoders."""
    _check_backend(config)
    model = _load(config)
    queries = _encoder_for(config, model)
    return ModelRuntime(
        queries=queries,
        documents=_document_encoder(config, model, queries),
        dim=int(model.get_embedding_dimension() or 0),
        weights=_weights_digest(model),
        declared_prompts=model_prompts(model),
        max_input_tokens=int(getattr(model, "max_seq_length", 0) or 0),
        backend=queries.name,
    )


def _load(config: EmbedderConfig) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    path = model_path(config.model, config.onnx_cache_dir)
    try:
        model = SentenceTransformer(path, device=config.device)
    except Exception as exc:
        # Which variable named it is the caller's (RAG_EMBEDDING_MODEL or
        # RAG_CROSS_LINGUAL_MODEL); both are named, with what a name may be.
        reason = " ".join(str(exc).split())[:300]
        raise ConfigError(
            f"cannot load embedding model {config.model!r} (RAG_EMBEDDING_MODEL or "
            "RAG_CROSS_LINGUAL_MODEL: a packaged: name, a local model folder, or a model "
            f"already in the Hugging Face cache; the hub is not reached): {reason}"
        ) from exc
    log.info("embedding_model_loaded", model=config.model, path=path)
    return model


def _encoder_for(config: EmbedderConfig, model: Any) -> TextEncoder:
    from services.embedding.text_encoders import TorchTextEncoder

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


def _weights_digest(model: Any) -> str:
    from services.embedding.onnx_export import weights_digest

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
    tokenizer and export cache. Its graph is exported and quantized at
    start-up, so a failed quantization stops start-up rather than the first
    ingest; its session opens at the first document pass (as e5's: a
    Retriever never encodes a document), at the priority of index work
    (config.document_nice), which the session's compute threads keep."""
    from services.embedding.text_encoders import OpenedOnFirstUse, exported_graph

    if config.document_precision == "fp32":
        return queries
    assert config.onnx_cache_dir is not None  # the query encoder is ONNX: _encoder_for
    cache_dir, nice = config.onnx_cache_dir, config.document_nice
    try:
        graph = built_at_lower_priority(lambda: exported_graph(model, cache_dir, "int8"), nice)
    except Exception as exc:  # a failed export must stop start-up with a readable reason
        raise ConfigError(
            f"cannot export {config.model!r} for int8 documents (export cache {cache_dir}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    opened = partial(_onnx_encoder, config, cache_dir, model, precision="int8", graph=graph)
    return OpenedOnFirstUse("onnx", opened, nice, config.model)


def _onnx_encoder(
    config: EmbedderConfig,
    cache_dir: Path,
    model: Any,
    precision: Precision = "fp32",
    graph: tuple[Path, list[str]] | None = None,
) -> TextEncoder:
    from services.embedding.text_encoders import OnnxTextEncoder

    threads = config.threads or usable_cpus()
    try:
        encoder = OnnxTextEncoder(
            model, cache_dir, config.batch_size, threads, config.onnx_spin, precision, graph
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
