"""`python -m services.indexer`: the Indexer alone (server mode, or embedded
when no Retriever process shares the data folder).

`-h`/`--help` lists the environment variables it reads; any other argument is
refused (exit status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic_settings import BaseSettings

from services.common.cli_help import parse_command_line
from services.common.cpu import prefer_passive_waits

SUMMARY = (
    "Runs the Indexer gRPC service: ingests documents into the vector and lexical stores "
    "(embedded under RAG_DATA_DIR, or Qdrant and OpenSearch servers)."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What `serve()` loads."""
    from services.common.stores.settings import StoreSettings
    from services.indexer.settings import IndexerSettings

    return [IndexerSettings, StoreSettings]


async def serve() -> None:
    from services.common.logging import configure_logging
    from services.common.parts import open_parts
    from services.common.service import run_apps
    from services.common.settings import load_settings
    from services.common.stores.settings import StoreSettings
    from services.indexer.app import IndexerApp, indexer_parts
    from services.indexer.settings import IndexerSettings

    settings, stores = load_settings(IndexerSettings), load_settings(StoreSettings)
    configure_logging(settings.log_level, settings.log_json)
    parts = await asyncio.to_thread(open_parts, stores, indexer_parts(settings))
    app = IndexerApp(settings, parts)
    await run_apps(
        [app], parts.close, mode=stores.resolved_mode().value, data_dir=str(stores.data_dir)
    )


def main(argv: Sequence[str] | None = None) -> None:
    parse_command_line("python -m services.indexer", SUMMARY, settings_classes, argv)
    prefer_passive_waits()  # before torch is imported (see services.common.cpu)

    from services.common.server import run_main

    run_main(serve)


if __name__ == "__main__":
    main()
