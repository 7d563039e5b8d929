"""`python -m gateway`: serve the gateway until SIGTERM/SIGINT.

Starts through the recipe every service follows (services.runtime.entry):
`-h`/`--help` lists the environment variables it reads, a configuration error
(a setting, an OTEL_* variable, a port that cannot be had) exits with status 2
naming it. On a signal the gateway stops accepting connections, lets
in-flight requests finish for up to RAG_SHUTDOWN_GRACE_S, then runs the app's
shutdown (closing the Retriever channel and Redis connections) and the
process exits with 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.settings import GatewaySettings
from services.runtime.entry import service_main

if TYPE_CHECKING:
    from services.runtime.service import NoParts, ServiceRecipe

SUMMARY = (
    "Runs the public HTTP gateway (uvicorn): the search API and page in front of the "
    "Retriever at RAG_RETRIEVER_ADDR, behind its gates (public switch, origins, rate "
    "limits, daily budget, circuit breaker)."
)


def recipe() -> ServiceRecipe[GatewaySettings, NoParts]:
    """Its settings → no shared parts → one `GatewayApp` (uvicorn)."""
    from gateway.service import GatewayApp
    from services.runtime.service import one_app

    return one_app(GatewaySettings, GatewayApp)


def main(argv: Sequence[str] | None = None) -> None:
    service_main("python -m gateway", SUMMARY, lambda: [GatewaySettings], recipe, argv)


if __name__ == "__main__":
    main()
