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
    """What `services.stack.runtime.serve(indexer=True, retriever=True)` loads."""
    from services.common.stores.settings import StoreSettings
    from services.indexer.settings import IndexerSettings
    from services.retriever.settings import RetrieverSettings

    return [IndexerSettings, RetrieverSettings, StoreSettings]


def main(argv: Sequence[str] | None = None) -> None:
    parse_command_line("python -m services.stack", SUMMARY, settings_classes, argv)
    prefer_passive_waits()  # before torch is imported (see services.common.cpu)

    from services.common.server import run_main
    from services.stack.runtime import serve

    run_main(lambda: serve(indexer=True, retriever=True))


if __name__ == "__main__":
    main()
