"""`python -m services.reranker`: serve the cross-encoder over gRPC.

Starts through the recipe every service follows (services.runtime.entry):
`-h`/`--help` lists the environment variables it reads, a configuration error
exits with status 2, SIGTERM/SIGINT stops it gracefully. A model that cannot
be loaded does not stop the process: health stays NOT_SERVING and the Info
RPC says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from services.reranker.settings import RerankerSettings
from services.runtime.entry import service_main

if TYPE_CHECKING:
    from services.reranker.app import RerankerApp
    from services.runtime.service import NoParts, ServiceRecipe

SUMMARY = (
    "Runs the Reranker gRPC service: scores (query, passage) pairs with a cross-encoder "
    "(RAG_RERANK_MODEL) for the Retriever."
)


def recipe() -> ServiceRecipe[RerankerSettings, NoParts]:
    """Its settings → no shared parts → one `RerankerApp`, which loads the
    model once its port is open."""
    from services.runtime.service import one_app

    return one_app(RerankerSettings, reranker_app)


def reranker_app(settings: RerankerSettings) -> RerankerApp:
    from services.reranker.app import RerankerApp  # torch: once the settings are checked

    return RerankerApp(settings)


def main(argv: Sequence[str] | None = None) -> None:
    service_main("python -m services.reranker", SUMMARY, lambda: [RerankerSettings], recipe, argv)


if __name__ == "__main__":
    main()
