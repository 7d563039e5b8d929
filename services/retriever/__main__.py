"""`python -m services.retriever`: the Retriever alone (server mode; in
embedded mode use `python -m services.stack`, which shares the open stores).

Starts through the recipe every service follows (services.runtime.entry):
`-h`/`--help` lists the environment variables it reads, a configuration error
exits with status 2, SIGTERM/SIGINT stops it gracefully.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic_settings import BaseSettings

from services.runtime.entry import service_main

if TYPE_CHECKING:
    from services.retriever.settings import RetrieverSettings
    from services.runtime.parts import SharedParts
    from services.runtime.service import ServiceRecipe, StoreBacked

SUMMARY = (
    "Runs the Retriever gRPC service: hybrid search (vectors and BM25, fused by RRF, "
    "reranked by the Reranker at RAG_RERANKER_ADDR) over the stores the Indexer fills."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What the recipe loads (its settings and the stores')."""
    from services.retriever.settings import RetrieverSettings
    from services.storage.settings import StoreSettings

    return [RetrieverSettings, StoreSettings]


def recipe() -> ServiceRecipe[StoreBacked[RetrieverSettings], SharedParts]:
    """Its settings and the stores' → the shared parts → one `RetrieverApp`."""
    from services.retriever.app import RetrieverApp, retriever_parts
    from services.retriever.settings import RetrieverSettings
    from services.runtime.service import data_service

    return data_service(RetrieverSettings, retriever_parts, RetrieverApp)


def main(argv: Sequence[str] | None = None) -> None:
    service_main("python -m services.retriever", SUMMARY, settings_classes, recipe, argv)


if __name__ == "__main__":
    main()
