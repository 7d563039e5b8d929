"""`python -m services.indexer`: the Indexer alone (server mode, or embedded
when no Retriever process shares the data folder).

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
    from services.indexer.settings import IndexerSettings
    from services.runtime.parts import SharedParts
    from services.runtime.service import ServiceRecipe, StoreBacked

SUMMARY = (
    "Runs the Indexer gRPC service: ingests documents into the vector and lexical stores "
    "(embedded under RAG_DATA_DIR, or Qdrant and OpenSearch servers)."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What the recipe loads (its settings and the stores')."""
    from services.indexer.settings import IndexerSettings
    from services.storage.settings import StoreSettings

    return [IndexerSettings, StoreSettings]


def recipe() -> ServiceRecipe[StoreBacked[IndexerSettings], SharedParts]:
    """Its settings and the stores' → the shared parts → one `IndexerApp`."""
    from services.indexer.app import IndexerApp, indexer_parts
    from services.indexer.settings import IndexerSettings
    from services.runtime.service import data_service

    return data_service(IndexerSettings, indexer_parts, IndexerApp)


def main(argv: Sequence[str] | None = None) -> None:
    service_main("python -m services.indexer", SUMMARY, settings_classes, recipe, argv)


if __name__ == "__main__":
    main()
