"""`python -m services.common.healthcheck HOST:PORT [SERVICE]`: exit 0 when the
gRPC server there reports SERVING for SERVICE ("" = the whole server), else 1.

For container health checks where no `grpc_health_probe` binary exists (the
docker-compose file uses it); Kubernetes has native `grpc:` probes instead.
"""

from __future__ import annotations

import sys

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


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python -m services.common.healthcheck HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    address, service = argv[0], argv[1] if len(argv) == 2 else ""
    return 0 if is_serving(address, service) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
