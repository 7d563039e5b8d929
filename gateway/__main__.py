"""`python -m gateway`: serve the gateway with uvicorn until SIGTERM/SIGINT.

On a signal uvicorn stops accepting connections, lets in-flight requests
finish for up to RAG_SHUTDOWN_GRACE_S, then runs the app's shutdown (closing
the Retriever channel and Redis connections) and the process exits with 0.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

import uvicorn

from gateway.app import create_app
from gateway.settings import GatewaySettings
from services.common.errors import ConfigError
from services.common.logging import configure_logging, get_logger
from services.common.settings import load_settings


def build_server(settings: GatewaySettings) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.gateway_port,
        proxy_headers=True,
        forwarded_allow_ips=settings.gateway_forwarded_allow_ips,
        timeout_graceful_shutdown=int(settings.shutdown_grace_s),
        access_log=False,  # one structured line per search is logged by the app
        log_config=None,
        server_header=False,
    )
    return uvicorn.Server(config)


def main() -> int:
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
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, _exit_normally)
    build_server(settings).run()
    return 0


def _exit_normally(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
