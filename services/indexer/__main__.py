"""`python -m services.indexer`: the Indexer alone (server mode, or embedded
when no Retriever process shares the data folder).

`-h`/`--help` lists the environment variables it reads; any other argument is
refused (exit status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_settings import BaseSettings

from services.common.cli_help import parse_command_line
from services.common.cpu import prefer_passive_waits

SUMMARY = (
    "Runs the Indexer gRPC service: ingests documents into the vector and lexical stores "
    "(embedded under RAG_DATA_DIR, or Qdrant and OpenSearch servers)."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What the service loads (its settings and the stores')."""
    from services.common.stores.settings import StoreSettings
    from services.indexer.settings import IndexerSettings

    return [IndexerSettings, StoreSettings]


def main(argv: Sequence[str] | None = None) -> None:
    parse_command_line("python -m services.indexer", SUMMARY, settings_classes, argv)
    prefer_passive_waits()  # before torch is imported (see services.common.cpu)

    from services.common.server import run_main
    from services.common.service import serve_on_parts
    from services.indexer.app import IndexerApp, indexer_parts
    from services.indexer.settings import IndexerSettings

    run_main(lambda: serve_on_parts(IndexerSettings, indexer_parts, IndexerApp))


if __name__ == "__main__":
    main()
