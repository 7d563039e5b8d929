"""Which embedding models an index's vectors come from, as its manifest
records them (`EMBEDDING_META`, `CROSS_LINGUAL_META`), against the models a
service is configured with.

The Indexer refuses to add vectors of another model (an unchanged document is
never re-embedded, so the index would mix two vector spaces); the Retriever
refuses to embed questions with another model than the documents' (its vector
channel would rank by noise: two 384-dimensional models fail nothing by
accident). Both read the record here; only the Indexer writes it.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from services.core.errors import ConfigError, RagError
from services.core.logging import get_logger
from services.embedding.embedder import EmbeddingIdentity
from services.storage.base import unrequested_deadline
from services.storage.manifest import CROSS_LINGUAL_META, EMBEDDING_META, Manifest

log = get_logger(__name__)


def recorded_model(manifest: Manifest) -> EmbeddingIdentity | None:
    """The model the index's vectors were embedded with; None when not
    recorded (an empty index, or one from before models were recorded)."""
    recorded = manifest.get_meta(EMBEDDING_META, unrequested_deadline())
    return EmbeddingIdentity(**json.loads(recorded)) if recorded else None


def recorded_cross_lingual(manifest: Manifest) -> str:
    """The record of the second vectors' model: "" when the chunks have none."""
    return manifest.get_meta(CROSS_LINGUAL_META, unrequested_deadline()) or ""


def model_record(identity: EmbeddingIdentity) -> str:
    return json.dumps(asdict(identity))


def cross_lingual_record(identity: EmbeddingIdentity | None) -> str:
    return model_record(identity) if identity is not None else ""


def model_problem(manifest: Manifest, configured: EmbeddingIdentity, who: str) -> str | None:
    """Why `configured` cannot serve this index's vectors (None: it can).
    `who` names the settings that configured it, for the message."""
    built_with = recorded_model(manifest)
    if built_with is None or not manifest.count(unrequested_deadline()):
        return None
    if built_with.compatible_with(configured):
        return None
    return (
        f"this index was embedded with {built_with.describe()}, but {who} give "
        f"{configured.describe()}: vectors of different models, or of the same model fed other "
        "prompts, are not comparable. Index into a fresh data directory (or vector collection) "
        "with the new model or prompts, or configure the old ones again"
    )


def cross_lingual_problem(manifest: Manifest, configured: EmbeddingIdentity | None) -> str | None:
    """As `model_problem`, for the second vector: an index holds one model's
    second vectors for every chunk or none."""
    recorded = recorded_cross_lingual(manifest)
    if not manifest.count(unrequested_deadline()) or recorded == cross_lingual_record(configured):
        return None
    built_with = EmbeddingIdentity(**json.loads(recorded)) if recorded else None
    if built_with is not None and configured is not None and built_with.compatible_with(configured):
        return None
    return (
        f"this index was embedded with {_describe(built_with)} as its cross-lingual "
        f"model, but RAG_CROSS_LINGUAL_MODEL gives {_describe(configured)}: an index "
        "holds one model's second vectors for every chunk or none. Index into a fresh "
        "data directory (or schema) with the new setting, or configure the old one again"
    )


def _describe(identity: EmbeddingIdentity | None) -> str:
    return identity.describe() if identity is not None else "none"


def check_served_models(
    manifest: Manifest, embedder: EmbeddingIdentity, cross_lingual: EmbeddingIdentity | None
) -> None:
    """For a Retriever: refuse to start on an index whose vectors another
    model made (ConfigError naming both). An index it cannot read now (a
    store still starting) is served unchecked and said so: the Indexer's
    check guards every write, and the store health monitor the rest."""
    try:
        problems = [
            model_problem(manifest, embedder, "RAG_EMBEDDING_MODEL and RAG_EMBEDDING_PROMPTS"),
            cross_lingual_problem(manifest, cross_lingual),
        ]
    except RagError as exc:
        log.warning("embedding_model_unchecked", reason=str(exc))
        return
    for problem in problems:
        if problem is not None:
            raise ConfigError(f"the Retriever cannot serve this index: {problem}")
