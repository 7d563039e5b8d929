"""`python -m services.stack`: the embedded stack — Indexer and Retriever in
one process on their own ports (embedded stores allow a single writer).

Starts through the recipe every service follows (services.runtime.entry):
`-h`/`--help` lists the environment variables it reads, a configuration error
exits with status 2, SIGTERM/SIGINT stops both apps gracefully.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic_settings import BaseSettings

from services.runtime.entry import service_main

if TYPE_CHECKING:
    from services.runtime.parts import SharedParts
    from services.runtime.service import ServiceRecipe
    from services.stack.embedded import StackSettings

SUMMARY = (
    "Runs the Indexer and the Retriever gRPC services in one process, on their own ports, "
    "sharing one embedding model and the open stores."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What the recipe loads."""
    from services.indexer.settings import IndexerSettings
    from services.retriever.settings import RetrieverSettings
    from services.storage.settings import StoreSettings

    return [IndexerSettings, RetrieverSettings, StoreSettings]


def recipe() -> ServiceRecipe[StackSettings, SharedParts]:
    """Both services' settings and the stores' → one set of shared parts (one
    embedding model, the stores opened once) → the Indexer and Retriever apps."""
    from services.indexer.app import IndexerApp
    from services.indexer.settings import IndexerSettings
    from services.retriever.app import RetrieverApp
    from services.retriever.settings import RetrieverSettings
    from services.runtime.parts import open_parts
    from services.runtime.service import ServiceRecipe, stores_context
    from services.runtime.settings import (
        check_ports_apart,
        listening_ports,
        load_all,
    )
    from services.stack.embedded import StackSettings, stack_parts
    from services.storage.settings import StoreSettings

    def load() -> StackSettings:
        indexer, retriever, stores = load_all(IndexerSettings, RetrieverSettings, StoreSettings)
        # One process serves both: their ports must differ from each other's too.
        ports = listening_ports(indexer, indexer.metrics_enabled)
        check_ports_apart(ports | listening_ports(retriever, retriever.metrics_enabled))
        return StackSettings(indexer, retriever, stores)

    return ServiceRecipe(
        settings=load,
        logging=lambda loaded: loaded.indexer,
        parts=lambda loaded: open_parts(
            loaded.stores, stack_parts(loaded.indexer, loaded.retriever)
        ),
        apps=lambda loaded, parts: [
            IndexerApp(loaded.indexer, parts),
            RetrieverApp(loaded.retriever, parts),
        ],
        context=lambda loaded: stores_context(loaded.stores),
    )


def main(argv: Sequence[str] | None = None) -> None:
    service_main("python -m services.stack", SUMMARY, settings_classes, recipe, argv)


if __name__ == "__main__":
    main()
