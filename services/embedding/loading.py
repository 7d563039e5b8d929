"""Which backend loads a model: a packaged model's own runtime
(services.embedding.packaged_models), else sentence-transformers.

Its own module because it is the one place that knows every backend: the
Embedder imports it when it is built (the backends pull in torch and ORT),
and no backend imports it back.
"""

from __future__ import annotations

from services.core.errors import ConfigError
from services.embedding.config import MULTILINGUAL_MODEL, QUERY_PRECISION_VARIABLE, EmbedderConfig
from services.embedding.model_runtime import ModelRuntime
from services.embedding.packaged_models import packaged


def load_runtime(config: EmbedderConfig) -> ModelRuntime:
    """The backend of `config.model`: a packaged model's own, else sentence-transformers."""
    found = packaged(config.model)
    if config.query_precision != "fp32" and config.model != MULTILINGUAL_MODEL:
        # int8 queries were measured for that model only (bench/results/notes/int8_queries.md).
        raise ConfigError(
            f"{QUERY_PRECISION_VARIABLE}={config.query_precision} is supported for "
            f"{MULTILINGUAL_MODEL} only, not {config.model}: set it to fp32"
        )
    if found is not None and found.runtime is not None:
        return found.runtime(config)
    from services.embedding.st_runtime import load_sentence_transformer  # pulls in torch

    return load_sentence_transformer(config)
