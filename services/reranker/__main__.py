"""`python -m services.reranker`: serve the cross-encoder over gRPC.

Exit status 2 on invalid settings; a model that cannot be loaded does not stop
the process: health stays NOT_SERVING and the Info RPC says why. `-h`/`--help`
lists the environment variables it reads; any other argument is refused (exit
status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from services.common.cli_help import parse_command_line
from services.common.cpu import prefer_passive_waits
from services.common.errors import ConfigError
from services.common.logging import configure_logging
from services.common.service import run_apps
from services.common.settings import load_settings
from services.reranker.settings import RerankerSettings

SUMMARY = (
    "Runs the Reranker gRPC service: scores (query, passage) pairs with a cross-encoder "
    "(RAG_RERANK_MODEL) for the Retriever."
)


async def serve(settings: RerankerSettings) -> None:
    # Imported here so a settings error is reported before torch loads, and
    # after the threading policy is set (torch reads it on import).
    prefer_passive_waits()
    from services.reranker.app import RerankerApp

    await run_apps([RerankerApp(settings)])


def main(argv: Sequence[str] | None = None) -> int:
    parse_command_line("python -m services.reranker", SUMMARY, lambda: [RerankerSettings], argv)
    try:
        settings = load_settings(RerankerSettings)
    except ConfigError as exc:
        print(f"reranker: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_json)
    try:
        asyncio.run(serve(settings))
    except ConfigError as exc:  # found while starting: OTEL_*, a taken port
        print(f"reranker: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
