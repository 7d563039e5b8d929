"""`python -m services.common.healthcheck HOST:PORT [SERVICE]`: exit 0 when the
gRPC server there reports SERVING for SERVICE ("" = the whole server), else 1.

For container health checks where no `grpc_health_probe` binary exists (the
docker-compose file uses it); Kubernetes has native `grpc:` probes instead.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TIMEOUT_S = 3.0


def is_serving(address: str, service: str = "", timeout_s: float = TIMEOUT_S) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def wait_until_serving(
    address: str,
    service: str = "",
    timeout_s: float = 120.0,
    poll_s: float = 0.25,
    check_alive: Callable[[], None] | None = None,
) -> bool:
    """Poll until `address` reports SERVING (True) or `timeout_s` passes
    (False). `check_alive` may raise to stop early, e.g. when the process
    that should be serving has died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check_alive is not None:
            check_alive()
        if is_serving(address, service, timeout_s=min(2.0, max(deadline - time.monotonic(), 0.1))):
            return True
        time.sleep(poll_s)
    return False


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python -m services.common.healthcheck HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    address, service = argv[0], argv[1] if len(argv) == 2 else ""
    return 0 if is_serving(address, service) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
