"""`python -m services.stack`: the embedded stack — Indexer and Retriever in
one process on their own ports (embedded stores allow a single writer).

`-h`/`--help` lists the environment variables it reads; any other argument is
refused (exit status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_settings import BaseSettings

from services.common.cli_help import parse_command_line
from services.common.cpu import prefer_passive_waits

SUMMARY = (
    "Runs the Indexer and the Retriever gRPC services in one process, on their own ports, "
    "sharing one embedding model and the open stores."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What `serve()` loads."""
    from services.common.stores.settings import StoreSettings
    from services.indexer.settings import IndexerSettings
    from services.retriever.settings import RetrieverSettings

    return [IndexerSettings, RetrieverSettings, StoreSettings]


async def serve() -> None:
    from services.common.logging import configure_logging
    from services.common.service import run_apps
    from services.common.settings import load_settings
    from services.common.stores.settings import StoreSettings
    from services.indexer.settings import IndexerSettings
    from services.retriever.settings import RetrieverSettings
    from services.stack.embedded import EmbeddedStack

    indexer, retriever = load_settings(IndexerSettings), load_settings(RetrieverSettings)
    stores = load_settings(StoreSettings)
    configure_logging(indexer.log_level, indexer.log_json)
    stack = await EmbeddedStack.open(stores, indexer, retriever)
    await run_apps(
        stack.apps,
        stack.parts.close,
        mode=stores.resolved_mode().value,
        data_dir=str(stores.data_dir),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parse_command_line("python -m services.stack", SUMMARY, settings_classes, argv)
    prefer_passive_waits()  # before torch is imported (see services.common.cpu)

    from services.common.server import run_main

    run_main(serve)


if __name__ == "__main__":
    main()
