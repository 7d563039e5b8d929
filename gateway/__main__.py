"""`python -m gateway`: serve the gateway with uvicorn until SIGTERM/SIGINT.

On a signal uvicorn stops accepting connections, lets in-flight requests
finish for up to RAG_SHUTDOWN_GRACE_S, then runs the app's shutdown (closing
the Retriever channel and Redis connections) and the process exits with 0.

`-h`/`--help` lists the environment variables it reads; any other argument is
refused (exit status 2) so that a typo never starts a server on the defaults.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

from gateway.settings import GatewaySettings
from services.common.cli_help import parse_command_line
from services.common.errors import ConfigError
from services.common.logging import configure_logging, get_logger
from services.common.settings import load_settings

if TYPE_CHECKING:
    import uvicorn

SUMMARY = (
    "Runs the public HTTP gateway (uvicorn): the search API and page in front of the "
    "Retriever at RAG_RETRIEVER_ADDR, behind its gates (public switch, origins, rate "
    "limits, daily budget, circuit breaker)."
)


def build_server(settings: GatewaySettings) -> uvicorn.Server:
    # Imported here so that `--help` and a settings error need neither.
    import uvicorn

    from gateway.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.gateway_port,
        # uvicorn would trust X-Forwarded-For from loopback by default; the app
        # reads it itself, from RAG_GATEWAY_FORWARDED_ALLOW_IPS only (gateway/clientip.py).
        proxy_headers=False,
        timeout_graceful_shutdown=int(settings.shutdown_grace_s),
        access_log=False,  # one structured line per search is logged by the app
        log_config=None,
        server_header=False,
    )
    return uvicorn.Server(config)


def main(argv: Sequence[str] | None = None) -> int:
    parse_command_line("python -m gateway", SUMMARY, lambda: [GatewaySettings], argv)
    try:
        settings = load_settings(GatewaySettings)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_json)
    get_logger("gateway").info(
        "gateway_starting", port=settings.gateway_port, retriever=settings.retriever_addr
    )
    # uvicorn finishes its graceful shutdown and then re-raises the signal it
    # caught against the handler it found; make that a normal exit status.
    try:
        server = build_server(settings)  # reads OTEL_* (tracing)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, _exit_normally)
    server.run()
    return 0


def _exit_normally(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
