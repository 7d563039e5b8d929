"""`python -m services.reranker`: serve the cross-encoder over gRPC.

Exit status 2 on invalid settings; a model that cannot be loaded does not stop
the process: health stays NOT_SERVING and the Info RPC says why. `-h`/`--help`
lists the environment variables it reads; any other argument is refused (exit
status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.cli_help import parse_command_line
from services.common.cpu import prefer_passive_waits
from services.common.logging import configure_logging
from services.common.server import run_main
from services.common.service import run_apps
from services.common.settings import load_settings
from services.reranker.settings import RerankerSettings

SUMMARY = (
    "Runs the Reranker gRPC service: scores (query, passage) pairs with a cross-encoder "
    "(RAG_RERANK_MODEL) for the Retriever."
)


async def serve() -> None:
    """Settings first (an error is reported before torch loads), then the app."""
    settings = load_settings(RerankerSettings)
    configure_logging(settings.log_level, settings.log_json)
    from services.reranker.app import RerankerApp

    await run_apps([RerankerApp(settings)])


def main(argv: Sequence[str] | None = None) -> None:
    """The recipe every service follows: arguments checked, the threading
    policy set before torch loads, then `run_main` (a configuration error,
    found on loading or on starting, prints and exits with status 2)."""
    parse_command_line("python -m services.reranker", SUMMARY, lambda: [RerankerSettings], argv)
    prefer_passive_waits()
    run_main(serve)


if __name__ == "__main__":
    main()
