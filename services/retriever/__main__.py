"""`python -m services.retriever`: the Retriever alone (server mode; in
embedded mode use `python -m services.stack`, which shares the open stores).

`-h`/`--help` lists the environment variables it reads; any other argument is
refused (exit status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_settings import BaseSettings

from services.common.cli_help import parse_command_line
from services.common.cpu import prefer_passive_waits

SUMMARY = (
    "Runs the Retriever gRPC service: hybrid search (vectors and BM25, fused by RRF, "
    "reranked by the Reranker at RAG_RERANKER_ADDR) over the stores the Indexer fills."
)


def settings_classes() -> Sequence[type[BaseSettings]]:
    """What the service loads (its settings and the stores')."""
    from services.common.stores.settings import StoreSettings
    from services.retriever.settings import RetrieverSettings

    return [RetrieverSettings, StoreSettings]


def main(argv: Sequence[str] | None = None) -> None:
    parse_command_line("python -m services.retriever", SUMMARY, settings_classes, argv)
    prefer_passive_waits()  # before torch is imported (see services.common.cpu)

    from services.common.server import run_main
    from services.common.service import serve_on_parts
    from services.retriever.app import RetrieverApp, retriever_parts
    from services.retriever.settings import RetrieverSettings

    run_main(lambda: serve_on_parts(RetrieverSettings, retriever_parts, RetrieverApp))


if __name__ == "__main__":
    main()
